"""The teacher books: exact move values of hard positions, labelled once and shipped for teaching.

A run's own teacher set (:mod:`baselines.teacher_labels`) leaves out positions of fewer than 8
stones and skips most of those of 8 to 11, because proving them costs seconds each where later
positions cost milliseconds. Yet that is where a network's decisive mistakes against search
often are. The book labels such positions once, outside any run's budget, and ships them as
``baselines/data/teacher_book.npz`` (a :class:`~baselines.teacher_labels.TeacherSet`), which
``connectx train`` adds to its teacher set (``--teacher-book``, on by default on 6x7).

How it is made (:data:`BOOK`): games between :data:`BOOK_PLAYERS` (strong players, some with
noise, and the shipped network ``ppo`` so that the positions a trained agent reaches are there)
start from a random two-ply opening; each position of 5 to 11 stones is kept with probability
0.4, deduplicated up to the mirror, and labelled under a node cap of 300 million (skipped
if not proven). Positions of the evaluation set (:mod:`baselines.perfect_play`, both splits) are
never included.

The **early book** (:data:`EARLY_BOOK`, ``baselines/data/teacher_book_early.npz``, added by
``--teacher-early-book``) does the same for positions of 12 to 20 stones, the phase where the
shipped network lost most of its games against alphabeta (``benchmarks/bench_losses.py``). Its
games are the network's own against search, in the manner of DAgger: :data:`EARLY_BOOK_PLAYERS`
are ``ppo`` (as shipped when the chunk was labelled) and the strong players it lost to, so the
book holds the positions a trained agent reaches, including the hard ones a run's own labelling
skips at its node cap of a million.

The **middle book** (:data:`MIDDLE_BOOK`, ``baselines/data/teacher_book_middle.npz``, added by
``--teacher-middle-book``) takes positions of 21 to 28 stones from the same games: the middle
phase, where about a third of the shipped network's games against alphabeta that it does not win
are decided (of those whose deciding move is proven, ``benchmarks/bench_losses.py``). Such
positions cost the solver little and a run's own labelling holds many, but from games of minimax
players only (:data:`baselines.teacher_labels.PLAYERS`), never a trained network's against search.

A book grows chunk by chunk: ``python -m baselines.teacher_book --chunks N [--book NAME]``
labels the next ``N`` chunks of :data:`BOOK_CHUNK` positions (chunk ``k`` of a book is seeded by
``(its seed, k)``) and rewrites the file after each one, so an interrupted command loses at most
the chunks in progress. A new command leaves out positions already in the book, so the file's
content depends on how its chunks were split between commands; ``meta["commands"]`` records it.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines.make_positions import canonical_keys
from baselines.teacher_labels import (
    ChunkSettings,
    TeacherSet,
    evaluation_keys,
    merge_chunks,
    run_chunks,
)
from connectx_gym.bitboard import Geometry

__all__ = [
    "BOOK",
    "BOOKS",
    "BOOK_CHUNK",
    "BOOK_FILE",
    "BOOK_PLAYERS",
    "BOOK_SEED",
    "EARLY_BOOK",
    "EARLY_BOOK_FILE",
    "EARLY_BOOK_PLAYERS",
    "MIDDLE_BOOK",
    "MIDDLE_BOOK_FILE",
    "Book",
    "extend_book",
    "load_book",
]

#: the shipped book
BOOK_FILE = Path(__file__).parent / "data" / "teacher_book.npz"
#: players of the games the book's positions come from (``~e``: a random move with chance e)
BOOK_PLAYERS: tuple[str, ...] = (
    "minimax:depth=3~0.1",
    "minimax:depth=4~0.1",
    "minimax:depth=4",
    "alphabeta:max_depth=8,time_budget=60~0.1",
    "alphabeta:max_depth=8,time_budget=60",
    "ppo~0.1",
    "ppo",
)
#: how the book's positions are chosen and labelled (6x7, four in a row)
BOOK = ChunkSettings(
    (6, 7, 4),
    min_ply=5,
    keep=0.4,
    node_limit=300_000_000,
    max_ply=11,
    players=BOOK_PLAYERS,
    opening_plies=2,
    table_bits=24,
)
#: positions per chunk (about a minute of one core)
BOOK_CHUNK = 20
#: the root seed of the chunks
BOOK_SEED = 2026

#: the shipped early book
EARLY_BOOK_FILE = Path(__file__).parent / "data" / "teacher_book_early.npz"
#: the shipped network and the search players it lost to, with and without noise
EARLY_BOOK_PLAYERS: tuple[str, ...] = (
    "ppo",
    "ppo~0.1",
    "alphabeta:max_depth=8,time_budget=60",
    "alphabeta:max_depth=8,time_budget=60~0.1",
    "minimax:depth=4",
    "minimax:depth=4~0.1",
)
#: how the early book's positions are chosen and labelled (6x7, four in a row)
EARLY_BOOK = dataclasses.replace(BOOK, min_ply=12, max_ply=20, keep=0.3, players=EARLY_BOOK_PLAYERS)

#: the shipped middle book
MIDDLE_BOOK_FILE = Path(__file__).parent / "data" / "teacher_book_middle.npz"
#: how the middle book's positions are chosen: the early book's games, later positions
MIDDLE_BOOK = dataclasses.replace(EARLY_BOOK, min_ply=21, max_ply=28)


@dataclass(frozen=True)
class Book:
    """A shipped book: its file and how its chunks are made."""

    file: Path
    settings: ChunkSettings
    seed: int
    chunk_size: int = BOOK_CHUNK


#: the books by name (``python -m baselines.teacher_book --book NAME``)
BOOKS: dict[str, Book] = {
    "opening": Book(BOOK_FILE, BOOK, BOOK_SEED),
    "early": Book(EARLY_BOOK_FILE, EARLY_BOOK, BOOK_SEED + 1),
    "middle": Book(MIDDLE_BOOK_FILE, MIDDLE_BOOK, BOOK_SEED + 2),
}


def load_book(geometry: Geometry, path: str | Path | None = None) -> TeacherSet | None:
    """The book at ``path`` (default: the shipped opening book) if it is for ``geometry``, else
    None (also when the file is absent)."""
    path = Path(path) if path is not None else BOOK_FILE
    if not path.is_file():
        return None
    book = TeacherSet.load(path)
    return book if book.geometry == geometry else None


def _settings_meta(settings: ChunkSettings) -> dict[str, Any]:
    return {
        key: list(v) if isinstance(v, tuple) else v
        for key, v in dataclasses.asdict(settings).items()
    }


def extend_book(
    path: Path,
    chunks: int,
    *,
    workers: int = 1,
    minutes: float = 0.0,
    settings: ChunkSettings = BOOK,
    chunk_size: int = BOOK_CHUNK,
    seed: int = BOOK_SEED,
    log: Callable[[str], None] | None = None,
) -> TeacherSet:
    """Label the next ``chunks`` chunks of the book at ``path`` (created if missing) and return
    the book. ``minutes > 0`` stops starting chunks after that much wall time. The file is
    rewritten whenever the next chunk in order is done."""
    if chunks < 1 or workers < 1 or chunk_size < 1:
        raise ValueError(
            f"chunks, workers and chunk_size must be >= 1, got {chunks}, {workers}, {chunk_size}"
        )
    if minutes < 0:
        raise ValueError(f"minutes must be >= 0 (0: no limit), got {minutes}")
    geometry = Geometry(*settings.geometry_key)
    wanted = {"settings": _settings_meta(settings), "chunk_size": chunk_size, "seed": seed}
    book = TeacherSet.load(path) if path.is_file() else None
    if book is not None:
        recorded = {key: book.meta.get(key) for key in wanted}
        if recorded != wanted:
            raise ValueError(f"{path} was made with other settings: {recorded}, not {wanted}")
    first = 0 if book is None else int(book.meta["chunks"])
    commands = [] if book is None else list(book.meta["commands"])
    book_keys = set() if book is None else set(canonical_keys(geometry, book.moves))
    exclude = frozenset(evaluation_keys(geometry) | book_keys)
    commands.append([first, first])  # chunks [first, end) labelled by this command
    started = time.monotonic()
    results: dict[int, Any] = {}
    written = first

    def out_of_time() -> bool:
        return minutes > 0 and time.monotonic() - started > 60 * minutes

    def write_done() -> None:
        nonlocal book, written
        ready = []
        while written in results:
            ready.append(results.pop(written))
            written += 1
        if ready:
            commands[-1][1] = written
            meta = {**wanted, "chunks": written, "commands": commands}
            book = merge_chunks(geometry, ready, meta, base=book)
            book.save(path)
            if log is not None:
                seconds = time.monotonic() - started
                log(f"book: {len(book)} positions in {written} chunks ({seconds:.0f} s)")

    def job(index: int) -> tuple[Any, ...]:
        chunk_seed = np.random.SeedSequence(seed, spawn_key=(index,))
        return settings, chunk_seed, chunk_size, exclude

    jobs = {index: job(index) for index in range(first, first + chunks)}
    for index, result in run_chunks(jobs, workers, stop=out_of_time):
        results[index] = result
        write_done()
    if book is None:
        raise RuntimeError("no chunk was labelled (minutes too small?)")
    return book


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.teacher_book", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--chunks", type=int, required=True, help=f"chunks of {BOOK_CHUNK} positions to add"
    )
    parser.add_argument(
        "--book", choices=sorted(BOOKS), default="opening", help="which book to extend"
    )
    parser.add_argument("--workers", type=int, default=1, help="processes labelling chunks")
    parser.add_argument(
        "--minutes", type=float, default=0.0, help="start no chunk after this (0: no limit)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="the book file to extend (default: the shipped one)"
    )
    args = parser.parse_args(argv)
    chosen = BOOKS[args.book]
    out = args.out if args.out is not None else chosen.file
    try:
        book = extend_book(
            out,
            args.chunks,
            workers=args.workers,
            minutes=args.minutes,
            settings=chosen.settings,
            chunk_size=chosen.chunk_size,
            seed=chosen.seed,
            log=lambda line: print(line, flush=True),
        )
    except ValueError as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        print(f"interrupted: {out} keeps every chunk written so far; the same command goes on")
        return 130
    plies = (book.moves >= 0).sum(axis=1)
    counts = {int(p): int((plies == p).sum()) for p in np.unique(plies)}
    print(f"{out}: {len(book)} positions; by stones: {counts}; skipped {book.meta['skipped']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
