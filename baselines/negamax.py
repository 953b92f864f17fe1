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
from connectx_baselines._layout import (
    center_order,
    new_frames,
    new_state,
    node_chunk,
    restart,
    run_in_chunks,
)
from connectx_gym._dims import dims_arg
from connectx_gym._jit import Backend, backend
from connectx_gym.bitboard import Board, Geometry
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
        self._kernels: dict[Geometry, tuple[Backend, np.ndarray, np.ndarray | tuple]] = {}
        self._stacks: dict[Geometry, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def scores(self, board: Board) -> np.ndarray:
        """Per-column scores in {-1, 0, 1} (NaN for full columns; all NaN once the game is over)."""
        g = board.geometry
        require_depth_fits("depth", self.depth, g)
        out = np.full(g.columns, np.nan)
        if board.is_terminal():
            return out
        if g not in self._kernels:
            self._kernels[g] = (
                backend("connectx_baselines._resumable", g),
                center_order(g.columns),
                dims_arg(g),
            )
        kernels, order, d = self._kernels[g]
        if g not in self._stacks:  # reused: allocating them costs as much as a short search
            self._stacks[g] = (*new_frames(self.depth, g), new_state())
        frames, bounds, state = self._stacks[g]
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
register_batch_actor(NegamaxPolicy, "connectx_baselines.batched:negamax_act_batch")
