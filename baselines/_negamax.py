"""Kernel of the Kaggle ConnectX notes' negamax, on integer bitboards.

``value(position, d)`` is 0 when ``d == 0``, 1 when the side to move can win at once, else the
maximum over its moves of ``-value(child, d - 1)`` (0 when no move is left: a full board). The
values are -1, 0 and 1, so alpha-beta on the window ``(-2, 2)`` returns them exactly. The search
keeps its own stack, as numba cannot cache self-recursive functions.
"""

from __future__ import annotations

import numpy as np

from connectx_gym.bitboard import column_mask, possible_moves, winning_cells


def _negamax_leaf(
    current: int,
    mask: int,
    depth: int,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> tuple[bool, int]:
    """``(is_leaf, value)``: the value of a position decided without looking at its children."""
    if depth == 0:
        return True, 0
    moves = possible_moves(mask, bottom, board_bits)
    if moves == 0:
        return True, 0
    if winning_cells(current, moves, height, inarow, size) != 0:
        return True, 1
    if depth == 1:
        return True, 0
    return False, 0


def negamax_value(
    current: int,
    mask: int,
    depth: int,
    alpha: int,
    beta: int,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> int:
    """``value(position, depth)`` for the player to move (alpha-beta, fail-soft: exact when
    strictly inside ``(alpha, beta)``)."""
    leaf, value = _negamax_leaf(current, mask, depth, bottom, board_bits, height, inarow, size)
    if leaf:
        return value
    columns = order.shape[0]
    currents = [0] * (depth + 1)
    masks = [0] * (depth + 1)
    alphas = [0] * (depth + 1)
    betas = [0] * (depth + 1)
    values = [0] * (depth + 1)
    next_index = [0] * (depth + 1)
    currents[0], masks[0], alphas[0], betas[0], values[0] = current, mask, alpha, beta, -2
    ply = 0
    while True:
        move = 0
        if alphas[ply] < betas[ply]:
            moves = possible_moves(masks[ply], bottom, board_bits)
            while next_index[ply] < columns and move == 0:
                move = moves & column_mask(int(order[next_index[ply]]), height)
                next_index[ply] += 1
        if move == 0:
            result = values[ply]
            if ply == 0:
                return result
            ply -= 1
        else:
            child_current = currents[ply] ^ masks[ply]
            child_mask = masks[ply] | move
            leaf, result = _negamax_leaf(
                child_current, child_mask, depth - ply - 1, bottom, board_bits, height, inarow, size
            )
            if not leaf:
                ply += 1
                currents[ply], masks[ply] = child_current, child_mask
                alphas[ply], betas[ply] = -betas[ply - 1], -alphas[ply - 1]
                values[ply] = -2
                next_index[ply] = 0
                continue
        score = -result
        if score > values[ply]:
            values[ply] = score
            if score > alphas[ply]:
                alphas[ply] = score


def negamax_scores(
    current: int,
    mask: int,
    depth: int,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
    out: np.ndarray,
) -> None:
    """``out[c]``: 1 if column ``c`` wins at once, else ``-value(child, depth - 1)``; NaN when
    ``c`` is full."""
    moves = possible_moves(mask, bottom, board_bits)
    wins = winning_cells(current, moves, height, inarow, size)
    for index in range(order.shape[0]):
        column = int(order[index])
        move = moves & column_mask(column, height)
        if move == 0:
            out[column] = np.nan
        elif move & wins:
            out[column] = 1.0
        else:
            out[column] = -negamax_value(
                current ^ mask,
                mask | move,
                depth - 1,
                -2,
                2,
                order,
                bottom,
                board_bits,
                height,
                inarow,
                size,
            )
