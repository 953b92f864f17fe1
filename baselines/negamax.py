"""The negamax agent of the Kaggle ConnectX notes (``"negamax"``), exact and fast.

For the side to move, ``value(position, d)`` is 0 when ``d == 0``, 1 when it has a move that wins
at once, else the maximum over its moves of ``-value(child, d - 1)`` (0 on a full board). Column
``c`` scores 1 if it wins at once, else ``-value(child_c, depth - 1)``; the agent plays a column
of maximal score, ties broken by the caller's generator. The scores are 1 (a forced win within
the horizon), -1 (a forced loss) or 0.
"""

from __future__ import annotations

import numpy as np

from connectx_baselines._checks import require_depth_fits
from connectx_baselines._geometry_cache import GeometryCache
from connectx_baselines._layout import node_chunk, restart, run_in_chunks
from connectx_gym.bitboard import Board
from connectx_gym.policy import (
    Policy,
    choose_best,
    register_batch_actor,
    require_depth,
    require_playable,
)

__all__ = ["NegamaxPolicy"]


class NegamaxPolicy(Policy):
    """The ConnectX notes' depth-limited negamax (``"negamax"``).

    Args:
        depth: plies looked ahead, >= 1 (4 by default).
    """

    name = "negamax"

    def __init__(self, depth: int = 4) -> None:
        super().__init__()
        self.depth = require_depth("depth", depth)
        self._cache = GeometryCache("connectx_baselines._resumable")

    def scores(self, board: Board) -> np.ndarray:
        """Per-column scores in {-1, 0, 1} (NaN for full columns; all NaN once the game is over)."""
        g = board.geometry
        require_depth_fits("depth", self.depth, g)
        out = np.full(g.columns, np.nan)
        if board.is_terminal():
            return out
        kernels, order, d, _, _ = self._cache.get(g)
        frames, bounds, state = self._cache.stack(g, self.depth)
        restart(state)
        current, mask, depth = board.current, board.mask, self.depth

        def step() -> bool:
            return kernels.negamax_run(current, mask, depth, order, d, out, frames, bounds, state)

        run_in_chunks(step, state, node_chunk(g))
        return out

    def act(self, board: Board, rng: np.random.Generator) -> int:
        require_playable(board)
        scores = self.scores(board)
        self.last_info = {"scores": scores, "depth": self.depth}
        return choose_best(scores, rng)

    def __repr__(self) -> str:
        return f"NegamaxPolicy(depth={self.depth})"


# The batched env answers all boards of this opponent at once (connectx_gym.batch).
register_batch_actor(NegamaxPolicy, "connectx_baselines.batch_actors:negamax_act_batch")
