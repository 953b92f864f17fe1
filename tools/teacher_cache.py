"""Make the shipped teacher labels, ``baselines/data/teacher_chunks.npz`` (read by
:mod:`connectx_baselines.teacher_cache`): label the chunks of the default run's teacher positions
once.

Run from the repository root::

    python -m tools.teacher_cache --positions 200000 --workers 2     # resumable (--cache)
    python -m tools.teacher_cache --check 5                          # relabel 5 chunks, compare
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from connectx_baselines._thread_choice import available_cores
from connectx_baselines.teacher_cache import SHIPPED_FILE, ChunkStore, exclusion_digest
from connectx_baselines.teacher_labels import (
    KEEP,
    MIN_PLY,
    NODE_LIMIT,
    ChunkSettings,
    chunk_jobs,
    chunk_key,
    evaluation_keys,
    label_chunk,
    label_chunks,
)
from connectx_gym.bitboard import Geometry

__all__ = ["main"]


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
    parser = argparse.ArgumentParser(prog="python -m tools.teacher_cache", description=main.__doc__)
    parser.add_argument("--positions", type=int, default=200_000, help="positions (chunks of 250)")
    parser.add_argument("--seed", type=int, default=0, help="the run seed the chunks belong to")
    parser.add_argument(
        "--workers",
        type=int,
        default=available_cores(),
        help="labelling processes (default: the cores)",
    )
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
    command = "python -m tools.teacher_cache " + " ".join(argv or sys.argv[1:])
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
