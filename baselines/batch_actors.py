"""Batch actors of the search agents: one numba call scores every board facing the agent.

The batched env (:mod:`connectx_gym.vector`) asks ``onestep``, ``minimax``, ``negamax`` and
``alphabeta`` opponents for all their boards at once through these functions (each registered for
its policy class by the module of that class, :func:`connectx_gym.policy.register_batch_actor`,
and called by :mod:`connectx_gym.batch`). Scores are exactly the per-board kernels' (the loop
calls them); the column is one of maximal score with ties broken by the caller's generator.
``alphabeta`` searches each board as its
:meth:`~connectx_baselines.alphabeta.AlphaBetaPolicy.scores` does after a ``reset`` (from an
empty transposition table), in a table smaller than the agent's own
(:data:`ALPHABETA_TABLE_SIZE` rows, emptied faster).

A batch whose searches are long enough is cut into one part per thread and the parts are searched
at once, on numba's threads (``numba.set_num_threads`` or the ``NUMBA_NUM_THREADS`` environment
variable; by default the cores this process may use); whether a batch gains by it is measured as
the batches come (:mod:`connectx_baselines._thread_choice`). Each board's search is independent of
the others, so the answers do not depend on the threads. An ``alphabeta`` batch that may take long
(a time budget and no low ``max_depth``: seconds) waits on a helper thread, so that Ctrl-C stops
it at once.
"""

from __future__ import annotations

import threading

import numpy as np

from connectx_baselines._alphabeta import TABLE_WIDTH
from connectx_baselines._checks import require_depth_fits, run_stoppable
from connectx_baselines._layout import (
    SEARCH_MINIMAX,
    SEARCH_NEGAMAX,
    SEARCH_ONESTEP,
    STAT_HALT,
    center_order,
    new_frames,
    new_state,
)
from connectx_baselines._thread_choice import ThreadChoice
from connectx_baselines.alphabeta import AlphaBetaPolicy
from connectx_baselines.lookahead import MinimaxPolicy, OneStepPolicy
from connectx_baselines.negamax import NegamaxPolicy
from connectx_gym._dims import dims_arg
from connectx_gym._jit import backend
from connectx_gym.batch import BoardBatch, choose_best_batch
from connectx_gym.bitboard import Geometry

__all__ = [
    "ALPHABETA_TABLE_SIZE",
    "SEARCH_MINIMAX",
    "SEARCH_NEGAMAX",
    "SEARCH_ONESTEP",
    "alphabeta_act_batch",
    "alphabeta_batch_scores",
    "batch_scores",
    "minimax_act_batch",
    "negamax_act_batch",
    "onestep_act_batch",
]

_NO_WEIGHTS = np.zeros(1)
#: Rough nanoseconds of one-thread search per ``columns ** depth`` of a board (onestep: depth 1),
#: by search: the estimate that decides whether a batch may be spread over threads (an order of
#: magnitude is all it needs).
NANOSECONDS_PER_NODE = {SEARCH_ONESTEP: 150.0, SEARCH_MINIMAX: 150.0, SEARCH_NEGAMAX: 2.0}
_thread_choice = ThreadChoice()
#: Rows of the transposition table of each part of an ``alphabeta`` batch, emptied before each
#: board (not a power of two: keys are ``current + mask + 1``).
ALPHABETA_TABLE_SIZE = (1 << 13) + 3
#: Rough one-thread nanoseconds of an ``alphabeta`` board at depth 8 on the 6x7 board, for the
#: thread choice.
ALPHABETA_NANOSECONDS = 1_000_000.0
#: Batches of ``alphabeta`` that recently took longer (per board, times the boards) run where
#: Ctrl-C can stop them (:func:`alphabeta_batch_scores`).
STOPPABLE_SECONDS = 0.05
_scratch = threading.local()  # per thread: the parts' tables and stacks, by geometry and parts


def _parts(
    key: tuple, geometry: Geometry, boards: int, nanoseconds: float, threads: int | None
) -> int:
    """How many parts (one per thread) a batch of ``boards`` of class ``key`` is cut into:
    ``threads`` if given, else the :class:`ThreadChoice` among one and numba's threads for a
    batch estimated at ``nanoseconds`` on one thread; one for boards beyond 64 bits (Python
    integers)."""
    if not geometry.fits_64_bits:
        threads = 1
    elif threads is None:
        import numba

        available = min(numba.get_num_threads(), boards)
        threads = _thread_choice.threads(key, available, nanoseconds)
    return max(1, min(threads, boards))


def batch_scores(
    search: int,
    batch: BoardBatch,
    depth: int,
    own: np.ndarray,
    other: np.ndarray,
    threads: int | None = None,
) -> np.ndarray:
    """``(n, columns)`` scores of agent ``search`` (NaN: full columns) on every board of
    ``batch``, on ``threads`` threads (None: chosen by :class:`ThreadChoice` among one and
    numba's threads). The scores do not depend on the threads."""
    g = batch.geometry
    boards = len(batch)
    out = np.full((boards, g.columns), np.nan)
    if search != SEARCH_ONESTEP:
        require_depth_fits("depth", depth, g)
    key = (search, depth, boards.bit_length())
    estimate = boards * g.columns ** (1 if search == SEARCH_ONESTEP else depth)
    parts = _parts(key, g, boards, estimate * NANOSECONDS_PER_NODE[search], threads)
    frames, bounds = new_frames(depth, g)
    kernels = backend("connectx_baselines._batched_kernels", g)
    score = kernels.batch_scores_parallel if parts > 1 else kernels.batch_scores
    arguments = (
        search, batch.current, batch.mask, depth, own, other, center_order(g.columns), dims_arg(g),
        np.stack([frames] * parts), np.stack([bounds] * parts),
        np.stack([new_state() for _ in range(parts)]), out,
    )  # fmt: skip
    _thread_choice.run(key, parts, boards, lambda: score(*arguments))
    return out


def onestep_act_batch(
    policy: OneStepPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`OneStepPolicy.act` on every board of ``batch``."""
    own, other = policy.weights.arrays(batch.geometry.inarow)
    return choose_best_batch(batch_scores(SEARCH_ONESTEP, batch, 1, own, other), rng)


def minimax_act_batch(
    policy: MinimaxPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`MinimaxPolicy.act` on every board of ``batch``."""
    own, other = policy.weights.arrays(batch.geometry.inarow)
    return choose_best_batch(batch_scores(SEARCH_MINIMAX, batch, policy.depth, own, other), rng)


def negamax_act_batch(
    policy: NegamaxPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`NegamaxPolicy.act` on every board of ``batch``."""
    scores = batch_scores(SEARCH_NEGAMAX, batch, policy.depth, _NO_WEIGHTS, _NO_WEIGHTS)
    return choose_best_batch(scores, rng)


def _alphabeta_scratch(geometry: Geometry, parts: int) -> tuple[np.ndarray, ...]:
    """Tables, frames, bounds and stats for ``parts`` parts, kept for this thread's next batch."""
    kept = getattr(_scratch, "alphabeta", None)
    if kept is None:
        kept = _scratch.alphabeta = {}
    key = (geometry, parts, ALPHABETA_TABLE_SIZE)
    if key not in kept:
        dtype = np.int64 if geometry.fits_64_bits else object
        frames, bounds = new_frames(geometry.cells, geometry)
        kept[key] = (
            np.zeros((parts, ALPHABETA_TABLE_SIZE, TABLE_WIDTH), dtype=dtype),
            np.stack([frames] * parts),
            np.stack([bounds] * parts),
            np.stack([new_state() for _ in range(parts)]),
        )
    return kept[key]


def alphabeta_batch_scores(
    policy: AlphaBetaPolicy, batch: BoardBatch, threads: int | None = None
) -> np.ndarray:
    """``(n, columns)`` scores of ``policy`` (NaN: full columns) on every board of ``batch`` (no
    board over), each searched from an empty table to the policy's ``max_depth`` within its
    ``time_budget``, on ``threads`` threads (None: chosen as for :func:`batch_scores`)."""
    g = batch.geometry
    boards = len(batch)
    max_depth = g.cells if policy.max_depth is None else policy.max_depth
    require_depth_fits("max_depth", max_depth, g)
    out = np.full((boards, g.columns), np.nan)
    key = ("alphabeta", max_depth, policy.time_budget, boards.bit_length())
    parts = _parts(key, g, boards, boards * ALPHABETA_NANOSECONDS, threads)
    tables, frames, bounds, stats = _alphabeta_scratch(g, parts)
    own, other = policy.weights.arrays(g.inarow)
    kernels = backend("connectx_baselines._batched_kernels", g)
    score = kernels.alphabeta_scores_parallel if parts > 1 else kernels.alphabeta_scores
    arguments = (
        batch.current, batch.mask, batch.moves, max_depth, policy.time_budget,
        256 if g.fits_64_bits else 8, stats, out, tables, own, other, center_order(g.columns),
        dims_arg(g), frames, bounds,
    )  # fmt: skip
    # The searches read the clock without Python (on Linux), where Ctrl-C cannot reach them. A
    # batch that may take long (under a time budget: seconds) runs on a helper thread while this
    # one waits for Ctrl-C, which halts every search as if its time had run out; starting the
    # thread costs about 0.1 ms, more than a quick depth-limited batch takes.
    stats[:, STAT_HALT] = 0

    def search() -> None:
        score(*arguments)

    def halt() -> None:
        stats[:, STAT_HALT] = 1

    per_board = _thread_choice.seconds_per_board(key, parts)
    quick = per_board is not None and per_board * boards < STOPPABLE_SECONDS
    call = search if quick else lambda: run_stoppable(search, halt)
    _thread_choice.run(key, parts, boards, call)
    return out


def alphabeta_act_batch(
    policy: AlphaBetaPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`AlphaBetaPolicy.act` on every board of ``batch``, each from an empty table."""
    return choose_best_batch(alphabeta_batch_scores(policy, batch), rng)
