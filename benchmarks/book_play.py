"""Policies played on a teacher book's positions: the share of their moves that lose value, by the
number of stones, judged from the book's exact values.

A development set for searches: the random opening book's tail (``--skip 10000``, the default)
holds positions of random legal play that no shipped network was taught and no reported figure
reads, of the age of Pons' Begin sets. Each position is played once, as ``connectx accuracy``
plays a labelled set (:func:`connectx_baselines.perfect_play.evaluate_policy`: the policy reset
before it, position ``i`` drawing from the ``i``-th child of the seed), and judged as it judges
(the move's game value below the best legal move's). Printed with 95% Wilson intervals and the
mean seconds a position took::

    python benchmarks/book_play.py "mcts:net=ppo,time_budget=0.05" ppo
    python benchmarks/book_play.py "mcts:net=ppo,simulations=150" --limit 500
    python benchmarks/book_play.py ppo --book opening --skip 0 --smoke

Under a time budget the moves depend on the machine and its load: run one search at a time.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from _machine import machine_line

from connectx_baselines.perfect_play import PhaseResult, evaluate_policy
from connectx_baselines.position_sets import LabelledPositions
from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import ILLEGAL
from connectx_gym.bitboard import Geometry
from connectx_gym.commands import bounded_int

#: The random opening book's positions that :mod:`book_fit`'s fine-tune experiments may teach.
DEFAULT_SKIP = 10_000


def book_positions(book_name: str, skip: int, limit: int | None) -> LabelledPositions:
    """The positions ``skip`` to ``skip + limit`` of a teacher book (6x7) as labelled positions,
    one phase a stone count."""
    geometry = Geometry(6, 7, 4)
    book = load_book(geometry, BOOKS[book_name].file)
    if book is None:
        raise ValueError(f"the {book_name} book holds no positions for {geometry}")
    end = None if limit is None else skip + limit
    moves, values = book.moves[skip:end], book.values[skip:end]
    if len(moves) == 0:
        raise ValueError(f"the {book_name} book has no positions after its first {skip:,}")
    stones = (moves >= 0).sum(axis=1)
    counts = sorted({int(count) for count in stones})
    phase_of = {count: number for number, count in enumerate(counts)}
    return LabelledPositions(
        geometry,
        tuple(tuple(int(column) for column in row[row >= 0]) for row in moves),
        np.where(values == ILLEGAL, np.nan, values.astype(np.float64)),
        np.array([phase_of[int(count)] for count in stones], dtype=np.int64),
        np.zeros(len(moves), dtype=np.int64),
        tuple(f"{count} stones" for count in counts),
    )


def rate(result: PhaseResult) -> str:
    low, high = result.mistake_ci95
    return (
        f"{result.mistakes:4d} of {result.positions:5d}: {100 * result.mistake_rate:4.1f}% "
        f"({100 * low:.1f}-{100 * high:.1f}%)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("specs", nargs="+", help="policy specs, as connectx accuracy takes them")
    parser.add_argument("--book", choices=sorted(BOOKS), default="random_opening")
    parser.add_argument(
        "--skip",
        type=bounded_int(0, sys.maxsize),
        default=DEFAULT_SKIP,
        help=f"leave out the book's first N positions (default {DEFAULT_SKIP:,})",
    )
    parser.add_argument(
        "--limit",
        type=bounded_int(1, sys.maxsize),
        default=None,
        help="the first N positions after those (default: all)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--smoke", action="store_true", help="20 positions")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit = min(args.limit or 20, 20)
    try:
        positions = book_positions(args.book, args.skip, args.limit)
    except ValueError as error:
        parser.error(str(error))
    print(machine_line())
    print(
        f"{args.book} book, positions {args.skip:,} to {args.skip + len(positions):,} "
        f"({len(positions):,}), seed {args.seed}"
    )
    for spec in args.specs:
        began = time.perf_counter()
        try:
            result = evaluate_policy(spec, positions, seed=args.seed)
        except (OSError, ValueError) as error:
            parser.error(f"{spec}: {error}")
        seconds = (time.perf_counter() - began) / len(positions)
        print(f"\n{spec}: {rate(result.overall)}, {1000 * seconds:.1f} ms a position")
        for name, phase in result.phases.items():
            print(f"  {name:>9}: {rate(phase)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
