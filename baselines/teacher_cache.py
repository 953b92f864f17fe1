"""The shipped labels: chunks of teacher positions, labelled once, that a run reads instead.

``connectx train`` labels its teacher positions (:mod:`connectx_baselines.teacher_labels`) in chunks
of :data:`~connectx_baselines.teacher_labels.CHUNK`, each seeded from the run's seed. With the
default seed 0, the default settings and the 6x7 board, every run labels the same chunks: the first
120 for the default run's 30,000 positions, the first 800 for ``--preset strong``'s 200,000.
Labelling those takes most of an hour on 2 cores, so the package ships them
(``baselines/data/teacher_chunks.npz``) and
:func:`~connectx_baselines.teacher_labels.make_teacher_set` reads a chunk from here when it holds
one: the same positions and values, made by the same function (a test relabels some and compares).
Any other seed, board or setting labels its own chunks as before.

This module reads the file (and holds its format); ``python -m tools.teacher_cache --positions
200000 --workers 2`` in the repository makes it (resumable: labelled chunks are kept in
``--cache``), and ``--check N`` relabels ``N`` random chunks of the file and compares them.

Arrays: ``keys`` (str ``[c]``, :func:`~connectx_baselines.teacher_labels.chunk_key` of each chunk),
``offsets`` int64 ``[c + 1]`` (chunk ``i`` holds positions ``offsets[i]:offsets[i + 1]``),
``games`` and ``skipped`` int64 ``[c]``, ``moves`` int8 ``[n, cells]`` (0-based columns, -1
padded), ``values`` int8 ``[n, columns]`` (the chunk's values, -128 for a full column) and
``meta`` (JSON: the command, seed, settings and the digest of the excluded evaluation positions).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectx_gym.outputs import open_atomically

__all__ = [
    "SHIPPED_FILE",
    "ChunkResult",
    "ChunkStore",
    "exclusion_digest",
    "pad_moves",
    "shipped_store",
    "unpad_moves",
]

#: the shipped labels, in ``baselines/data``
SHIPPED_FILE = Path(__file__).parent / "data" / "teacher_chunks.npz"
#: a labelled chunk: (moves of each position, its move values, games played, positions skipped)
ChunkResult = tuple[list[list[int]], list[np.ndarray], int, int]


def pad_moves(rows: Sequence[Sequence[int]], width: int) -> np.ndarray:
    """Move sequences as an int8 ``[len(rows), width]`` array, padded with -1."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    if len(rows) and lengths.max() > width:
        raise ValueError(f"a row of {lengths.max()} moves is wider than {width}")
    padded = np.full((len(rows), width), -1, dtype=np.int8)
    # the cells before each row's length, in row-major order: the rows' moves one after another
    padded[np.arange(width) < lengths[:, None]] = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=np.int8, count=int(lengths.sum())
    )
    return padded


def unpad_moves(padded: np.ndarray) -> list[list[int]]:
    """The move sequences of a -1 padded array (the inverse of :func:`pad_moves`)."""
    played = padded >= 0
    moves = iter(padded[played].tolist())  # row-major: row after row
    return [list(itertools.islice(moves, length)) for length in played.sum(axis=1).tolist()]


def exclusion_digest(keys: Iterable[tuple[int, int]]) -> str:
    """A short digest of a set of excluded position keys (chunks depend on it)."""
    text = ",".join(f"{a}:{b}" for a, b in sorted(keys))
    return hashlib.sha1(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ChunkStore:
    """Labelled chunks by key (see the module docstring for the arrays)."""

    keys: np.ndarray
    offsets: np.ndarray
    games: np.ndarray
    skipped: np.ndarray
    moves: np.ndarray
    values: np.ndarray
    meta: dict[str, Any]

    @property
    def exclusion(self) -> str:
        """The digest of the positions excluded when the chunks were labelled."""
        return str(self.meta["exclusion"])

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {str(key): index for index, key in enumerate(self.keys)}

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, key: str) -> ChunkResult | None:
        """The chunk of ``key`` as :func:`~connectx_baselines.teacher_labels.label_chunk` returns
        it, or ``None`` when the store does not hold it."""
        index = self._index.get(key)
        if index is None:
            return None
        rows = slice(int(self.offsets[index]), int(self.offsets[index + 1]))
        moves = unpad_moves(self.moves[rows])
        values = list(self.values[rows].copy())
        return moves, values, int(self.games[index]), int(self.skipped[index])

    @classmethod
    def from_chunks(
        cls, keys: Sequence[str], chunks: Sequence[ChunkResult], cells: int, meta: dict[str, Any]
    ) -> ChunkStore:
        """A store of ``chunks`` (as :func:`~connectx_baselines.teacher_labels.label_chunk` returns
        them) under ``keys``; ``meta`` must hold ``"exclusion"``."""
        if "exclusion" not in meta:
            raise ValueError("meta must hold the exclusion digest")
        sizes = [len(chunk[0]) for chunk in chunks]
        moves = pad_moves([position for chunk in chunks for position in chunk[0]], cells)
        values = [value for chunk in chunks for value in chunk[1]]
        return cls(
            keys=np.array(list(keys), dtype=str),
            offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
            games=np.array([chunk[2] for chunk in chunks], dtype=np.int64),
            skipped=np.array([chunk[3] for chunk in chunks], dtype=np.int64),
            moves=moves,
            values=np.stack(values).astype(np.int8),
            meta=meta,
        )

    def save(self, path: Path) -> None:
        """Write the store as compressed ``.npz`` (atomically:
        :func:`connectx_gym.outputs.open_atomically`)."""
        arrays = {name: getattr(self, name) for name in ("keys", "offsets", "games", "skipped")}
        arrays |= {"moves": self.moves, "values": self.values, "meta": json.dumps(self.meta)}
        with open_atomically(path, "wb") as file:
            np.savez_compressed(file, **arrays)

    @classmethod
    def load(cls, path: Path) -> ChunkStore:
        """Read a store written by :meth:`save` (no pickle)."""
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files if name != "meta"}
            return cls(**arrays, meta=json.loads(str(data["meta"])))


@functools.cache
def shipped_store() -> ChunkStore | None:
    """The shipped labels (read once), or ``None`` where the file is absent."""
    return ChunkStore.load(SHIPPED_FILE) if SHIPPED_FILE.is_file() else None
