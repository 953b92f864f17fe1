"""Kernels that score many boards in one call, looping over the per-board search kernels.

:func:`board_scores` is the one adapter between the batch loop and the per-board kernels of
:mod:`connectx_baselines._minimax` and :mod:`connectx_baselines._resumable`: a change of their
signatures touches it alone. :func:`batch_scores` runs the boards on one thread;
:func:`batch_scores_parallel` spreads them over numba's threads (each board's search is independent,
so the scores are the same). :func:`alphabeta_scores` and :func:`alphabeta_scores_parallel` do the
same for the alpha-beta agent's iterative deepening (:func:`connectx_baselines._alphabeta.deepen`),
each board searched from an empty transposition table, so that a board's scores do not depend on the
boards searched before it in the same table.
Compiled by numba through :func:`connectx_gym._jit.backend` for boards of up to 64 bits.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from connectx_baselines._alphabeta import deepen, move_deadline, now
from connectx_baselines._layout import (
    SEARCH_MINIMAX,
    SEARCH_ONESTEP,
    STAT_ABORTED,
    STAT_BUDGET,
    STAT_INTERRUPTIBLE,
    STAT_NEXT_CHECK,
    STAT_NODES,
    STAT_PLY,
    STAT_ROOT,
    TABLE_KEY,
)
from connectx_baselines._minimax import onestep_scores
from connectx_baselines._resumable import minimax_run, negamax_run
from connectx_gym._dims import as_dims
from connectx_gym._jit import parallel

#: The node budget of one board's search in a batch: the searches run to the end in one call.
UNLIMITED = 1 << 62


def board_scores(
    search: int,
    current: int,
    mask: int,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out``: the per-column scores of agent ``search`` on one board (NaN: full column), as its
    policy computes them for ``act`` (minimax: only the best columns exact). ``frames``,
    ``bounds`` and ``state`` are the search's scratch arrays, reused from board to board."""
    if search == SEARCH_ONESTEP:
        onestep_scores(current, mask, own_weights, other_weights, dims, out)
        return
    state[STAT_NODES] = 0
    state[STAT_BUDGET] = UNLIMITED
    state[STAT_PLY] = -1
    state[STAT_ROOT] = 0
    if search == SEARCH_MINIMAX:
        minimax_run(
            current, mask, depth, False, own_weights, other_weights, order, dims, out, frames,
            bounds, state,
        )  # fmt: skip
    else:
        negamax_run(current, mask, depth, order, dims, out, frames, bounds, state)


def _score_boards(
    search: int,
    current: np.ndarray,
    mask: np.ndarray,
    first: int,
    stop: int,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[k]``: :func:`board_scores` of board ``k`` for ``first <= k < stop``, one after the
    other in the same scratch arrays."""
    for k in range(first, stop):
        board_scores(
            search, current[k], mask[k], depth, own_weights, other_weights, order, dims, frames,
            bounds, state, out[k],
        )  # fmt: skip


def batch_scores(
    search: int,
    current: np.ndarray,
    mask: np.ndarray,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    states: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[k]``: :func:`board_scores` of board ``k`` (``current[k]``, ``mask[k]``), on one
    thread. ``frames``, ``bounds`` and ``states`` hold one set of scratch arrays per part
    (their first axis); this uses the first."""
    _score_boards(
        search, current, mask, 0, current.shape[0], depth, own_weights, other_weights, order, dims,
        frames[0], bounds[0], states[0], out,
    )  # fmt: skip


@parallel
def batch_scores_parallel(
    search: int,
    current: np.ndarray,
    mask: np.ndarray,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    states: np.ndarray,
    out: np.ndarray,
) -> None:
    """:func:`batch_scores` with the boards cut into ``frames.shape[0]`` consecutive parts, spread
    over numba's threads, each part searching in its own scratch arrays. Each board's search is
    independent of the others, so the scores are exactly those of :func:`batch_scores`."""
    parts = frames.shape[0]
    boards = current.shape[0]
    for part in prange(parts):
        _score_boards(
            search, current, mask, part * boards // parts, (part + 1) * boards // parts, depth,
            own_weights, other_weights, order, dims, frames[part], bounds[part], states[part],
            out,
        )  # fmt: skip


def _alphabeta_boards(
    current: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    first: int,
    step: int,
    max_depth: int,
    time_budget: float,
    check_every: int,
    stats: np.ndarray,
    out: np.ndarray,
    table,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> None:
    """``out[k]``: the alpha-beta agent's scores of board ``k`` (``moves[k]`` stones, no line,
    a free cell) for ``k = first, first + step, ...``, each searched to ``max_depth`` plies (at
    most to the game's end) within ``time_budget`` seconds from an empty ``table``, one after
    the other."""
    for k in range(first, current.shape[0], step):
        table[:, TABLE_KEY] = 0
        stats[STAT_NODES] = 0
        stats[STAT_ABORTED] = 0
        stats[STAT_NEXT_CHECK] = 0
        stats[STAT_INTERRUPTIBLE] = 0  # the clock without the GIL, as threads want it
        limit = min(max_depth, as_dims(dims).cells - moves[k])
        start = now(stats)
        deadline = move_deadline(start, time_budget)
        deepen(
            current[k], mask[k], moves[k], limit, start, deadline, check_every, stats, out[k],
            table, own_weights, other_weights, order, dims, frames, bounds,
        )  # fmt: skip


def alphabeta_scores(
    current: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    max_depth: int,
    time_budget: float,
    check_every: int,
    stats: np.ndarray,
    out: np.ndarray,
    tables,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> None:
    """``out[k]``: the alpha-beta agent's scores of board ``k`` (see :func:`_alphabeta_boards`),
    on one thread. ``stats``, ``tables``, ``frames`` and ``bounds`` hold one set of scratch
    arrays per part (their first axis); this uses the first."""
    _alphabeta_boards(
        current, mask, moves, 0, 1, max_depth, time_budget, check_every, stats[0],
        out, tables[0], own_weights, other_weights, order, dims, frames[0], bounds[0],
    )  # fmt: skip


@parallel
def alphabeta_scores_parallel(
    current: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    max_depth: int,
    time_budget: float,
    check_every: int,
    stats: np.ndarray,
    out: np.ndarray,
    tables,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> None:
    """:func:`alphabeta_scores` with the boards dealt to ``tables.shape[0]`` parts (part ``p``:
    boards ``p``, ``p + parts``, ...: searches of a game's end or a lost position take far
    longer than others, and neighbouring boards are often alike), spread over numba's threads,
    each part in its own table and scratch arrays. Each board is searched from an empty table,
    so its scores are those of :func:`alphabeta_scores` (when the depth limit, not the clock,
    ends the searches)."""
    parts = tables.shape[0]
    for part in prange(parts):
        _alphabeta_boards(
            current, mask, moves, part, parts, max_depth, time_budget, check_every, stats[part],
            out, tables[part], own_weights, other_weights, order, dims, frames[part],
            bounds[part],
        )  # fmt: skip
