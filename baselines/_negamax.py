"""Evaluation of the Kaggle ConnectX notes' negamax, on integer bitboards.

``value(position, d)`` is 0 when ``d == 0``, 1 when the side to move can win at once, else the
maximum over its moves of ``-value(child, d - 1)`` (0 when no move is left: a full board). The
values are -1, 0 and 1, so alpha-beta on the window ``(-2, 2)`` returns them exactly. The search
is :func:`connectx_baselines._resumable.negamax_run`: the resumable loop shared with minimax, with
:func:`evaluate`.
"""

from __future__ import annotations

import numpy as np

from connectx_gym._dims import Dims
from connectx_gym.bitboard import possible_moves, winning_cells


def evaluate(
    to_move: int,
    moved: int,
    mask: int,
    agent_to_move: bool,
    remaining: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    d: Dims,
) -> tuple[bool, float]:
    """The negamax evaluation (see :mod:`connectx_baselines._resumable`): ``(is_leaf, value)`` of a
    position decided without looking at its children (the weights and sides are not used)."""
    if remaining == 0:
        return True, 0.0
    moves = possible_moves(mask, d.bottom, d.board)
    if moves == 0:
        return True, 0.0
    if winning_cells(to_move, moves, d.height, d.inarow, d.size) != 0:
        return True, 1.0
    if remaining == 1:
        return True, 0.0
    return False, 0.0
