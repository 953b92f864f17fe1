"""Search kernels of the exact solver (:mod:`baselines.solver`), after Pascal Pons' solver.

Written once on integer bitboards: :func:`baselines._dual.backend` compiles this module with numba
when the board fits in 64 bits and runs it on Python integers otherwise. Every kernel takes

- ``d``: the geometry's :class:`~baselines._layout.Dims`;
- ``table``: the transposition table, an ``(n, 2)`` array of ``(key, bound)`` rows (``int64``, or
  ``object`` on boards of more than 64 bits), ``n`` prime; the key of a position is
  ``current + mask``, unique under Pons' layout, and stored whole, so entries never collide (on a
  64-bit board it may wrap to a negative ``int64``; ``%`` is Python's, so its slot is still valid);
- ``scratch``: a ``(cells + 1, 3 * columns + 7)`` array (``int64``, or ``object`` like the
  table), one row per ply: the search's stack. A node sorts its moves there (columns, their threat
  counts, the winning cells they give) and keeps its frame (position, window, key, move index);
- ``stats``: ``int64`` array, the named indices of :mod:`baselines._layout` followed by the column
  order (from ``STAT_SIZE`` on); a search that visits more than ``stats[STAT_BUDGET]`` nodes sets
  ``stats[STAT_ABORTED]`` and returns garbage, which the caller discards
  (nothing is stored in the table after an abort, so the table stays exact).

Scores follow Pons' convention: with ``cells`` cells and ``moves`` stones on the board, a win for
the side to move with its next stone scores ``(cells + 1 - moves) // 2``, one stone later one
less, and so on; a loss scores the negative of the winner's score; a draw scores 0.
"""

from __future__ import annotations

from baselines._layout import STAT_ABORTED, STAT_BUDGET, STAT_NODES, STAT_SIZE, Dims
from connectx_gym.bitboard import column_mask, has_line, popcount, winning_cells

#: Returned by :func:`solve_position` for a position in which a player already has a line.
GAME_OVER = 1 << 30


def non_losing_moves(mask: int, opponent_wins: int, d: Dims) -> int:
    """Moves (one bit per column) that do not let the opponent win at once; 0 when none.

    ``opponent_wins`` are the opponent's winning cells. The side to move must not have a winning
    move itself (callers check it first).
    """
    possible = (mask + d.bottom) & d.board
    forced = possible & opponent_wins
    if forced:
        if forced & (forced - 1):
            return 0
        possible = forced
    return possible & ~(opponent_wins >> 1)


def negamax(
    current: int,
    mask: int,
    moves: int,
    alpha: int,
    beta: int,
    d: Dims,
    table,
    scratch,
    stats,
) -> int:
    """Score of a position whose mover cannot win at once, within the window ``(alpha, beta)``.

    Fail-hard bounds as in Pons: a result ``<= alpha`` is an upper bound of the true score, one
    ``>= beta`` a lower bound, one in between exact. The recursion runs on an explicit stack, one
    row of ``scratch`` per ply (numba cannot cache recursive functions).
    """
    height, size, inarow, board, cells, columns = (
        d.height,
        d.size,
        d.inarow,
        d.board,
        d.cells,
        d.columns,
    )
    frame = 3 * columns  # first column of a row's frame: current, mask, alpha, beta, key, index
    offset = cells + 2  # bounds are stored shifted away from 0, the empty entry
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
            empty = board & ~mask
            if opponent_wins < 0:
                opponent_wins = winning_cells(current ^ mask, empty, height, inarow, size)
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
            key = current + mask
            slot = key % table.shape[0]
            if table[slot, 0] == key:
                bound = int(table[slot, 1])
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
            # Order the moves by the number of winning cells they give the mover, centre first
            # on ties; those cells are the child's opponent_wins, kept in the row's third part.
            count = 0
            for index in range(columns):
                column = int(stats[STAT_SIZE + index])
                move = possible & column_mask(column, height)
                if move:
                    wins = -1
                    threats = 0
                    if possible & (possible - 1):
                        wins = winning_cells(current | move, empty & ~move, height, inarow, size)
                        threats = popcount(wins)
                    place = count
                    while place > 0 and scratch[moves, columns + place - 1] < threats:
                        scratch[moves, place] = scratch[moves, place - 1]
                        scratch[moves, columns + place] = scratch[moves, columns + place - 1]
                        scratch[moves, frame - columns + place] = scratch[
                            moves, frame - columns + place - 1
                        ]
                        place -= 1
                    scratch[moves, place] = column
                    scratch[moves, columns + place] = threats
                    scratch[moves, frame - columns + place] = wins
                    count += 1
            scratch[moves, frame] = current
            scratch[moves, frame + 1] = mask
            scratch[moves, frame + 2] = alpha
            scratch[moves, frame + 3] = beta
            scratch[moves, frame + 4] = key
            scratch[moves, frame + 5] = 0
            scratch[moves, frame + 6] = count
        else:
            # ``value`` is the score of the node at ply ``moves``: hand it to its parent.
            if moves == root:
                return value
            moves -= 1
            score = -value
            alpha = scratch[moves, frame + 2]
            beta = scratch[moves, frame + 3]
            key = scratch[moves, frame + 4]
            if score >= beta:
                slot = key % table.shape[0]
                table[slot, 0] = key
                table[slot, 1] = -(score + offset)
                value = score
                continue
            if score > alpha:
                alpha = score
                scratch[moves, frame + 2] = alpha
            index = scratch[moves, frame + 5] + 1
            if index >= scratch[moves, frame + 6]:
                slot = key % table.shape[0]
                table[slot, 0] = key
                table[slot, 1] = alpha + offset
                value = alpha
                continue
            scratch[moves, frame + 5] = index
            current = scratch[moves, frame]
            mask = scratch[moves, frame + 1]
        # Descend into the child at ``index`` of the frame at ply ``moves``.
        index = scratch[moves, frame + 5]
        column = scratch[moves, index]
        opponent_wins = scratch[moves, frame - columns + index]
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
    d: Dims,
    table,
    scratch,
    stats,
) -> int:
    """The exact score of a position, found by narrowing a null window (Pons' iterative search).

    Only scores in ``[lower, upper]`` are told apart: a result strictly between them is exact, a
    result ``<= lower`` means the true score is ``<= lower`` too, one ``>= upper`` that it is
    ``>= upper``. Returns :data:`GAME_OVER` when a player already has a line, 0 on a full board.
    """
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
        result = negamax(current, mask, moves, middle, middle + 1, d, table, scratch, stats)
        if stats[STAT_ABORTED]:
            return 0
        if result <= middle:
            high = result
        else:
            low = result
    return low
