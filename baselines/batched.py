"""Batch actors of the search agents: one numba call scores every board facing the agent.

The batched env (:mod:`connectx_gym.vector`) asks ``onestep``, ``minimax`` and ``negamax``
opponents for all their boards at once through these functions (registered by class in
:mod:`connectx_gym.batch`). Scores are exactly the per-board kernels' (the loop calls them); the
column is one of maximal score with ties broken by the caller's generator.
"""

from __future__ import annotations

import numpy as np

from baselines._batched_kernels import MINIMAX, NEGAMAX, ONESTEP
from baselines._checks import require_depth_fits
from baselines._dual import backend
from baselines._layout import center_order, dims_arg, new_frames, new_state
from baselines.lookahead import MinimaxPolicy, OneStepPolicy
from baselines.negamax import NegamaxPolicy
from connectx_gym.batch import BoardBatch, choose_best_batch

__all__ = ["batch_scores", "minimax_act_batch", "negamax_act_batch", "onestep_act_batch"]

_NO_WEIGHTS = np.zeros(1)


def batch_scores(
    kind: int, batch: BoardBatch, depth: int, own: np.ndarray, other: np.ndarray
) -> np.ndarray:
    """``(n, columns)`` scores of agent ``kind`` (NaN: full columns) on every board of ``batch``."""
    g = batch.geometry
    out = np.full((len(batch), g.columns), np.nan)
    if kind != ONESTEP:
        require_depth_fits("depth", depth, g)
    frames, bounds = new_frames(depth, g)
    backend("baselines._batched_kernels", g).batch_scores(
        kind, batch.current, batch.mask, depth, own, other, center_order(g.columns), dims_arg(g),
        frames, bounds, new_state(), out,
    )  # fmt: skip
    return out


def onestep_act_batch(
    policy: OneStepPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`OneStepPolicy.act` on every board of ``batch``."""
    own, other = policy.weights.arrays(batch.geometry.inarow)
    return choose_best_batch(batch_scores(ONESTEP, batch, 1, own, other), rng)


def minimax_act_batch(
    policy: MinimaxPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`MinimaxPolicy.act` on every board of ``batch``."""
    own, other = policy.weights.arrays(batch.geometry.inarow)
    return choose_best_batch(batch_scores(MINIMAX, batch, policy.depth, own, other), rng)


def negamax_act_batch(
    policy: NegamaxPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    """:meth:`NegamaxPolicy.act` on every board of ``batch``."""
    scores = batch_scores(NEGAMAX, batch, policy.depth, _NO_WEIGHTS, _NO_WEIGHTS)
    return choose_best_batch(scores, rng)
