"""Kernel of the alpha-beta agent: a depth-limited negamax with a transposition table.

Scores are integers from the point of view of the player to move: a win with ``s`` stones on the
board once it is made scores ``WIN - s`` (sooner is better), a loss the negation, a draw 0, and a
position at the horizon the window heuristic of :mod:`baselines.heuristic` (far below ``WIN``).
Win scores count stones from the empty board, not plies from the root, so the table stays valid
from one move to the next.

Each node first settles what needs no search: a move that wins at once, a loss when the opponent
has two immediate wins (or every move puts a disc under an opponent's winning cell), the single
forced block. Only the moves that do not hand the opponent a win are searched, the table's move
first, then the moves making the most winning cells, centre first on ties.

The search keeps its own stack (numba cannot cache self-recursive functions) and reads the clock
every ``check_every`` nodes; past ``deadline`` it stops and sets ``stats[STAT_ABORTED]``.
"""

from __future__ import annotations

import time

import numpy as np
from numba import objmode

from baselines._layout import STAT_ABORTED, STAT_NEXT_CHECK, STAT_NODES
from baselines.heuristic import window_score
from connectx_gym.bitboard import column_mask, popcount, possible_moves, winning_cells

#: Score of a win made with no stone on the board; real wins score ``WIN - stones``.
WIN = 1_000_000
#: Bound of every score.
INFINITY = 2 * WIN

_EXACT = 0
_LOWER = 1
_UPPER = 2


def now() -> float:
    """``time.perf_counter()``, callable from compiled code."""
    with objmode(current="float64"):
        current = time.perf_counter()
    return current


def _settle(
    current: int,
    mask: int,
    stones: int,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> tuple[bool, int, int]:
    """``(settled, score, moves)``: the score of a position that needs no search, or the moves
    worth searching (those that do not hand the opponent a win)."""
    possible = possible_moves(mask, bottom, board_bits)
    if possible == 0:
        return True, 0, 0
    if winning_cells(current, possible, height, inarow, size) != 0:
        return True, WIN - stones - 1, 0
    opponent = current ^ mask
    threats = winning_cells(opponent, board_bits & ~mask, height, inarow, size)
    forced = threats & possible
    if forced != 0:
        if forced & (forced - 1) != 0:
            return True, stones + 2 - WIN, 0
        possible = forced
    moves = possible & ~(threats >> 1)
    if moves == 0:
        return True, stones + 2 - WIN, 0
    if depth <= 0:
        score = window_score(
            current, opponent, own_weights, other_weights, board_bits, height, inarow, size
        )
        return True, int(score), 0
    return False, 0, moves


def _order_moves(
    current: int,
    mask: int,
    moves: int,
    first: int,
    order: np.ndarray,
    height: int,
    inarow: int,
    size: int,
    board_bits: int,
    slots: list[int],
    base: int,
) -> int:
    """Write the columns of ``moves`` into ``slots[base:]``, best first, and return how many.

    Column ``first`` (the table's move, or -1) leads; then the moves making the most winning
    cells for the player; ties keep ``order`` (centre first)."""
    keys = [0] * order.shape[0]
    count = 0
    for index in range(order.shape[0]):
        column = int(order[index])
        move = moves & column_mask(column, height)
        if move == 0:
            continue
        if column == first:
            key = 1 << 20
        else:
            after = current | move
            key = popcount(winning_cells(after, board_bits & ~(mask | move), height, inarow, size))
        position = count
        while position > 0 and keys[position - 1] < key:
            keys[position] = keys[position - 1]
            slots[base + position] = slots[base + position - 1]
            position -= 1
        keys[position] = key
        slots[base + position] = column
        count += 1
    return count


def search(
    current: int,
    mask: int,
    stones: int,
    depth: int,
    alpha: int,
    beta: int,
    deadline: float,
    check_every: int,
    stats: np.ndarray,
    table_keys: np.ndarray,
    table_data: np.ndarray,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> int:
    """Negamax score of the position for the player to move, ``depth`` plies deep.

    Alpha-beta, fail-soft: exact when strictly inside ``(alpha, beta)``, else a bound on that
    side. No line may be on the board. ``stats[STAT_NODES]`` counts nodes; the clock is read when
    it reaches ``stats[STAT_NEXT_CHECK]`` (then moved ``check_every`` further);
    ``stats[STAT_ABORTED]`` is set to 1 (and the
    result is meaningless) when the clock passed ``deadline``. ``table_keys`` (0: empty
    slot) and ``table_data`` (rows ``[score, depth, flag, move]``) are the transposition table.
    """
    settled, score, moves = _settle(
        current,
        mask,
        stones,
        depth,
        own_weights,
        other_weights,
        bottom,
        board_bits,
        height,
        inarow,
        size,
    )
    if settled:
        stats[STAT_NODES] += 1
        return score
    columns = order.shape[0]
    capacity = table_keys.shape[0]
    currents = [0] * (depth + 1)
    masks = [0] * (depth + 1)
    playable = [0] * (depth + 1)
    alphas = [0] * (depth + 1)
    betas = [0] * (depth + 1)
    values = [0] * (depth + 1)
    best_columns = [0] * (depth + 1)
    last_columns = [0] * (depth + 1)
    next_index = [0] * (depth + 1)
    counts = [0] * (depth + 1)
    slots = [0] * ((depth + 1) * columns)
    ply = 0
    entering = True
    node_current, node_mask, node_moves = current, mask, moves
    node_alpha, node_beta = alpha, beta
    while True:
        if entering:
            # A node that needs a search: probe the table, order the moves, push a frame.
            entering = False
            stats[STAT_NODES] += 1
            if stats[STAT_NODES] >= stats[STAT_NEXT_CHECK]:
                stats[STAT_NEXT_CHECK] = stats[STAT_NODES] + check_every
                if now() > deadline:
                    stats[STAT_ABORTED] = 1
                    return 0
            key = node_current + node_mask + 1
            slot = key % capacity
            first = -1
            cut = False
            result = 0
            if table_keys[slot] == key:
                first = table_data[slot, 3]
                if table_data[slot, 1] >= depth - ply:
                    stored, flag = table_data[slot, 0], table_data[slot, 2]
                    if flag == _EXACT:
                        cut = True
                    elif flag == _LOWER and stored > node_alpha:
                        node_alpha = stored
                    elif flag == _UPPER and stored < node_beta:
                        node_beta = stored
                    cut = cut or node_alpha >= node_beta
                    result = stored
            if not cut:
                currents[ply], masks[ply], playable[ply] = node_current, node_mask, node_moves
                alphas[ply], betas[ply] = node_alpha, node_beta
                values[ply] = -INFINITY
                best_columns[ply] = -1
                next_index[ply] = 0
                counts[ply] = _order_moves(
                    node_current,
                    node_mask,
                    node_moves,
                    first,
                    order,
                    height,
                    inarow,
                    size,
                    board_bits,
                    slots,
                    ply * columns,
                )
                continue
            if ply == 0:
                return result
            ply -= 1
        elif alphas[ply] < betas[ply] and next_index[ply] < counts[ply]:
            column = slots[ply * columns + next_index[ply]]
            next_index[ply] += 1
            last_columns[ply] = column
            move = playable[ply] & column_mask(column, height)
            child_current = currents[ply] ^ masks[ply]
            child_mask = masks[ply] | move
            settled, result, child_moves = _settle(
                child_current,
                child_mask,
                stones + ply + 1,
                depth - ply - 1,
                own_weights,
                other_weights,
                bottom,
                board_bits,
                height,
                inarow,
                size,
            )
            if not settled:
                node_current, node_mask, node_moves = child_current, child_mask, child_moves
                node_alpha, node_beta = -betas[ply], -alphas[ply]
                ply += 1
                entering = True
                continue
            stats[STAT_NODES] += 1
        else:
            # Every move seen, or a cut-off: store the node and hand its score to the parent.
            result = values[ply]
            if best_columns[ply] == -1:  # no move raised alpha
                flag = _UPPER
            elif result >= betas[ply]:
                flag = _LOWER
            else:
                flag = _EXACT
            key = currents[ply] + masks[ply] + 1
            slot = key % capacity
            table_keys[slot] = key
            table_data[slot, 0] = result
            table_data[slot, 1] = depth - ply
            table_data[slot, 2] = flag
            table_data[slot, 3] = best_columns[ply]
            if ply == 0:
                return result
            ply -= 1
        # ``result`` is the score of the child last played at ``ply``, from the child's side.
        score = -result
        if score > values[ply]:
            values[ply] = score
            if score > alphas[ply]:
                alphas[ply] = score
                best_columns[ply] = last_columns[ply]
