"""Search kernels of the exact solver (:mod:`connectx_baselines.solver`), after Pascal Pons' solver.

Written once on integer bitboards: :func:`connectx_gym._jit.backend` compiles this module with numba
when the board fits in 64 bits and runs it on Python integers otherwise. Every kernel takes

- ``d``: the geometry's :class:`~connectx_gym._dims.Dims` (or their array,
  :func:`~connectx_gym._dims.dims_arg`);
- ``table``: the transposition table, an ``(n, 2)`` array of ``(key, bound)`` rows (``int64``, or
  ``object`` on boards of more than 64 bits), ``n`` prime; the key of a position
  (:func:`~connectx_baselines._kernels_common.position_key`) is unique and stored whole, so entries
  never collide;
- ``order``: the columns, centre first (ties in the move ordering keep it);
- ``frames`` and ``bounds``: the search's stack, one row per number of stones on the board
  (``cells + 1`` rows), in the layout of :mod:`connectx_baselines._layout`;
- ``stats``: the ``int64`` state array of :mod:`connectx_baselines._layout`; a search that visits
  more than ``stats[STAT_BUDGET]`` nodes sets ``stats[STAT_ABORTED]`` and returns garbage, which the
  caller discards (nothing is stored in the table after an abort, so the table stays exact).

Scores follow Pons' convention: with ``cells`` cells and ``moves`` stones on the board, a win for
the side to move with its next stone scores ``(cells + 1 - moves) // 2``, one stone later one
less, and so on; a loss scores the negative of the winner's score; a draw scores 0.
"""

from __future__ import annotations

from connectx_baselines._kernels_common import (
    non_losing_moves,
    open_frame,
    position_key,
    probe,
    sort_moves,
    store,
    threats_of,
)
from connectx_baselines._layout import (
    BOUND_ALPHA,
    BOUND_BETA,
    FRAME_COUNT,
    FRAME_CURRENT,
    FRAME_MASK,
    FRAME_MOVES,
    FRAME_NEXT,
    STAT_ABORTED,
    STAT_BUDGET,
    STAT_NODES,
)
from connectx_gym._dims import Dims, as_dims
from connectx_gym.bitboard import column_mask, has_line, winning_cells

#: Returned by :func:`solve_position` for a position in which a player already has a line.
GAME_OVER = 1 << 30
#: Column of a table row holding the bound (see :func:`negamax`).
TABLE_BOUND = 1


def negamax(
    current: int,
    mask: int,
    moves: int,
    alpha: int,
    beta: int,
    d: Dims,
    table,
    order,
    frames,
    bounds,
    stats,
) -> int:
    """Score of a position whose mover cannot win at once, within the window ``(alpha, beta)``.

    Fail-hard bounds as in Pons: a result ``<= alpha`` is an upper bound of the true score, one
    ``>= beta`` a lower bound, one in between exact. The recursion runs on an explicit stack, row
    ``moves`` of ``frames`` and ``bounds`` for the node with ``moves`` stones (numba cannot cache
    recursive functions). The table stores a lower bound ``b`` as ``-(b + offset)`` and an upper
    bound as ``b + offset``, shifted away from 0, the empty entry.
    """
    height, size, inarow, board, cells = d.height, d.size, d.inarow, d.board, d.cells
    offset = cells + 2
    root = moves
    opponent_wins = -1
    value = 0
    descending = True
    while True:
        if descending:
            # Enter the node (current, mask, moves, alpha, beta): settle it at once or open a frame.
            descending = False
            stats[STAT_NODES] += 1
            if stats[STAT_NODES] > stats[STAT_BUDGET]:
                stats[STAT_ABORTED] = 1
                return 0
            if opponent_wins < 0:
                opponent_wins = winning_cells(current ^ mask, board & ~mask, height, inarow, size)
            possible = non_losing_moves(mask, opponent_wins, d)
            if possible == 0:
                value = -((cells - moves) // 2)
                continue
            if moves >= cells - 2:
                value = 0
                continue
            lowest = -((cells - 2 - moves) // 2)
            if alpha < lowest:
                alpha = lowest
                if alpha >= beta:
                    value = alpha
                    continue
            highest = (cells - 1 - moves) // 2
            if beta > highest:
                beta = highest
                if alpha >= beta:
                    value = beta
                    continue
            slot = probe(table, position_key(current, mask))
            if slot >= 0:
                bound = int(table[slot, TABLE_BOUND])
                if bound < 0 and alpha < -bound - offset:
                    alpha = -bound - offset
                    if alpha >= beta:
                        value = alpha
                        continue
                elif bound > 0 and beta > bound - offset:
                    beta = bound - offset
                    if alpha >= beta:
                        value = beta
                        continue
            open_frame(frames, bounds, moves, current, mask, alpha, beta, 0)
            frames[moves, FRAME_COUNT] = sort_moves(
                current, mask, possible, order, d, frames, moves
            )
        else:
            # ``value`` is the score of the node at ply ``moves``: hand it to its parent.
            if moves == root:
                return value
            moves -= 1
            score = -value
            alpha = int(bounds[moves, BOUND_ALPHA])
            beta = int(bounds[moves, BOUND_BETA])
            current = frames[moves, FRAME_CURRENT]
            mask = frames[moves, FRAME_MASK]
            if score >= beta:
                table[store(table, position_key(current, mask)), TABLE_BOUND] = -(score + offset)
                value = score
                continue
            if score > alpha:
                alpha = score
                bounds[moves, BOUND_ALPHA] = alpha
            if frames[moves, FRAME_NEXT] >= frames[moves, FRAME_COUNT]:
                table[store(table, position_key(current, mask)), TABLE_BOUND] = alpha + offset
                value = alpha
                continue
        # Descend into the next move of the frame at ply ``moves``.
        index = frames[moves, FRAME_NEXT]
        frames[moves, FRAME_NEXT] = index + 1
        column = frames[moves, FRAME_MOVES + index]
        opponent_wins = threats_of(frames, moves, index, d)
        move = ((mask + d.bottom) & board) & column_mask(column, height)
        current, mask = current ^ mask, mask | move
        alpha, beta = -beta, -alpha
        moves += 1
        descending = True


def half_toward_zero(value: int) -> int:
    """``value / 2`` rounded toward zero, as C++ divides."""
    if value < 0:
        return -((-value) // 2)
    return value // 2


def solve_position(
    current: int,
    mask: int,
    moves: int,
    lower: int,
    upper: int,
    dims,
    table,
    order,
    frames,
    bounds,
    stats,
) -> int:
    """The exact score of a position, found by narrowing a null window (Pons' iterative search).

    Only scores in ``[lower, upper]`` are told apart: a result strictly between them is exact, a
    result ``<= lower`` means the true score is ``<= lower`` too, one ``>= upper`` that it is
    ``>= upper``. Returns :data:`GAME_OVER` when a player already has a line, 0 on a full board.
    """
    d = as_dims(dims)
    height, size, inarow, bottom, board, cells = (
        d.height,
        d.size,
        d.inarow,
        d.bottom,
        d.board,
        d.cells,
    )
    if has_line(current ^ mask, height, inarow, size) or has_line(current, height, inarow, size):
        return GAME_OVER
    if moves >= cells:
        return 0
    possible = (mask + bottom) & board
    if winning_cells(current, board & ~mask, height, inarow, size) & possible:
        return (cells + 1 - moves) // 2
    low = -((cells - moves) // 2)
    high = (cells + 1 - moves) // 2
    if lower > low:
        low = lower
    if upper < high:
        high = upper
    while low < high:
        middle = low + (high - low) // 2
        if middle <= 0 and half_toward_zero(low) < middle:
            middle = half_toward_zero(low)
        elif middle >= 0 and half_toward_zero(high) > middle:
            middle = half_toward_zero(high)
        result = negamax(
            current, mask, moves, middle, middle + 1, d, table, order, frames, bounds, stats
        )
        if stats[STAT_ABORTED]:
            return 0
        if result <= middle:
            high = result
        else:
            low = result
    return low
