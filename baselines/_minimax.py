"""Kernels of the tutorials' lookahead agents: one-step scores and depth-limited minimax.

Written once on integer bitboards; :func:`connectx_gym._jit.backend` compiles them with numba for
boards of up to 64 bits. The minimax is the tutorial's (the agent maximises, the opponent
minimises, leaves scored by the window heuristic from the agent's point of view) with alpha-beta
pruning: alpha-beta returns the exact value whenever it lies strictly inside the window, so a root
search that only prunes columns strictly worse than the best one finds exactly the plain minimax's
best columns and best score.

The search keeps its own stack (numba cannot cache self-recursive functions) in the arrays of
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
from baselines.heuristic import window_score
from connectx_gym._dims import Dims, as_dims
from connectx_gym.bitboard import column_mask, has_line, possible_moves


def onestep_scores(
    current: int, mask: int, own_weights: np.ndarray, other_weights: np.ndarray, dims, out
) -> None:
    """``out[c]``: the heuristic of the board after the player to move drops a disc in column
    ``c``, from that player's point of view; NaN for full columns. ``dims``: the
    :class:`~connectx_gym._dims.Dims` or their array (:func:`~connectx_gym._dims.dims_arg`)."""
    d = as_dims(dims)
    other = current ^ mask
    moves = possible_moves(mask, d.bottom, d.board)
    for column in range(d.columns):
        move = moves & column_mask(int(column), d.height)
        if move == 0:
            out[column] = np.nan
        else:
            out[column] = window_score(
                current | move, other, own_weights, other_weights, d.board, d.height, d.inarow,
                d.size,
            )  # fmt: skip


def _leaf(
    agent: int,
    opponent: int,
    agent_moved: bool,
    remaining: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    d: Dims,
) -> tuple[bool, float]:
    """``(is_leaf, heuristic)`` of a node: a leaf at the depth limit, when the player who just
    moved has a line (the other cannot have one: the game would have ended before) or when the
    board is full; the heuristic is computed for leaves only."""
    last = agent if agent_moved else opponent
    if (
        remaining == 0
        or (agent | opponent) == d.board
        or has_line(last, d.height, d.inarow, d.size)
    ):
        return True, window_score(
            agent, opponent, own_weights, other_weights, d.board, d.height, d.inarow, d.size
        )
    return False, 0.0


def _resume(
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    d: Dims,
    frames,
    bounds: np.ndarray,
    state: np.ndarray,
) -> tuple[bool, float]:
    """Carry on the search of the node in frame 0 (the opponent to move, ``depth`` plies left):
    ``(finished, value)``, the value exact when strictly inside the window of frame 0, else a
    bound on the same side (fail-soft). The opponent moves (minimises) at even plies."""
    ply = state[STAT_PLY]
    while True:
        if state[STAT_NODES] >= state[STAT_BUDGET]:
            state[STAT_PLY] = ply
            return False, 0.0
        maxing = ply % 2 == 1
        move = next_move(frames, bounds, ply, order, d)
        if move == 0:
            # All children seen, or a cut-off: return this node's value to its parent.
            result = bounds[ply, BOUND_VALUE]
            if ply == 0:
                state[STAT_PLY] = -1
                return True, result
            ply -= 1
            maxing = not maxing
        else:
            state[STAT_NODES] += 1
            current, mask = frames[ply, FRAME_CURRENT], frames[ply, FRAME_MASK]
            mover = current | move
            waiting = current ^ mask
            agent, opponent = (mover, waiting) if maxing else (waiting, mover)
            leaf, result = _leaf(
                agent, opponent, maxing, depth - ply - 1, own_weights, other_weights, d
            )
            if not leaf:
                alpha, beta = bounds[ply, BOUND_ALPHA], bounds[ply, BOUND_BETA]
                value = np.inf if maxing else -np.inf
                ply += 1
                open_frame(frames, bounds, ply, waiting, mask | move, alpha, beta, value)
                continue
        if maxing:
            raise_value(bounds, ply, result)
        elif result < bounds[ply, BOUND_VALUE]:
            bounds[ply, BOUND_VALUE] = result
            if result < bounds[ply, BOUND_BETA]:
                bounds[ply, BOUND_BETA] = result


def minimax_run(
    current: int,
    mask: int,
    depth: int,
    exact: bool,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    out: np.ndarray,
    frames,
    bounds: np.ndarray,
    state: np.ndarray,
) -> bool:
    """Per-column minimax scores for the player to move (the agent), into ``out`` (NaN: full).

    With ``exact`` every column gets its exact score. Otherwise only the columns of maximal
    score do; the others get an upper bound that is strictly below the best score (a column is
    pruned only when it is strictly worse than the best so far, so ties stay exact).

    Returns False when ``state``'s node budget ran out first: call again with the same arrays
    (and a larger budget) to carry on; True when ``out`` is complete. ``dims``: the
    :class:`~connectx_gym._dims.Dims` or their array.
    """
    d = as_dims(dims)
    opponent = current ^ mask
    moves = possible_moves(mask, d.bottom, d.board)
    columns = order.shape[0]
    while state[STAT_ROOT] < columns:
        column = int(order[state[STAT_ROOT]])
        if state[STAT_PLY] < 0:
            move = moves & column_mask(column, d.height)
            if move == 0:
                out[column] = np.nan
                state[STAT_ROOT] += 1
                continue
            best = -np.inf
            for index in range(state[STAT_ROOT]):
                if out[order[index]] > best:  # False for NaN
                    best = out[order[index]]
            # alpha just below the best so far: a tie with the best is strictly inside the window.
            alpha = -np.inf if exact else np.nextafter(best, -np.inf)
            state[STAT_NODES] += 1
            leaf, value = _leaf(
                current | move, opponent, True, depth - 1, own_weights, other_weights, d
            )
            if leaf:
                out[column] = value
                state[STAT_ROOT] += 1
                continue
            open_frame(frames, bounds, 0, opponent, mask | move, alpha, np.inf, np.inf)
            state[STAT_PLY] = 0
        finished, value = _resume(
            depth - 1, own_weights, other_weights, order, d, frames, bounds, state
        )
        if not finished:
            return False
        out[column] = value
        state[STAT_ROOT] += 1
    return True
