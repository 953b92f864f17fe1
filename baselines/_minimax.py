"""Kernels of the tutorials' lookahead agents: one-step scores and the minimax's evaluation.

Written once on integer bitboards; :func:`connectx_gym._jit.backend` compiles them with numba for
boards of up to 64 bits. The minimax is the tutorial's (the agent maximises, the opponent
minimises, leaves scored by the window heuristic from the agent's point of view) with alpha-beta
pruning: alpha-beta returns the exact value whenever it lies strictly inside the window, so a root
search that only prunes columns strictly worse than the best one finds exactly the plain minimax's
best columns and best score.

The search is :func:`connectx_baselines._resumable.minimax_run`: the resumable loop shared with
negamax (in negamax form: the values it passes around are the agent's score, negated at the
opponent's nodes) with :func:`evaluate`.
"""

from __future__ import annotations

import numpy as np

from connectx_baselines.heuristic import window_score
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
    """The minimax evaluation (see :mod:`connectx_baselines._resumable`): a leaf at the depth limit,
    when the player who just moved has a line (the other cannot have one: the game would have ended
    before) or when the board is full, scored by the window heuristic from the agent's point of
    view (negated when the opponent is to move); the heuristic is computed for leaves only."""
    if remaining == 0 or mask == d.board or has_line(moved, d.height, d.inarow, d.size):
        agent, opponent = (to_move, moved) if agent_to_move else (moved, to_move)
        score = window_score(
            agent, opponent, own_weights, other_weights, d.board, d.height, d.inarow, d.size
        )
        return True, score if agent_to_move else -score
    return False, 0.0
