"""Helpers shared by the search kernels: one copy each, compiled with the kernels that call them.

Written on integer bitboards like the kernels (:mod:`connectx_gym._jit` compiles this module with
numba for boards of up to 64 bits and runs it on Python integers otherwise). ``d`` is the
geometry's :class:`~connectx_gym._dims.Dims`; ``frames`` and ``table`` follow
:mod:`connectx_baselines._layout`.
"""

from __future__ import annotations

from connectx_baselines._layout import (
    BOUND_ALPHA,
    BOUND_BETA,
    BOUND_VALUE,
    FRAME_CURRENT,
    FRAME_MASK,
    FRAME_MOVES,
    FRAME_NEXT,
    TABLE_KEY,
)
from connectx_gym._dims import Dims
from connectx_gym._jit import helper
from connectx_gym.bitboard import column_mask, popcount, possible_moves, winning_cells


@helper
def open_frame(frames, bounds, ply: int, current: int, mask: int, alpha, beta, value) -> None:
    """Row ``ply`` of the stack: the node ``(current, mask)``, no move tried yet, the window
    ``(alpha, beta)`` and the value so far."""
    frames[ply, FRAME_CURRENT] = current
    frames[ply, FRAME_MASK] = mask
    frames[ply, FRAME_NEXT] = 0
    bounds[ply, BOUND_ALPHA] = alpha
    bounds[ply, BOUND_BETA] = beta
    bounds[ply, BOUND_VALUE] = value


@helper
def next_move(frames, bounds, ply: int, order, d: Dims) -> int:
    """The next legal move (one bit) of row ``ply`` in the column ``order``, moving its
    ``FRAME_NEXT`` past it; 0 when every column was tried or the window is closed (a cut-off)."""
    move = 0
    if bounds[ply, BOUND_ALPHA] < bounds[ply, BOUND_BETA]:
        moves = possible_moves(frames[ply, FRAME_MASK], d.bottom, d.board)
        while frames[ply, FRAME_NEXT] < order.shape[0] and move == 0:
            move = moves & column_mask(int(order[frames[ply, FRAME_NEXT]]), d.height)
            frames[ply, FRAME_NEXT] += 1
    return move


@helper
def raise_value(bounds, ply: int, score) -> bool:
    """Negamax step of row ``ply`` with a child's ``score`` (from the row's side): keep the
    best value and raise alpha to it; True when alpha rose."""
    if score > bounds[ply, BOUND_VALUE]:
        bounds[ply, BOUND_VALUE] = score
        if score > bounds[ply, BOUND_ALPHA]:
            bounds[ply, BOUND_ALPHA] = score
            return True
    return False


@helper
def non_losing_moves(mask: int, opponent_wins: int, d: Dims) -> int:
    """Moves (one bit per column) that do not let the opponent win at once; 0 when none.

    ``opponent_wins`` are the opponent's winning cells. The side to move must not have a winning
    move itself (callers check it first). A single forced block is the only candidate; two
    threats to block lose; a move under an opponent's winning cell hands it over.
    """
    possible = (mask + d.bottom) & d.board
    forced = possible & opponent_wins
    if forced:
        if forced & (forced - 1):
            return 0
        possible = forced
    return possible & ~(opponent_wins >> 1)


@helper
def sort_moves(current: int, mask: int, moves: int, order, d: Dims, frames, ply: int) -> int:
    """Write the columns of ``moves`` into row ``ply`` of ``frames`` (from ``FRAME_MOVES``), the
    moves that make the most winning cells for the mover first (ties keep ``order``, centre
    first), and return how many.

    Beside each column the row keeps its key and the winning cells it makes (the child's
    opponent threats; -1 when ``moves`` is a single move, which is not sorted and left to the
    child to compute).
    """
    columns = d.columns
    keys = FRAME_MOVES + columns  # first cell of the keys run
    wins_at = keys + columns  # first cell of the winning-cells run
    empty = d.board & ~mask
    count = 0
    for index in range(columns):
        column = int(order[index])
        move = moves & column_mask(column, d.height)
        if move:
            wins = -1
            threats = 0
            if moves & (moves - 1):
                wins = winning_cells(current | move, empty & ~move, d.height, d.inarow, d.size)
                threats = popcount(wins)
            # Insertion sort; strict comparison keeps the order of equal keys.
            place = count
            while place > 0 and frames[ply, keys + place - 1] < threats:
                frames[ply, FRAME_MOVES + place] = frames[ply, FRAME_MOVES + place - 1]
                frames[ply, keys + place] = frames[ply, keys + place - 1]
                frames[ply, wins_at + place] = frames[ply, wins_at + place - 1]
                place -= 1
            frames[ply, FRAME_MOVES + place] = column
            frames[ply, keys + place] = threats
            frames[ply, wins_at + place] = wins
            count += 1
    return count


@helper
def move_to_front(frames, ply: int, count: int, column: int, d: Dims) -> None:
    """Move ``column`` (when among the ``count`` sorted moves of row ``ply``) to the front,
    the others keeping their order."""
    keys = FRAME_MOVES + d.columns
    wins_at = keys + d.columns
    for place in range(count):
        if frames[ply, FRAME_MOVES + place] == column:
            key, wins = frames[ply, keys + place], frames[ply, wins_at + place]
            for shift in range(place, 0, -1):
                frames[ply, FRAME_MOVES + shift] = frames[ply, FRAME_MOVES + shift - 1]
                frames[ply, keys + shift] = frames[ply, keys + shift - 1]
                frames[ply, wins_at + shift] = frames[ply, wins_at + shift - 1]
            frames[ply, FRAME_MOVES] = column
            frames[ply, keys] = key
            frames[ply, wins_at] = wins
            return


@helper
def threats_of(frames, ply: int, index: int, d: Dims) -> int:
    """The winning cells that move ``index`` of row ``ply``'s sorted list gives its mover (-1
    when :func:`sort_moves` did not compute them)."""
    return frames[ply, FRAME_MOVES + 2 * d.columns + index]


@helper
def position_key(current: int, mask: int) -> int:
    """The table key of a position: unique under Pons' layout and never 0 (the empty slot). On
    a 64-bit board it may wrap to a negative ``int64``; it is stored and compared whole, and
    ``%`` is Python's, so its slot is still valid."""
    return current + mask + 1


@helper
def probe(table, key: int) -> int:
    """The slot of ``table`` holding ``key``, or -1 when the position is not stored."""
    slot = key % table.shape[0]
    if table[slot, TABLE_KEY] == key:
        return slot
    return -1


@helper
def store(table, key: int) -> int:
    """The slot of ``key`` in ``table``, claimed for it (replacing what was there): the caller
    writes its data in that row."""
    slot = key % table.shape[0]
    table[slot, TABLE_KEY] = key
    return slot
