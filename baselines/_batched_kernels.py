"""Kernels that score many boards in one call, looping over the per-board search kernels.

:func:`board_scores` is the one adapter between the batch loop and the per-board kernels of
:mod:`baselines._minimax` and :mod:`baselines._negamax`: a change of their signatures touches it
alone. Compiled by numba through :func:`baselines._dual.backend` for boards of up to 64 bits.
"""

from __future__ import annotations

import numpy as np

from baselines._minimax import minimax_root, onestep_scores
from baselines._negamax import negamax_scores

ONESTEP, MINIMAX, NEGAMAX = 0, 1, 2


def board_scores(
    kind: int,
    current: int,
    mask: int,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
    out: np.ndarray,
) -> None:
    """``out``: the per-column scores of agent ``kind`` on one board (NaN: full column), as its
    policy computes them for ``act`` (minimax: only the best columns exact)."""
    if kind == ONESTEP:
        onestep_scores(
            current, mask, own_weights, other_weights, bottom, board_bits, height, inarow, size,
            out.shape[0], out,
        )  # fmt: skip
    elif kind == MINIMAX:
        minimax_root(
            current, mask, depth, False, own_weights, other_weights, order, bottom, board_bits,
            height, inarow, size, out,
        )  # fmt: skip
    else:
        negamax_scores(current, mask, depth, order, bottom, board_bits, height, inarow, size, out)


def batch_scores(
    kind: int,
    current: np.ndarray,
    mask: np.ndarray,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
    out: np.ndarray,
) -> None:
    """``out[k]``: :func:`board_scores` of board ``k`` (``current[k]``, ``mask[k]``)."""
    for k in range(current.shape[0]):
        board_scores(
            kind, current[k], mask[k], depth, own_weights, other_weights, order, bottom,
            board_bits, height, inarow, size, out[k],
        )  # fmt: skip
