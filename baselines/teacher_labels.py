"""Positions labelled by the exact solver, for teaching a network (``connectx train --teacher``).

A *teacher set* is many positions that real games reach, each with the game value of every legal
move for the player to move (+1 win, 0 draw, -1 loss, by :meth:`connectx_baselines.solver.Solver.
move_values`). A network that learns to put its probability on the value-keeping moves learns
what the mistake rate of :mod:`connectx_baselines.perfect_play` measures.

How positions are made (deterministic for a seed, whatever the number of worker processes):

1. The set is cut into chunks of :data:`CHUNK` positions, each with its own seed spawned from
   the run's seed. A chunk plays games between policies of mixed strength (:data:`PLAYERS`,
   both seats drawn with replacement) and keeps each position of at least ``min_ply`` stones
   with probability ``keep``.
2. Positions are deduplicated up to the horizontal mirror, and any position of ``exclude`` (the
   evaluation set of :mod:`connectx_baselines.perfect_play`, both splits, by default) is left out,
   so training never sees a position it is measured on.
3. Each is labelled under a node cap; a position not proven within it is skipped (the hardest
   early positions are under-represented, and positions under ``min_ply`` stones are absent:
   their values cost seconds each).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectx_baselines.game_positions import canonical_key, canonical_keys, play_game
from connectx_baselines.position_sets import load_positions
from connectx_baselines.solver import SearchLimitError, Solver
from connectx_baselines.teacher_cache import (
    ChunkResult,
    exclusion_digest,
    pad_moves,
    shipped_store,
    unpad_moves,
)
from connectx_baselines.teacher_ray import ChunkLostError, run_chunks_on_ray
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.openings import ply_openings
from connectx_gym.outputs import open_atomically
from connectx_gym.registry import make_policy
from connectx_gym.worker_pool import terminate, worker_pool

__all__ = [
    "CHUNK",
    "KEEP",
    "MIN_PLY",
    "NODE_LIMIT",
    "PLAYERS",
    "ChunkResult",
    "ChunkSettings",
    "LabellingStoppedError",
    "TeacherSet",
    "chunk_jobs",
    "chunk_key",
    "chunks_to_label",
    "evaluation_keys",
    "label_chunk",
    "label_chunks",
    "make_teacher_set",
    "merge_chunks",
    "pad_moves",
    "run_chunks",
    "unpad_moves",
]

#: positions per chunk (one seed and one worker task each)
CHUNK = 250
#: the players of the games positions are taken from (noisy ones reach more varied positions)
PLAYERS: tuple[str, ...] = (
    "onestep~0.3",
    "minimax:depth=1~0.2",
    "minimax:depth=2~0.2",
    "minimax:depth=2",
    "minimax:depth=3~0.2",
    "minimax:depth=3",
    "minimax:depth=4~0.1",
    "minimax:depth=4",
)
#: value stored for a full column
ILLEGAL = -128
#: the positions :func:`make_teacher_set` keeps and labels by default (its keyword defaults)
MIN_PLY, KEEP, NODE_LIMIT = 8, 0.35, 1_000_000


class LabellingStoppedError(Exception):
    """Labelling stopped (its ``stop`` said so) with ``done`` of ``total`` chunks labelled and
    kept in the cache folder."""

    def __init__(self, done: int, total: int) -> None:
        super().__init__(f"labelling stopped with {done} of {total} chunks done")
        self.done, self.total = done, total


@dataclass(frozen=True)
class TeacherSet:
    """Labelled positions: ``moves`` int8 ``[n, cells]`` (0-based columns, -1 padded) and
    ``values`` int8 ``[n, columns]`` (+1/0/-1 for the mover, :data:`ILLEGAL` for full columns)."""

    geometry: Geometry
    moves: np.ndarray
    values: np.ndarray
    meta: dict[str, Any]

    def __len__(self) -> int:
        return len(self.moves)

    def boards(self) -> list[Board]:
        """The positions as boards."""
        return [Board.from_moves(self.geometry, row[row >= 0]) for row in self.moves]

    def save(self, path: Path) -> None:
        """Write the set as ``.npz`` (atomically: :func:`connectx_gym.outputs.open_atomically`)."""
        with open_atomically(path, "wb") as file:
            np.savez_compressed(
                file, moves=self.moves, values=self.values, meta=json.dumps(self.meta)
            )

    @classmethod
    def load(cls, path: Path) -> TeacherSet:
        """Read a set written by :meth:`save` (no pickle)."""
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            geometry = Geometry(*meta["geometry"])
            return cls(geometry, data["moves"].copy(), data["values"].copy(), meta)


def evaluation_keys(geometry: Geometry) -> set[tuple[int, int]]:
    """Mirror-canonical keys of every shipped evaluation position (both splits) on ``geometry``;
    empty for a board size without a shipped set."""
    try:
        positions = load_positions(split="all")
    except (FileNotFoundError, ValueError):
        return set()
    if positions.geometry != geometry:
        return set()
    return set(canonical_keys(geometry, pad_moves(positions.moves, geometry.cells)))


@dataclass(frozen=True)
class ChunkSettings:
    """What a chunk of labelled positions depends on, besides its seed.

    Positions are taken from games between ``players`` (both seats drawn with replacement) that
    start from a random opening of ``opening_plies`` moves (:func:`connectx_gym.openings.
    ply_openings`); each position of ``min_ply`` to ``max_ply`` stones (``None``: any) is kept
    with probability ``keep`` and labelled under ``node_limit`` solver nodes.
    """

    geometry_key: tuple[int, int, int]
    min_ply: int
    keep: float
    node_limit: int
    max_ply: int | None = None
    players: tuple[str, ...] = PLAYERS
    opening_plies: int = 0
    table_bits: int = 22

    def name(self) -> str:
        """The settings in a file name (the defaults of the later fields are left out)."""
        rows, columns, inarow = self.geometry_key
        text = f"{rows}x{columns}x{inarow}_{self.min_ply}_{self.keep}_{self.node_limit}"
        if self.max_ply is not None or self.players != PLAYERS or self.opening_plies:
            players = hashlib.sha1("|".join(self.players).encode()).hexdigest()[:8]
            text += f"_{self.max_ply}_{players}_{self.opening_plies}"
        return text


def label_chunk(
    settings: ChunkSettings,
    seed: int | np.random.SeedSequence,
    count: int,
    exclude: frozenset[tuple[int, int]],
) -> ChunkResult:
    """``count`` labelled positions from games seeded by ``seed``, none of them (up to the
    mirror) in ``exclude``: (moves, values, games played, positions skipped)."""
    geometry = Geometry(*settings.geometry_key)
    solver = Solver(geometry, table_bits=settings.table_bits)
    rng = np.random.default_rng(seed)
    policies = [make_policy(spec) for spec in settings.players]
    openings = ply_openings(geometry, settings.opening_plies) if settings.opening_plies else [()]
    last_ply = geometry.cells if settings.max_ply is None else settings.max_ply + 1
    seen: set[tuple[int, int]] = set(exclude)
    moves_out: list[list[int]] = []
    values_out: list[np.ndarray] = []
    games = skipped = 0
    while len(moves_out) < count:
        games += 1
        start = openings[int(rng.integers(len(openings)))] if settings.opening_plies else ()
        moves = play_game(geometry, policies, rng, start)
        first = max(settings.min_ply, len(start))
        plies = [p for p in range(first, min(len(moves), last_ply)) if rng.random() < settings.keep]
        # From the end backwards: later positions fill the table that earlier ones reuse.
        for ply in reversed(plies):
            key = canonical_key(geometry, moves[:ply])
            if key in seen:
                continue
            seen.add(key)
            try:
                values = solver.move_values(
                    Board.from_moves(geometry, moves[:ply]), node_limit=settings.node_limit
                )
            except SearchLimitError:
                skipped += 1
                continue
            moves_out.append(moves[:ply])
            values_out.append(np.where(np.isnan(values), ILLEGAL, values).astype(np.int8))
            if len(moves_out) == count:
                break
    return moves_out, values_out, games, skipped


def run_chunks(
    jobs: dict[int, tuple[Any, ...]], workers: int, stop: Callable[[], bool] = lambda: False
) -> Generator[tuple[int, ChunkResult], None, None]:
    """``(index, label_chunk(*job))`` for each of ``jobs``, as each is done: ``workers``
    processes at a time (in this process when 1; they end with this one, SIGKILL included:
    :func:`connectx_gym.worker_pool.worker_pool`); no job is started once ``stop()`` is true,
    and the jobs running then are abandoned."""
    if workers <= 1 or len(jobs) <= 1:
        for index, job in jobs.items():
            if stop():
                return
            yield index, label_chunk(*job)
        return
    pending = iter(jobs.items())
    with worker_pool(workers) as pool:
        running: dict[Future[Any], int] = {}
        while True:
            while len(running) < workers and not stop():
                item = next(pending, None)
                if item is None:
                    break
                running[pool.submit(label_chunk, *item[1])] = item[0]
            if not running:
                return
            # woken once a second to look at stop() while long chunks run
            finished, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                yield running.pop(future), future.result()
            if stop() and running:
                terminate(pool)  # the chunks in progress are abandoned
                return


def make_teacher_set(
    geometry: Geometry,
    count: int,
    seed: int,
    *,
    min_ply: int = MIN_PLY,
    keep: float = KEEP,
    node_limit: int = NODE_LIMIT,
    exclude: Iterable[tuple[int, int]] | None = None,
    workers: int = 1,
    cache: Path | None = None,
    shipped: bool = True,
    log: Callable[[str], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    ray: str = "",
) -> TeacherSet:
    """``count`` (or a few fewer, after deduplication across chunks) labelled positions.

    ``exclude`` defaults to :func:`evaluation_keys`; ``workers`` processes, or with a ``ray``
    address Ray tasks (:mod:`connectx_baselines.teacher_ray`), label chunks in parallel (the
    result depends on neither). With a ``cache`` folder, each labelled chunk is written there and
    read back by a later call with the same settings, so an interrupted run loses at most the
    chunks in progress. With ``shipped``, chunks that the shipped labels hold (:mod:`
    connectx_baselines.teacher_cache`: the chunks of seed 0 on 6x7 with the default settings and
    exclusion) are read from them instead of labelled: the same positions and values this
    function labels, made by it. Once ``stop()`` is true no chunk is started and
    :class:`LabellingStoppedError` is raised (the chunks done are in ``cache``).
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not 0 < keep <= 1:
        raise ValueError(f"keep must be in (0, 1], got {keep}")
    if min_ply < 0 or min_ply >= geometry.cells:
        raise ValueError(f"min_ply must be in [0, {geometry.cells}), got {min_ply}")
    settings = ChunkSettings(geometry.key, min_ply, keep, node_limit)
    chunks = label_chunks(
        settings,
        count,
        seed,
        exclude=exclude,
        workers=workers,
        cache=cache,
        shipped=shipped,
        log=log,
        stop=stop,
        ray=ray,
    )
    meta = {
        "seed": seed,
        "min_ply": min_ply,
        "keep": keep,
        "node_limit": node_limit,
        "players": list(PLAYERS),
    }
    return merge_chunks(geometry, chunks, meta)


def label_chunks(
    settings: ChunkSettings,
    count: int,
    seed: int,
    *,
    exclude: Iterable[tuple[int, int]] | None = None,
    workers: int = 1,
    cache: Path | None = None,
    shipped: bool = True,
    log: Callable[[str], None] | None = None,
    stop: Callable[[], bool] = lambda: False,
    ray: str = "",
) -> list[ChunkResult]:
    """The chunks of :func:`make_teacher_set` (the same arguments, its settings gathered in
    ``settings``) before merging, in order: each read from ``cache``, read from the shipped
    labels or labelled; :class:`LabellingStoppedError` when ``stop()`` ended it, :class:`
    ChunkLostError` when a chunk could not be labelled (those done are cached in both cases)."""
    geometry = Geometry(*settings.geometry_key)
    excluded = frozenset(evaluation_keys(geometry) if exclude is None else exclude)
    args = chunk_jobs(settings, count, seed, excluded)
    results: dict[int, ChunkResult] = {}
    files = [_chunk_file(cache, index, item) for index, item in enumerate(args)]
    for index, file in enumerate(files):
        if file is not None and file.is_file():
            results[index] = _read_chunk(file)
    if shipped:
        _read_shipped(args, results, excluded, log)
    todo = [index for index in range(len(args)) if index not in results]
    progress = _Progress(log, len(todo), len(args) - len(todo), len(args))
    jobs = {index: args[index] for index in todo}
    chunks = (
        run_chunks_on_ray(label_chunk, jobs, ray, stop) if ray else run_chunks(jobs, workers, stop)
    )
    try:
        for index, result in chunks:
            results[index] = result
            if (file := files[index]) is not None:
                _write_chunk(file, result)  # cached as soon as each is labelled
            progress.update(len(results))
    except ChunkLostError as lost:
        kept = f" (kept in {cache}: a run again labels only the rest)" if cache else ""
        raise ChunkLostError(lost.index, lost.reason, len(results), len(args), kept) from None
    finally:
        chunks.close()  # now, on an interrupt too: the workers or Ray tasks in flight ended
    if len(results) < len(args):
        raise LabellingStoppedError(len(results), len(args))
    return [results[index] for index in range(len(args))]


def chunks_to_label(
    settings: ChunkSettings,
    count: int,
    seed: int,
    *,
    cache: Path | None = None,
    shipped: bool = True,
) -> tuple[int, int]:
    """(chunks :func:`label_chunks` would label, chunks in all) for the same arguments with the
    default exclusion: those neither in ``cache`` nor, with ``shipped``, in the shipped labels."""
    geometry = Geometry(*settings.geometry_key)
    excluded = frozenset(evaluation_keys(geometry))
    args = chunk_jobs(settings, count, seed, excluded)
    held: dict[int, ChunkResult] = {}
    if shipped:
        _read_shipped(args, held, excluded, None)
    todo = [
        index
        for index, item in enumerate(args)
        if index not in held and not ((file := _chunk_file(cache, index, item)) and file.is_file())
    ]
    return len(todo), len(args)


def chunk_jobs(
    settings: ChunkSettings, count: int, seed: int, excluded: frozenset[tuple[int, int]]
) -> list[tuple[ChunkSettings, int, int, frozenset[tuple[int, int]]]]:
    """The :func:`label_chunk` arguments of ``count`` positions of the run seed ``seed``: chunks
    of :data:`CHUNK` (the last one smaller), each seeded from ``seed`` by its index."""
    sizes = [CHUNK] * (count // CHUNK) + ([count % CHUNK] if count % CHUNK else [])
    seeds = np.random.SeedSequence(seed).generate_state(len(sizes)).tolist()
    return [(settings, s, n, excluded) for s, n in zip(seeds, sizes, strict=True)]


def chunk_key(args: tuple) -> str:
    """What a chunk's positions depend on, as text: its settings, seed and size (the exclusion
    is checked separately)."""
    settings, seed, count, _ = args
    return f"{settings.name()}_{seed}_{count}"


def _read_shipped(
    args: list[tuple],
    results: dict[int, ChunkResult],
    excluded: frozenset[tuple[int, int]],
    log: Callable[[str], None] | None,
) -> None:
    """Fill ``results`` with the shipped labels' chunks among ``args``, when they were made
    with the same excluded positions."""
    store = shipped_store()
    if store is None or store.exclusion != exclusion_digest(excluded):
        return
    found = 0
    for index, item in enumerate(args):
        chunk = store.get(chunk_key(item)) if index not in results else None
        if chunk is not None:
            results[index], found = chunk, found + 1
    if found and log is not None:
        log(f"teacher set: {found} of {len(args)} chunks read from the shipped labels")


def _chunk_file(cache: Path | None, index: int, args: tuple) -> Path | None:
    """The cache file of chunk ``index``; its name carries every setting the chunk depends on."""
    if cache is None:
        return None
    return cache / f"chunk{index:05d}_{chunk_key(args)}.npz"


def _write_chunk(path: Path, result: ChunkResult) -> None:
    moves, values, games, skipped = result
    padded = pad_moves(moves, max((len(m) for m in moves), default=0))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomically(path, "wb") as file:
        np.savez(file, moves=padded, values=np.array(values), counts=np.array([games, skipped]))


def _read_chunk(path: Path) -> ChunkResult:
    with np.load(path, allow_pickle=False) as data:
        moves = unpad_moves(data["moves"])
        games, skipped = (int(v) for v in data["counts"])
        return moves, list(data["values"]), games, skipped


class _Progress:
    """A line each tenth of the chunks to label or each 30 seconds, with the time left at the
    rate of this call's chunks."""

    def __init__(self, log: Callable[[str], None] | None, todo: int, held: int, total: int) -> None:
        self.log, self.todo, self.held, self.total = log, todo, held, total
        self.started = self.last = time.perf_counter()

    def update(self, done: int) -> None:
        labelled, now = done - self.held, time.perf_counter()
        due = labelled == self.todo or labelled % max(1, self.todo // 10) == 0
        if self.log is None or not (due or now - self.last >= 30):
            return
        self.last = now
        left = (self.todo - labelled) * (now - self.started) / labelled
        eta = f", ~{left / 60:.1f} min left" if labelled < self.todo else ""
        self.log(f"teacher set: {done}/{self.total} chunks labelled{eta}")


def merge_chunks(
    geometry: Geometry,
    results: Sequence[ChunkResult],
    meta: dict[str, Any],
    base: TeacherSet | None = None,
) -> TeacherSet:
    """The positions of ``base`` (if any), then those of the chunk ``results`` (as returned by
    :func:`label_chunk`) not seen before up to the mirror; ``meta`` plus the games played and
    positions skipped, added to ``base``'s."""
    columns = geometry.columns
    base_moves = np.zeros((0, geometry.cells), np.int8) if base is None else base.moves
    base_values = np.zeros((0, columns), np.int8) if base is None else base.values
    new_moves = pad_moves([moves for chunk in results for moves in chunk[0]], geometry.cells)
    new_values = np.array([value for chunk in results for value in chunk[1]], dtype=np.int8)
    seen = set(canonical_keys(geometry, base_moves))
    kept = []
    for index, key in enumerate(canonical_keys(geometry, new_moves)):
        if key not in seen:
            seen.add(key)
            kept.append(index)
    before = {} if base is None else base.meta
    games = int(before.get("games", 0)) + sum(chunk[2] for chunk in results)
    skipped = int(before.get("skipped", 0)) + sum(chunk[3] for chunk in results)
    moves_array = np.concatenate([base_moves, new_moves[kept]])
    value_array = np.concatenate([base_values, new_values.reshape(-1, columns)[kept]])
    meta = {"geometry": list(geometry.key), **meta, "games": games, "skipped": skipped}
    return TeacherSet(geometry, moves_array, value_array, meta)
