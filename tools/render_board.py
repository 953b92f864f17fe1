"""Draw the env page's picture of the board with the env's own ``rgb_array`` renderer.

    python tools/render_board.py              # writes docs/board.png

The agent (mark 1, red) plays fixed columns against ``minimax:depth=2`` (yellow) from a seeded
reset, so the picture is the same at every run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import gymnasium as gym
from PIL import Image

import connectx_gym  # noqa: F401 - registers ConnectX-v0

#: the agent's columns (0-based); the opponent answers each inside ``step``
AGENT_MOVES = (3, 2, 4, 3)
OUT = Path(__file__).resolve().parents[1] / "docs" / "board.png"


def render(agent_moves: tuple[int, ...] = AGENT_MOVES) -> Image.Image:
    """The board after ``agent_moves`` and the opponent's answers, as ``render()`` draws it."""
    env = gym.make("ConnectX-v0", render_mode="rgb_array", opponent="minimax:depth=2")
    env.reset(seed=0, options={"agent_mark": 1})
    for column in agent_moves:
        _, _, terminated, _, _ = env.step(column)
        if terminated:
            break
    return Image.fromarray(env.render())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help="the PNG to write")
    args = parser.parse_args()
    render().save(args.out, optimize=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
