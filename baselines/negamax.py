"""The negamax agent of the Kaggle ConnectX notes (``"negamax"``), exact and fast.

For the side to move, ``value(position, d)`` is 0 when ``d == 0``, 1 when it has a move that wins
at once, else the maximum over its moves of ``-value(child, d - 1)`` (0 on a full board). Column
``c`` scores 1 if it wins at once, else ``-value(child_c, depth - 1)``; the agent plays a column
of maximal score, ties broken by the caller's generator. The scores are 1 (a forced win within
the horizon), -1 (a forced loss) or 0.
"""

from __future__ import annotations

import numpy as np

from baselines._checks import require_depth_fits
from baselines._dual import backend
from baselines._layout import (
    dims,
    new_frames,
    new_state,
    node_chunk,
    run_in_chunks,
)
from baselines.lookahead import center_order
from connectx_gym.bitboard import Board
from connectx_gym.policy import Policy, choose_best, require_depth, require_playable

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

    def scores(self, board: Board) -> np.ndarray:
        """Per-column scores in {-1, 0, 1} (NaN for full columns; all NaN once the game is over)."""
        g = board.geometry
        require_depth_fits("depth", self.depth, g)
        out = np.full(g.columns, np.nan)
        if board.is_terminal():
            return out
        kernels = backend("baselines._negamax", g)
        order, d = center_order(g.columns), dims(g)
        frames, bounds = new_frames(self.depth, g)
        state = new_state()
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
