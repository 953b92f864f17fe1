"""Kernels that score many boards in one call, looping over the per-board search kernels.

:func:`board_scores` is the one adapter between the batch loop and the per-board kernels of
:mod:`baselines._minimax` and :mod:`baselines._negamax`: a change of their signatures touches it
alone. Compiled by numba through :func:`baselines._dual.backend` for boards of up to 64 bits.
"""

from __future__ import annotations

import numpy as np

from baselines._layout import STAT_BUDGET, STAT_NODES, STAT_PLY, STAT_ROOT
from baselines._minimax import minimax_run, onestep_scores
from baselines._negamax import negamax_run

ONESTEP, MINIMAX, NEGAMAX = 0, 1, 2
#: The node budget of one board's search in a batch: the searches run to the end in one call.
UNLIMITED = 1 << 62


def board_scores(
    kind: int,
    current: int,
    mask: int,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out``: the per-column scores of agent ``kind`` on one board (NaN: full column), as its
    policy computes them for ``act`` (minimax: only the best columns exact). ``frames``,
    ``bounds`` and ``state`` are the search's scratch arrays, reused from board to board."""
    if kind == ONESTEP:
        onestep_scores(current, mask, own_weights, other_weights, dims, out)
        return
    state[STAT_NODES] = 0
    state[STAT_BUDGET] = UNLIMITED
    state[STAT_PLY] = -1
    state[STAT_ROOT] = 0
    if kind == MINIMAX:
        minimax_run(
            current, mask, depth, False, own_weights, other_weights, order, dims, out, frames,
            bounds, state,
        )  # fmt: skip
    else:
        negamax_run(current, mask, depth, order, dims, out, frames, bounds, state)


def batch_scores(
    kind: int,
    current: np.ndarray,
    mask: np.ndarray,
    depth: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames: np.ndarray,
    bounds: np.ndarray,
    state: np.ndarray,
    out: np.ndarray,
) -> None:
    """``out[k]``: :func:`board_scores` of board ``k`` (``current[k]``, ``mask[k]``)."""
    for k in range(current.shape[0]):
        board_scores(
            kind, current[k], mask[k], depth, own_weights, other_weights, order, dims, frames,
            bounds, state, out[k],
        )  # fmt: skip
