"""The shipped labels: chunks of teacher positions, labelled once, that a run reads instead.

``connectx train`` labels its teacher positions (:mod:`baselines.teacher_labels`) in chunks of
:data:`~baselines.teacher_labels.CHUNK`, each seeded from the run's seed. With the default seed
0, the default settings and the 6x7 board, every run labels the same chunks: the first 120 for the
default run's 30,000 positions, the first 800 for ``--preset strong``'s 200,000. Labelling those
takes most of an hour on 2 cores, so the package ships them (``baselines/data/teacher_chunks.npz``)
and :func:`~baselines.teacher_labels.make_teacher_set` reads a chunk from here when it holds
one: the same positions and values, made by the same function (a test relabels some and compares).
Any other seed, board or setting labels its own chunks as before.

Made by ``python -m baselines.teacher_cache --positions 200000 --workers 2`` (resumable: labelled
chunks are kept in ``--cache``); ``--check N`` relabels ``N`` random chunks of the file and
compares them.

Arrays: ``keys`` (str ``[c]``, :func:`~baselines.teacher_labels.chunk_key` of each chunk),
``offsets`` int64 ``[c + 1]`` (chunk ``i`` holds positions ``offsets[i]:offsets[i + 1]``),
``games`` and ``skipped`` int64 ``[c]``, ``moves`` int8 ``[n, cells]`` (0-based columns, -1
padded), ``values`` int8 ``[n, columns]`` (the chunk's values, -128 for a full column) and
``meta`` (JSON: the command, seed, settings and the digest of the excluded evaluation positions).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from baselines.teacher_labels import (
    KEEP,
    MIN_PLY,
    NODE_LIMIT,
    ChunkResult,
    ChunkSettings,
    chunk_jobs,
    chunk_key,
    evaluation_keys,
    label_chunk,
    label_chunks,
    pad_moves,
    unpad_moves,
)
from connectx_gym.bitboard import Geometry
from connectx_gym.outputs import open_atomically

__all__ = ["SHIPPED_FILE", "ChunkStore", "exclusion_digest", "main", "shipped_store"]

#: the shipped labels, in ``baselines/data``
SHIPPED_FILE = Path(__file__).parent / "data" / "teacher_chunks.npz"


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
        """The chunk of ``key`` as :func:`~baselines.teacher_labels.label_chunk` returns it, or
        ``None`` when the store does not hold it."""
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
        """A store of ``chunks`` (as :func:`~baselines.teacher_labels.label_chunk` returns
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


def _check(store: ChunkStore, count: int, seed: int, args: list[tuple]) -> None:
    """Relabel ``count`` chunks of ``store`` picked at random; raise if one differs."""
    picks = np.random.default_rng(seed).choice(len(args), size=min(count, len(args)), replace=False)
    for index in sorted(picks.tolist()):
        expected = label_chunk(*args[index])
        held = store.get(chunk_key(args[index]))
        if held is None or held[0] != expected[0] or held[2:] != expected[2:]:
            raise SystemExit(f"chunk {index} differs from its relabelling")
        if not all(np.array_equal(a, b) for a, b in zip(held[1], expected[1], strict=True)):
            raise SystemExit(f"chunk {index}'s values differ from its relabelling")
        print(f"chunk {index}: {len(expected[0])} positions equal", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Label the chunks of ``--positions`` teacher positions of ``--seed`` on 6x7 (the default
    settings) and write them as a store; or, with ``--check N``, relabel N of a store's."""
    parser = argparse.ArgumentParser(
        prog="python -m baselines.teacher_cache", description=main.__doc__
    )
    parser.add_argument("--positions", type=int, default=200_000, help="positions (chunks of 250)")
    parser.add_argument("--seed", type=int, default=0, help="the run seed the chunks belong to")
    parser.add_argument("--workers", type=int, default=2, help="labelling processes")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path("runs/teacher_cache"),
        help="folder of labelled chunk files (kept, so a stopped command resumes)",
    )
    parser.add_argument("--out", type=Path, default=SHIPPED_FILE, help="the store to write")
    parser.add_argument(
        "--check",
        type=int,
        default=0,
        metavar="N",
        help="relabel N random chunks of --out and compare (writes nothing)",
    )
    options = parser.parse_args(argv)
    for name in ("positions", "workers"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(options, name)}")
    if options.check < 0:
        parser.error(f"--check must be >= 0, got {options.check}")
    geometry = Geometry(6, 7, 4)
    excluded = frozenset(evaluation_keys(geometry))
    settings = ChunkSettings(geometry.key, MIN_PLY, KEEP, NODE_LIMIT)
    args = chunk_jobs(settings, options.positions, options.seed, excluded)
    if options.check and not options.out.is_file():
        parser.error(f"no store to check at {options.out}")
    if options.check:
        _check(ChunkStore.load(options.out), options.check, options.seed, args)
        return 0
    results = label_chunks(
        settings,
        options.positions,
        options.seed,
        workers=options.workers,
        cache=options.cache,
        shipped=False,
        log=lambda line: print(line, file=sys.stderr),
    )
    command = "python -m baselines.teacher_cache " + " ".join(argv or sys.argv[1:])
    meta = {
        "command": command.strip(),
        "geometry": list(geometry.key),
        "seed": options.seed,
        "positions": options.positions,
        "settings": settings.name(),
        "exclusion": exclusion_digest(excluded),
    }
    keys = [chunk_key(item) for item in args]
    store = ChunkStore.from_chunks(keys, results, geometry.cells, meta)
    store.save(options.out)
    print(f"{options.out}: {len(store)} chunks, {len(store.moves)} positions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
