"""The teacher books: exact move values of hard positions, labelled once and shipped for teaching.

A run's own teacher set (:mod:`connectx_baselines.teacher_labels`) leaves out positions of fewer
than 8 stones and skips most of those of 8 to 11, because proving them costs seconds each where
later positions cost milliseconds. Yet that is where a network's decisive mistakes against search
often are. The book labels such positions once, outside any run's budget, and ships them as
``baselines/data/teacher_book.npz`` (a :class:`~connectx_baselines.teacher_labels.TeacherSet`),
which ``connectx train`` adds to its teacher set (``--teacher-book opening:COPIES``, on by default
on 6x7).

How it is made (:data:`BOOK`): games between :data:`BOOK_PLAYERS` (strong players, some with
noise, and the shipped network ``ppo`` so that the positions a trained agent reaches are there)
start from a random two-ply opening; each position of 5 to 11 stones is kept with probability
0.4, deduplicated up to the mirror, and labelled under a node cap of 300 million (skipped
if not proven). Positions of the evaluation set (:mod:`connectx_baselines.perfect_play`, both
splits) are never included.

The **early book** (:data:`EARLY_BOOK`, ``baselines/data/teacher_book_early.npz``, added by
``--teacher-book early:COPIES``) does the same for positions of 12 to 20 stones, the phase where the
shipped network lost most of its games against alphabeta (``benchmarks/bench_losses.py``). Its
games are the network's own against search, in the manner of DAgger: :data:`EARLY_BOOK_PLAYERS`
are ``ppo`` (as shipped when the chunk was labelled) and the strong players it lost to, so the
book holds the positions a trained agent reaches, including the hard ones a run's own labelling
skips at its node cap of a million.

The **middle book** (:data:`MIDDLE_BOOK`, ``baselines/data/teacher_book_middle.npz``, added by
``--teacher-book middle:COPIES``) takes positions of 21 to 28 stones from the same games: the middle
phase, where about a third of the shipped network's games against alphabeta that it does not win
are decided (of those whose deciding move is proven, ``benchmarks/bench_losses.py``). Such
positions cost the solver little and a run's own labelling holds many, but from games of minimax
players only (:data:`connectx_baselines.teacher_labels.PLAYERS`), never a trained network's against
search.

The **random book** (:data:`RANDOM_BOOK`, ``baselines/data/teacher_book_random.npz``, added by
``--teacher-book random:COPIES``) takes positions of 12 stones or more from games of uniformly
random legal moves: the positions no player of the other books reaches (unplayed wins, unblocked
threats), where a network taught on games only makes twice its mistakes. None of them is in
either evaluation set (the game split ``positions.npz`` and the random split
``positions_random.npz``).

This module holds what the books are and reads them; ``tools/teacher_book.py`` makes them. A
book grows chunk by chunk: ``python -m tools.teacher_book --chunks N [--book NAME]`` labels the
next ``N`` chunks of :data:`BOOK_CHUNK` positions (chunk ``k`` of a book is seeded by
``(its seed, k)``) and rewrites the file after each one, so an interrupted command loses at most
the chunks in progress. A new command leaves out positions already in the book, so the file's
content depends on how its chunks were split between commands; ``meta["commands"]`` records it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from connectx_baselines.teacher_labels import ChunkSettings, TeacherSet
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
    "RANDOM_BOOK",
    "RANDOM_BOOK_FILE",
    "RANDOM_OPENING_BOOK",
    "RANDOM_OPENING_BOOK_FILE",
    "Book",
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

#: the shipped random book
RANDOM_BOOK_FILE = Path(__file__).parent / "data" / "teacher_book_random.npz"
#: how the random book's positions are chosen: games of uniformly random legal moves, positions
#: of 12 stones or more (earlier ones cost the solver seconds each), half of them kept
RANDOM_BOOK = dataclasses.replace(
    BOOK,
    min_ply=12,
    max_ply=None,
    keep=0.5,
    node_limit=3_000_000,
    players=("random",),
    opening_plies=0,
    table_bits=22,
)
#: positions per chunk of the random book (a few seconds of one core)
RANDOM_BOOK_CHUNK = 500

#: the shipped random opening book
RANDOM_OPENING_BOOK_FILE = Path(__file__).parent / "data" / "teacher_book_random_opening.npz"
#: how the random opening book's positions are chosen: the random book's games, positions of 6 to
#: 11 stones (those of 6 and 7 cost the solver seconds each, those of 8 to 11 under a second)
RANDOM_OPENING_BOOK = dataclasses.replace(
    RANDOM_BOOK, min_ply=6, max_ply=11, keep=0.3, node_limit=300_000_000, table_bits=24
)


@dataclass(frozen=True)
class Book:
    """A shipped book: its file and how its chunks are made."""

    file: Path
    settings: ChunkSettings
    seed: int
    chunk_size: int = BOOK_CHUNK


#: the books by name (``python -m tools.teacher_book --book NAME`` makes them)
BOOKS: dict[str, Book] = {
    "opening": Book(BOOK_FILE, BOOK, BOOK_SEED),
    "early": Book(EARLY_BOOK_FILE, EARLY_BOOK, BOOK_SEED + 1),
    "middle": Book(MIDDLE_BOOK_FILE, MIDDLE_BOOK, BOOK_SEED + 2),
    "random": Book(RANDOM_BOOK_FILE, RANDOM_BOOK, BOOK_SEED + 3, RANDOM_BOOK_CHUNK),
    "random_opening": Book(RANDOM_OPENING_BOOK_FILE, RANDOM_OPENING_BOOK, BOOK_SEED + 4),
}


def load_book(geometry: Geometry, path: str | Path | None = None) -> TeacherSet | None:
    """The book at ``path`` (default: the shipped opening book) if it is for ``geometry``, else
    None (also when the file is absent)."""
    path = Path(path) if path is not None else BOOK_FILE
    if not path.is_file():
        return None
    book = TeacherSet.load(path)
    return book if book.geometry == geometry else None
