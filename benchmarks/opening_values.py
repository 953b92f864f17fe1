"""The exact value, for the agent, of the random openings a training run starts its games from.

``connectx train --opening-plies K`` (the self-play preset: 20) starts each game after 0 to ``K``
random stones (:func:`connectx_gym.env.random_opening`, the agent's mark drawn as
``ConnectX-v0`` draws it). Past a few stones such a position may already be lost for the agent
under perfect play, and a curriculum that asks for a win rate then asks for wins that a perfect
player would not get against a perfect opponent. This script draws openings the same way and
solves them (Pascal Pons' solver, a node cap per position), by the number of stones::

    python benchmarks/opening_values.py                       # 2,000 openings of up to 20 stones
    python benchmarks/opening_values.py --opening-plies 12 --openings 500

Openings of at most ``--min-stones - 1`` stones are counted but not solved (near the empty board
a position costs seconds to minutes); positions the cap does not prove are counted as unsolved.
The share lost is a lower bound: positions not solved, for either reason, count as not lost.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import numpy as np
from _machine import machine_line

from connectx_baselines.solver import SearchLimitError, Solver
from connectx_gym.bitboard import Board
from connectx_gym.env import check_opening_plies, random_opening
from connectx_gym.match import wilson_interval

#: the outcomes counted, in table order (for the agent, who is to move after the opening)
OUTCOMES = ("won", "drawn", "lost", "unsolved", "not solved (few stones)")


def stone_ranges(opening_plies: int, min_stones: int, width: int) -> list[tuple[int, int]]:
    """``[(low, high), ...]`` covering 0 to ``opening_plies`` stones: the unsolved ones first,
    then ranges of ``width`` stones."""
    ranges = [(0, min(min_stones - 1, opening_plies))] if min_stones > 0 else []
    low = min_stones
    while low <= opening_plies:
        ranges.append((low, min(low + width - 1, opening_plies)))
        low += width
    return ranges


def opening_outcome(board: Board, solver: Solver, min_stones: int, node_limit: int) -> str:
    """The outcome (:data:`OUTCOMES`) of ``board`` for the player to move."""
    if board.moves < min_stones:
        return OUTCOMES[4]
    try:
        score = solver.solve(board, node_limit=node_limit)
    except SearchLimitError:
        return OUTCOMES[3]
    return OUTCOMES[0] if score > 0 else OUTCOMES[1] if score == 0 else OUTCOMES[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--opening-plies", type=int, default=20, help="the run's --opening-plies")
    parser.add_argument("--openings", type=int, default=2000, help="openings drawn")
    parser.add_argument("--seed", type=int, default=1, help="seed of the openings' draws")
    parser.add_argument("--min-stones", type=int, default=6, help="fewer stones: not solved")
    parser.add_argument("--node-limit", type=int, default=3_000_000, help="solver nodes a position")
    parser.add_argument("--width", type=int, default=8, help="stones per row of the table")
    parser.add_argument("--smoke", action="store_true", help="40 openings (seconds)")
    args = parser.parse_args()
    if args.smoke:
        args.openings = 40
    if args.openings < 1 or args.min_stones < 0 or args.node_limit < 1 or args.width < 1:
        parser.error("--openings, --node-limit and --width must be >= 1, --min-stones >= 0")
    empty = Board.empty(6, 7, 4)
    try:
        plies = check_opening_plies(args.opening_plies, empty.geometry)
    except ValueError as error:
        parser.error(str(error))

    print(machine_line())
    rng = np.random.default_rng(args.seed)
    solver = Solver(empty.geometry)
    counts: Counter[tuple[int, str]] = Counter()
    started = time.perf_counter()
    for _ in range(args.openings):
        agent_mark = int(rng.integers(1, 3))
        opening = random_opening(empty.geometry, plies, frozenset({agent_mark}), rng)
        board = Board.from_moves(empty.geometry, opening)
        counts[board.moves, opening_outcome(board, solver, args.min_stones, args.node_limit)] += 1
    print(
        f"{args.openings:,} openings of 0 to {plies} stones (seed {args.seed}) on 6x7, "
        f"solved in {time.perf_counter() - started:.0f} s (node cap {args.node_limit:,})\n"
    )
    print("| stones | openings | " + " | ".join(OUTCOMES) + " | lost, of the solved (95% CI) |")
    print("|---|---:|" + "---:|" * len(OUTCOMES) + "---|")
    ranges = stone_ranges(plies, args.min_stones, args.width)
    rows = [(f"{first}-{last}", first, last) for first, last in ranges] + [("all", 0, plies)]
    for name, first, last in rows:
        row = Counter({o: sum(counts[s, o] for s in range(first, last + 1)) for o in OUTCOMES})
        solved = row["won"] + row["drawn"] + row["lost"]
        lost = ""
        if solved:
            ci_low, ci_high = wilson_interval(row["lost"] / solved, solved)
            lost = f"{row['lost'] / solved:.1%} ({ci_low:.1%} to {ci_high:.1%})"
        print(
            f"| {name} | {sum(row.values()):,} | "
            + " | ".join(f"{row[o]:,}" for o in OUTCOMES)
            + f" | {lost} |"
        )
    lost_all = sum(n for (_, o), n in counts.items() if o == "lost")
    low, high = wilson_interval(lost_all / args.openings, args.openings)
    print(
        f"\nlost for the agent before its first move: at least {lost_all:,} of "
        f"{args.openings:,} openings ({lost_all / args.openings:.1%}, "
        f"95% CI {low:.1%} to {high:.1%})"
    )


if __name__ == "__main__":
    main()
