"""How well networks fit the teacher books: the share of each book's positions where a network's
move (the argmax of its logits over the legal columns) loses value, by the number of stones.

A network taught a book should err on it less than on positions it never saw; one that errs
about as often on both is held back by its training or its size rather than by its data. A book
a network was not taught (the random opening book, for every shipped network) reads as a held-out
set of that kind of position. Mistakes are counted as ``connectx accuracy`` counts them (the move's
game value below the best legal move's), from the books' exact values; ties between equal logits
go to the lowest column. Printed with 95% Wilson intervals::

    python benchmarks/book_fit.py ppo ppo-v3
    python benchmarks/book_fit.py runs/x/final.npz --books opening random_opening --limit 5000
    python benchmarks/book_fit.py ppo --smoke       # the first 200 positions of each book
    python benchmarks/book_fit.py runs/x/final.npz --books random_opening --skip 10000

``--skip N`` leaves out each book's first N positions: a run taught a book's head with
``--teacher-book NAME:COPIES:N`` is read on its tail, positions it never saw.

The forward passes run on one BLAS thread, in batches.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _machine import machine_line

from connectx_baselines.mcts import load_network
from connectx_baselines.perfect_play import judge_moves
from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import ILLEGAL, TeacherSet
from connectx_gym.bitboard import Geometry
from connectx_gym.commands import bounded_int
from connectx_gym.files import one_blas_thread
from connectx_gym.match import wilson_interval
from connectx_gym.weights import WeightsFile
from connectx_train.teacher import move_planes

#: boards a forward pass answers at a time
BATCH = 1024


def network(spec: str) -> WeightsFile:
    """The weights of a registered network (``ppo``) or of a model file, as ``mcts:net=`` reads
    them."""
    return load_network(spec)[0]


def mistakes(weights: WeightsFile, book: TeacherSet) -> np.ndarray:
    """Per position of ``book``: whether the network's move loses value, judged by
    :func:`connectx_baselines.perfect_play.judge_moves` from the book's game values."""
    planes = move_planes(book.geometry, book.moves).astype(np.float32)
    with one_blas_thread():
        logits = np.concatenate(
            [weights.logits(planes[start : start + BATCH]) for start in range(0, len(book), BATCH)]
        )
    legal = book.values != ILLEGAL
    chosen = np.where(legal, np.nan_to_num(logits, nan=-np.inf), -np.inf).argmax(axis=1)
    return judge_moves(np.where(legal, book.values, np.nan), chosen)[0]


def rate(flags: np.ndarray) -> str:
    if len(flags) == 0:
        return "-"
    share = float(flags.mean())
    low, high = wilson_interval(share, len(flags))
    return f"{100 * share:.1f}% ({100 * low:.1f}-{100 * high:.1f}%) of {len(flags)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nets", nargs="+", help="registered networks (ppo) or model files")
    parser.add_argument("--books", nargs="+", choices=sorted(BOOKS), default=sorted(BOOKS))
    parser.add_argument(
        "--limit",
        type=bounded_int(1, sys.maxsize),
        default=None,
        help="the first N positions of each book (default: all)",
    )
    parser.add_argument(
        "--skip",
        type=bounded_int(0, sys.maxsize),
        default=0,
        help="leave out each book's first N positions (default: 0)",
    )
    parser.add_argument("--smoke", action="store_true", help="the first 200 positions of each book")
    args = parser.parse_args(argv)
    if args.smoke:
        args.limit = min(args.limit or 200, 200)
    try:
        nets = {spec: network(spec) for spec in args.nets}
    except (OSError, ValueError) as error:
        parser.error(str(error))
    print(machine_line())
    geometry = Geometry(6, 7, 4)
    for name in args.books:
        book = load_book(geometry, BOOKS[name].file)
        if book is None:
            print(f"{name}: no book for {geometry}")
            continue
        end = None if args.limit is None else args.skip + args.limit
        if args.skip or end is not None:
            book = TeacherSet(
                geometry, book.moves[args.skip : end], book.values[args.skip : end], {}
            )
        if len(book) == 0:
            print(f"\n{name} book: no positions after the first {args.skip:,}")
            continue
        stones = (book.moves >= 0).sum(axis=1)
        print(f"\n{name} book ({len(book):,} positions of {stones.min()} to {stones.max()} stones)")
        for spec, weights in nets.items():
            if weights.geometry != geometry:
                print(f"  {spec}: trained on {weights.geometry}, not {geometry}")
                continue
            flags = mistakes(weights, book)
            print(f"  {spec}: {rate(flags)}")
            for count in np.unique(stones)[:12]:
                print(f"    {count:2d} stones: {rate(flags[stones == count])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
