"""Speed of two revisions of the code side by side: the searches, the env and the batched env.

A change that reorganises code (issue 46: one kernel plumbing, one resumable search driver) should
leave these speeds as they were. Check out the old revision beside this one and run::

    git worktree add /tmp/old <commit>
    python benchmarks/bench_revisions.py /tmp/old              # old against this checkout
    python benchmarks/bench_revisions.py /tmp/old /tmp/new --rounds 5
    python benchmarks/bench_revisions.py --smoke               # this checkout against itself

Each round measures both trees in turn, each in a fresh interpreter with ``PYTHONPATH`` set to its
tree (this file's ``--measure`` mode, which uses only the public API that both revisions have), so
that the shared machine's slow spells fall on both. Measured, in microseconds: a move of
``onestep``, ``minimax:depth=3``, ``negamax:depth=4`` and ``alphabeta:max_depth=4`` on the same
mid-game positions; a step of ``ConnectX-v0`` against ``random``; a ply of ``make_vec`` with 256
boards against ``minimax:depth=3``. Printed: the machine, then per measure the median over the
rounds for each tree and the ratio new / old (below 1: the new one is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import _child as child
from _machine import machine_line

ROOT = Path(__file__).resolve().parents[1]
SEARCHES = ("onestep", "minimax:depth=3", "negamax:depth=4", "alphabeta:max_depth=4,time_budget=5")


def measure(positions: int, seconds: float) -> dict[str, float]:
    """Microseconds per move, step or ply of this interpreter's ``connectx_gym``."""
    import gymnasium as gym
    import numpy as np

    from connectx_gym.bitboard import Board, Geometry
    from connectx_gym.registry import make_policy

    rng = np.random.default_rng(0)
    geometry = Geometry()
    boards = []
    while len(boards) < positions:
        board = Board(geometry, 0, 0, 0)
        for _ in range(int(rng.integers(6, 20))):
            legal = [c for c in range(geometry.columns) if board.can_play(c)]
            after = board.play(int(rng.choice(legal)))
            if after.is_terminal():
                break
            board = after
        boards.append(board)
    results: dict[str, float] = {}
    for spec in SEARCHES:
        policy, moves = make_policy(spec), np.random.default_rng(1)
        for board in boards[:5]:
            policy.act(board, moves)  # compiled or loaded before the clock starts
        started = time.perf_counter()
        for board in boards:
            policy.act(board, moves)
        results[spec] = (time.perf_counter() - started) / len(boards) * 1e6
    env = gym.make("ConnectX-v0", opponent="random")
    _, info = env.reset(seed=0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        legal = np.flatnonzero(info["action_mask"])
        _, _, terminated, truncated, info = env.step(int(rng.choice(legal)))
        steps += 1
        if terminated or truncated:
            _, info = env.reset()
    results["ConnectX-v0 step vs random"] = (time.perf_counter() - started) / steps * 1e6
    vector = gym.make_vec("ConnectX-v0", num_envs=256, opponent="minimax:depth=3")
    _, info = vector.reset(seed=0)
    vector.step(np.argmax(info["action_mask"] * rng.random(info["action_mask"].shape), axis=1))
    plies, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        mask = info["action_mask"]
        _, _, _, _, info = vector.step(np.argmax(mask * rng.random(mask.shape), axis=1))
        plies += 256
    results["make_vec 256 ply vs minimax:depth=3"] = (time.perf_counter() - started) / plies * 1e6
    return results


def measure_tree(tree: Path, positions: int, seconds: float) -> dict[str, float]:
    """:func:`measure` in a fresh interpreter that imports the packages of ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, str(Path(__file__).resolve()), "--measure"]
    command += ["--positions", str(positions), "--seconds", str(seconds)]
    done = child.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_revisions: measuring {tree} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?", type=Path, help="the old revision's checkout")
    parser.add_argument("new", nargs="?", type=Path, default=ROOT, help="default: this checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--positions", type=int, default=200, help="positions per search")
    parser.add_argument("--seconds", type=float, default=2.0, help="per env measurement")
    parser.add_argument("--smoke", action="store_true", help="this checkout twice, 1 short round")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.positions, args.seconds)))
        return
    if args.smoke:
        args.old, args.rounds, args.positions, args.seconds = ROOT, 1, 10, 0.2
    if args.old is None:
        parser.error("give the old revision's checkout (git worktree add /tmp/old <commit>)")
    for tree in (args.old, args.new):
        if not (tree / "connectx_gym" / "__init__.py").is_file():
            parser.error(f"{tree} is not a checkout of connectx-gym")
    print(machine_line())
    print(f"old: {args.old}, new: {args.new}; {args.rounds} rounds, trees alternating\n")
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for name, tree in (("old", args.old), ("new", args.new)):
            runs[name].append(measure_tree(tree, args.positions, args.seconds))
    print("| measure (µs) | old | new | new / old |")
    print("|---|---:|---:|---:|")
    for key in runs["old"][0]:
        old = statistics.median(run[key] for run in runs["old"])
        new = statistics.median(run[key] for run in runs["new"])
        print(f"| {key} | {old:.1f} | {new:.1f} | {new / old:.2f} |")


if __name__ == "__main__":
    main()
