"""The resumable depth-limited alpha-beta loop shared by the minimax and negamax kernels.

Each search gives its evaluation, ``evaluate(to_move, moved, mask, agent_to_move, remaining,
own_weights, other_weights, d) -> (is_leaf, value)``: whether the position (``to_move`` the
stones of the player to move, ``moved`` those of the player who just moved, ``mask`` every
stone, ``remaining`` plies left to search, ``agent_to_move`` whether the root's mover is to
move) is decided without looking at its children, and then its value for the player to move.
:func:`run` searches every root column with it, in negamax form (a node's value is the best of
its children's values negated) with fail-soft alpha-beta, so the value of a column is exact
whenever it lies strictly inside its window. :func:`minimax_run` and :func:`negamax_run` are the
two searches. The evaluation is picked by the argument ``search``
(:data:`~connectx_baselines._layout.SEARCH_MINIMAX` or ``SEARCH_NEGAMAX``) rather than passed as
a function (numba does not cache a function that passes a compiled function on as a value): one
branch a leaf. :func:`run` is no
:func:`~connectx_gym._jit.helper` (those are compiled without numba's reference counting, which
the evaluations' small lists need).

The loop keeps its own stack (numba cannot cache self-recursive functions) in the arrays of
:mod:`connectx_baselines._layout`, and stops after a node budget: the caller runs it in chunks.
"""

from __future__ import annotations

import numpy as np

from connectx_baselines._kernels_common import next_move, open_frame, raise_value
from connectx_baselines._layout import (
    BOUND_ALPHA,
    BOUND_BETA,
    BOUND_VALUE,
    FRAME_CURRENT,
    FRAME_MASK,
    SEARCH_MINIMAX,
    SEARCH_NEGAMAX,
    STAT_BUDGET,
    STAT_NODES,
    STAT_PLY,
    STAT_ROOT,
)
from connectx_baselines._minimax import evaluate as minimax_evaluate
from connectx_baselines._negamax import evaluate as negamax_evaluate
from connectx_gym._dims import Dims, as_dims
from connectx_gym.bitboard import column_mask, possible_moves, winning_cells

_NO_WEIGHTS = np.zeros(1)


def evaluate(
    search: int,
    to_move: int,
    moved: int,
    mask: int,
    agent_to_move: bool,
    remaining: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    d: Dims,
) -> tuple[bool, float]:
    """The evaluation of ``search`` (``SEARCH_MINIMAX`` or ``SEARCH_NEGAMAX``)."""
    if search == SEARCH_MINIMAX:
        return minimax_evaluate(
            to_move, moved, mask, agent_to_move, remaining, own_weights, other_weights, d
        )
    return negamax_evaluate(
        to_move, moved, mask, agent_to_move, remaining, own_weights, other_weights, d
    )


def run(
    search: int,
    current: int,
    mask: int,
    depth: int,
    exact: bool,
    lowest: float,
    win_value: float,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    out: np.ndarray,
    frames,
    bounds: np.ndarray,
    state: np.ndarray,
) -> bool:
    """``out[c]``: the value of root column ``c`` for the player to move (NaN: full), searched
    ``depth`` plies deep with the evaluation of ``search``; values lie in
    ``[lowest, -lowest]``.

    A column that wins at once is worth ``win_value`` without a search (NaN: no such rule, the
    evaluation sees the line). With ``exact`` every column gets its exact value; otherwise only
    the columns of maximal value do, the others an upper bound strictly below the best (a column
    is pruned only when strictly worse than the best so far, so ties stay exact).

    Returns False when ``state``'s node budget ran out first: call again with the same arrays
    (and a larger budget) to carry on; True when ``out`` is complete. ``dims``: the
    :class:`~connectx_gym._dims.Dims` or their array.
    """
    d = as_dims(dims)
    moves = possible_moves(mask, d.bottom, d.board)
    wins = 0
    if not np.isnan(win_value):
        wins = winning_cells(current, moves, d.height, d.inarow, d.size)
    columns = order.shape[0]
    while state[STAT_ROOT] < columns:
        column = int(order[state[STAT_ROOT]])
        if state[STAT_PLY] < 0:
            move = moves & column_mask(column, d.height)
            if move == 0:
                out[column] = np.nan
                state[STAT_ROOT] += 1
                continue
            if move & wins:
                out[column] = win_value
                state[STAT_ROOT] += 1
                continue
            alpha = lowest
            if not exact:
                best = -np.inf
                for index in range(state[STAT_ROOT]):
                    if out[order[index]] > best:  # False for NaN
                        best = out[order[index]]
                # Just below the best so far: a tie with the best is strictly inside the window.
                alpha = max(lowest, np.nextafter(best, -np.inf))
            state[STAT_NODES] += 1
            leaf, value = evaluate(
                search, current ^ mask, current | move, mask | move, False, depth - 1, own_weights,
                other_weights, d,
            )  # fmt: skip
            if leaf:
                out[column] = -value + 0.0  # + 0.0: no negative zero
                state[STAT_ROOT] += 1
                continue
            open_frame(frames, bounds, 0, current ^ mask, mask | move, lowest, -alpha, lowest)
            state[STAT_PLY] = 0
        # Carry on the search below the root column (frame 0: the position after it; the root's
        # mover, the agent, is to move at odd plies).
        ply = state[STAT_PLY]
        while True:
            if state[STAT_NODES] >= state[STAT_BUDGET]:
                state[STAT_PLY] = ply
                return False
            move = next_move(frames, bounds, ply, order, d)
            if move == 0:
                # All children seen, or a cut-off: return this node's value to its parent.
                value = bounds[ply, BOUND_VALUE]
                if ply == 0:
                    break
                ply -= 1
            else:
                state[STAT_NODES] += 1
                node, node_mask = frames[ply, FRAME_CURRENT], frames[ply, FRAME_MASK]
                child, child_mask = node ^ node_mask, node_mask | move
                leaf, value = evaluate(
                    search, child, node | move, child_mask, ply % 2 == 0, depth - ply - 2,
                    own_weights, other_weights, d,
                )  # fmt: skip
                if not leaf:
                    alpha, beta = -bounds[ply, BOUND_BETA], -bounds[ply, BOUND_ALPHA]
                    ply += 1
                    open_frame(frames, bounds, ply, child, child_mask, alpha, beta, lowest)
                    continue
            raise_value(bounds, ply, -value)
        # Frame 0's value, for its mover: exact when strictly inside its window, else a bound
        # on the same side (fail-soft).
        state[STAT_PLY] = -1
        out[column] = -value + 0.0
        state[STAT_ROOT] += 1
    return True


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
    """Per-column minimax scores for the player to move (the agent), into ``out`` (NaN: full),
    scored by :func:`connectx_baselines._minimax.evaluate`.

    With ``exact`` every column gets its exact score. Otherwise only the columns of maximal
    score do; the others get an upper bound that is strictly below the best score (a column is
    pruned only when it is strictly worse than the best so far, so ties stay exact). Returns
    False when ``state``'s node budget ran out first (call again to carry on), True when
    ``out`` is complete.
    """
    return run(
        SEARCH_MINIMAX, current, mask, depth, exact, -np.inf, np.nan, own_weights, other_weights,
        order, dims, out, frames, bounds, state,
    )  # fmt: skip


def negamax_run(
    current: int, mask: int, depth: int, order: np.ndarray, dims, out, frames, bounds, state
) -> bool:
    """``out[c]``: 1 if column ``c`` wins at once, else ``-value(child, depth - 1)`` of
    :mod:`connectx_baselines._negamax`; NaN when ``c`` is full. Returns False when ``state``'s node
    budget ran out first (call again to carry on), True when ``out`` is complete."""
    return run(
        SEARCH_NEGAMAX, current, mask, depth, True, -2.0, 1.0, _NO_WEIGHTS, _NO_WEIGHTS, order,
        dims, out, frames, bounds, state,
    )  # fmt: skip
