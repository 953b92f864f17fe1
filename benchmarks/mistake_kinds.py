"""A policy's value-losing moves on the shipped labelled positions, sorted by kind.

``connectx accuracy`` counts the mistakes; this script says what they are, per set (game and
random play) and phase. Each mistake is one of:

- **missed a win in one**: the player to move had a winning move and played another (a mistake
  only where that move also gave up the win);
- **left a win in one**: no win in one was there, and after the move the opponent has one (an
  open threat not blocked, or a stone under the opponent's winning cell);
- **deeper**: neither (or an illegal answer); the loss of value lies further ahead.

The policy answers as in ``connectx accuracy`` (same seeds, so the same mistakes)::

    python benchmarks/mistake_kinds.py runs/selfplay/final.npz            # dev split
    python benchmarks/mistake_kinds.py ppo --split test

Tune on the dev split (the default); report the test split.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from connectx_baselines.perfect_play import POSITION_SETS, judge_moves, load_positions
from connectx_gym.bitboard import Board
from connectx_gym.policy import PositionJob, answer_position
from connectx_gym.registry import make_policy

#: The kinds of a mistake, in table order.
KINDS = ("missed a win in one", "left a win in one", "deeper")


def mistake_kind(board: Board, column: int) -> str:
    """The kind (:data:`KINDS`) of playing ``column`` on ``board``, a move known to lose value."""
    if any(board.is_winning_move(c) for c in board.open_columns()):
        return KINDS[0]
    if 0 <= column < board.geometry.columns and board.can_play(column):  # else: illegal
        after = board.play(column)
        if any(after.is_winning_move(c) for c in after.open_columns()):
            return KINDS[1]
    return KINDS[2]


def sort_mistakes(
    spec: str, set_name: str, split: str, seed: int, limit: int | None
) -> dict[str, dict[str, int]]:
    """Per phase of set ``set_name`` (and ``"overall"``): positions, mistakes and each kind."""
    positions = load_positions(POSITION_SETS[set_name], split)
    count = len(positions) if limit is None else min(limit, len(positions))
    policy = make_policy(spec)
    children = np.random.SeedSequence(seed).spawn(len(positions))  # as evaluate_policy seeds
    answers = [
        answer_position(policy, positions.geometry, PositionJob(i, positions.moves[i], child), spec)
        for i, child in enumerate(children[:count])
    ]
    columns = np.array([-1 if a is None else a for a in answers], dtype=np.int64)  # -1: illegal
    mistake, _ = judge_moves(positions.scores[:count], columns)
    rows = {
        name: {"positions": 0, "mistakes": 0, **dict.fromkeys(KINDS, 0)}
        for name in (*positions.phases, "overall")
    }
    for i in range(count):
        for name in (positions.phases[int(positions.phase[i])], "overall"):
            row = rows[name]
            row["positions"] += 1
            if mistake[i]:
                board = Board.from_moves(positions.geometry, positions.moves[i])
                row["mistakes"] += 1
                row[mistake_kind(board, int(columns[i]))] += 1
    return {name: row for name, row in rows.items() if row["positions"]}


def table(spec: str, split: str, results: dict[str, dict[str, dict[str, int]]]) -> str:
    """The Markdown table of :func:`sort_mistakes` for each set."""
    lines = [
        f"{spec}: value-losing moves by kind ({split} split)",
        "",
        "| set | phase | positions | mistakes | " + " | ".join(KINDS) + " |",
        "|---|---|---:|---:|" + "---:|" * len(KINDS),
    ]
    for set_name, rows in results.items():
        for phase, row in rows.items():
            kinds = " | ".join(str(row[kind]) for kind in KINDS)
            rate = 100 * row["mistakes"] / row["positions"]
            lines.append(
                f"| {set_name} | {phase} | {row['positions']} | {row['mistakes']} ({rate:.1f}%) "
                f"| {kinds} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", nargs="?", default="onestep", help="policy spec or weights file")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--seed", type=int, default=0, help="as connectx accuracy's --seed")
    parser.add_argument("--smoke", action="store_true", help="the first 40 positions of each set")
    args = parser.parse_args(argv)
    limit = 40 if args.smoke else None
    try:
        make_policy(args.policy)  # a bad spec or a missing file: one line, before any work
    except (ValueError, OSError) as error:
        parser.error(str(error))
    results = {
        name: sort_mistakes(args.policy, name, args.split, args.seed, limit)
        for name in POSITION_SETS
    }
    print(table(args.policy, args.split, results))


if __name__ == "__main__":
    main()
