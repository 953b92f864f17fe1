"""Make the teacher books of :mod:`connectx_baselines.teacher_book`
(``baselines/data/teacher_book*.npz``): label the next chunks of a book's positions and rewrite its
file after each one.

Run from the repository root::

    python -m tools.teacher_book --chunks 1000 --workers 2 --minutes 55
    python -m tools.teacher_book --book early --chunks 5000 --workers 2 --minutes 40
    python -m tools.teacher_book --book random --chunks 120 --workers 2
    python -m tools.teacher_book --book random_opening --chunks 400 --workers 2 \\
        --exclude-pons ../shared/data/pons
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from connectx_baselines.game_positions import canonical_keys
from connectx_baselines.position_sets import (
    RANDOM_POSITIONS,
    load_pons,
    load_positions,
    pons_files,
)
from connectx_baselines.teacher_book import BOOK, BOOK_CHUNK, BOOK_SEED, BOOKS
from connectx_baselines.teacher_cache import pad_moves
from connectx_baselines.teacher_labels import (
    ChunkSettings,
    TeacherSet,
    evaluation_keys,
    merge_chunks,
    run_chunks,
)
from connectx_gym.bitboard import Geometry

__all__ = ["extend_book", "main", "pons_keys", "random_split_keys"]


def _settings_meta(settings: ChunkSettings) -> dict[str, Any]:
    return {
        key: list(v) if isinstance(v, tuple) else v
        for key, v in dataclasses.asdict(settings).items()
    }


def random_split_keys(geometry: Geometry) -> set[tuple[int, int]]:
    """Mirror-canonical keys of the shipped random split (both halves) on ``geometry``; empty
    for another board size. Every book leaves them out, as it does the game split's."""
    if not RANDOM_POSITIONS.is_file():
        return set()
    positions = load_positions(RANDOM_POSITIONS, split="all")
    if positions.geometry != geometry:
        return set()
    return set(canonical_keys(geometry, pad_moves(positions.moves, geometry.cells)))


def pons_keys(directory: Path) -> set[tuple[int, int]]:
    """Mirror-canonical keys of every position of the Pons benchmark files in ``directory``
    (6x7): what a book leaves out so that Pons' sets stay unseen by the networks it teaches."""
    geometry = Geometry(6, 7, 4)
    rows = [
        [int(column) - 1 for column in position.moves]
        for path in pons_files(directory).values()
        for position in load_pons(path)
    ]
    return set(canonical_keys(geometry, pad_moves(rows, geometry.cells)))


def extend_book(
    path: Path,
    chunks: int,
    *,
    workers: int = 1,
    minutes: float = 0.0,
    settings: ChunkSettings = BOOK,
    chunk_size: int = BOOK_CHUNK,
    seed: int = BOOK_SEED,
    exclude: frozenset[tuple[int, int]] = frozenset(),
    log: Callable[[str], None] | None = None,
) -> TeacherSet:
    """Label the next ``chunks`` chunks of the book at ``path`` (created if missing) and return
    the book. ``minutes > 0`` stops starting chunks after that much wall time. The file is
    rewritten whenever the next chunk in order is done. Positions whose mirror-canonical key is
    in ``exclude`` are left out, as are the shipped evaluation sets' and the book's own; a book
    made with more of them left out than ``exclude`` holds is refused."""
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
    left_out_before = 0 if book is None else int(book.meta.get("excluded", 0))
    if len(exclude) < left_out_before:
        # the new chunks could hold positions the book was made to leave out (Pons' sets)
        raise ValueError(
            f"{path} leaves out {left_out_before} positions besides the evaluation sets "
            f"(--exclude-pons), this command {len(exclude)}; extend it leaving them out again"
        )
    first = 0 if book is None else int(book.meta["chunks"])
    commands = [] if book is None else list(book.meta["commands"])
    book_keys = set() if book is None else set(canonical_keys(geometry, book.moves))
    left_out = len(exclude)
    exclude = exclude | evaluation_keys(geometry) | random_split_keys(geometry) | book_keys
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
            if left_out:  # how many positions the caller also had left out (Pons' sets)
                meta["excluded"] = left_out
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
        prog="python -m tools.teacher_book", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--chunks",
        type=int,
        required=True,
        help="chunks to add (of 20 positions; the random book's of 500)",
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
    parser.add_argument(
        "--exclude-pons",
        type=Path,
        default=None,
        metavar="DIR",
        help="also leave out every position of the Pons benchmark files in DIR (6x7 books)",
    )
    args = parser.parse_args(argv)
    chosen = BOOKS[args.book]
    out = args.out if args.out is not None else chosen.file
    try:
        exclude = frozenset(pons_keys(args.exclude_pons)) if args.exclude_pons else frozenset()
        book = extend_book(
            out,
            args.chunks,
            workers=args.workers,
            minutes=args.minutes,
            settings=chosen.settings,
            chunk_size=chosen.chunk_size,
            seed=chosen.seed,
            exclude=exclude,
            log=lambda line: print(line, flush=True),
        )
    except (ValueError, FileNotFoundError) as error:
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
