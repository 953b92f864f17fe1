"""Kernel of the Kaggle ConnectX notes' negamax, on integer bitboards.

``value(position, d)`` is 0 when ``d == 0``, 1 when the side to move can win at once, else the
maximum over its moves of ``-value(child, d - 1)`` (0 when no move is left: a full board). The
values are -1, 0 and 1, so alpha-beta on the window ``(-2, 2)`` returns them exactly. The search
keeps its own stack (numba cannot cache self-recursive functions) in the arrays of
:mod:`baselines._layout`, and stops after a node budget: the caller runs it in chunks.
"""

from __future__ import annotations

import numpy as np

from baselines._kernels_common import next_move, open_frame, raise_value
from baselines._layout import (
    BOUND_ALPHA,
    BOUND_BETA,
    BOUND_VALUE,
    FRAME_CURRENT,
    FRAME_MASK,
    STAT_BUDGET,
    STAT_NODES,
    STAT_PLY,
    STAT_ROOT,
)
from connectx_gym._dims import Dims, as_dims
from connectx_gym.bitboard import column_mask, possible_moves, winning_cells


def _leaf(current: int, mask: int, depth: int, d: Dims) -> tuple[bool, int]:
    """``(is_leaf, value)``: the value of a position decided without looking at its children."""
    if depth == 0:
        return True, 0
    moves = possible_moves(mask, d.bottom, d.board)
    if moves == 0:
        return True, 0
    if winning_cells(current, moves, d.height, d.inarow, d.size) != 0:
        return True, 1
    if depth == 1:
        return True, 0
    return False, 0


def _resume(depth: int, order: np.ndarray, d: Dims, frames, bounds, state) -> tuple[bool, int]:
    """Carry on the search of the node in frame 0 (``depth`` plies left): ``(finished,
    value)``, alpha-beta fail-soft (exact when strictly inside the window of frame 0)."""
    ply = state[STAT_PLY]
    while True:
        if state[STAT_NODES] >= state[STAT_BUDGET]:
            state[STAT_PLY] = ply
            return False, 0
        move = next_move(frames, bounds, ply, order, d)
        if move == 0:
            result = int(bounds[ply, BOUND_VALUE])
            if ply == 0:
                state[STAT_PLY] = -1
                return True, result
            ply -= 1
        else:
            state[STAT_NODES] += 1
            current, mask = frames[ply, FRAME_CURRENT], frames[ply, FRAME_MASK]
            child_current = current ^ mask
            child_mask = mask | move
            leaf, result = _leaf(child_current, child_mask, depth - ply - 1, d)
            if not leaf:
                alpha, beta = -bounds[ply, BOUND_BETA], -bounds[ply, BOUND_ALPHA]
                ply += 1
                open_frame(frames, bounds, ply, child_current, child_mask, alpha, beta, -2)
                continue
        raise_value(bounds, ply, -result)


def negamax_run(
    current: int, mask: int, depth: int, order: np.ndarray, dims, out, frames, bounds, state
) -> bool:
    """``out[c]``: 1 if column ``c`` wins at once, else ``-value(child, depth - 1)``; NaN when
    ``c`` is full. Returns False when ``state``'s node budget ran out first (call again with
    the same arrays and a larger budget to carry on), True when ``out`` is complete. ``dims``:
    the :class:`~connectx_gym._dims.Dims` or their array."""
    d = as_dims(dims)
    moves = possible_moves(mask, d.bottom, d.board)
    wins = winning_cells(current, moves, d.height, d.inarow, d.size)
    columns = order.shape[0]
    while state[STAT_ROOT] < columns:
        column = int(order[state[STAT_ROOT]])
        move = moves & column_mask(column, d.height)
        if state[STAT_PLY] < 0:
            if move == 0:
                out[column] = np.nan
                state[STAT_ROOT] += 1
                continue
            if move & wins:
                out[column] = 1.0
                state[STAT_ROOT] += 1
                continue
            state[STAT_NODES] += 1
            leaf, value = _leaf(current ^ mask, mask | move, depth - 1, d)
            if leaf:
                out[column] = -value
                state[STAT_ROOT] += 1
                continue
            open_frame(frames, bounds, 0, current ^ mask, mask | move, -2, 2, -2)
            state[STAT_PLY] = 0
        finished, value = _resume(depth - 1, order, d, frames, bounds, state)
        if not finished:
            return False
        out[column] = -value
        state[STAT_ROOT] += 1
    return True
