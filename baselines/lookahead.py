"""The lookahead agents of Kaggle's "Intro to Game AI" tutorials, exact and fast.

* :class:`OneStepPolicy` (``"onestep"``) drops a disc in each column and scores the result with
  the window heuristic (own-``inarow`` 1e6, own-(``inarow`` - 1) 1, opponent-(``inarow`` - 1)
  -100).
* :class:`MinimaxPolicy` (``"minimax"``, ``depth=3``) is the N-step lookahead: ``depth`` plies
  (the agent's move, the opponent's reply, ...), the agent maximising and the opponent minimising;
  a node is a leaf at the depth limit or when the game is over, scored by the window heuristic
  with opponent-``inarow`` -1e4 added, from the agent's point of view.

Both play a column of maximal score with ties broken by the caller's generator, exactly as the
tutorials' code does, and accept custom :class:`~connectx_baselines.heuristic.WindowWeights`.
"""

from __future__ import annotations

import numpy as np

from connectx_baselines._checks import require_depth_fits
from connectx_baselines._geometry_cache import GeometryCache
from connectx_baselines._layout import (
    STAT_NODES,
    center_order,
    node_chunk,
    restart,
    run_in_chunks,
)
from connectx_baselines.heuristic import MINIMAX_WEIGHTS, ONESTEP_WEIGHTS, WindowWeights
from connectx_gym.bitboard import Board
from connectx_gym.policy import (
    Policy,
    choose_best,
    register_batch_actor,
    require_depth,
    require_playable,
)

__all__ = ["MinimaxPolicy", "OneStepPolicy", "center_order"]


class OneStepPolicy(Policy):
    """The tutorials' One-Step Lookahead agent (``"onestep"``).

    Args:
        weights: window weights; the tutorial's by default (:data:`ONESTEP_WEIGHTS`).
    """

    name = "onestep"

    def __init__(self, weights: WindowWeights | None = None) -> None:
        super().__init__()
        self.weights = weights or ONESTEP_WEIGHTS
        self._cache = GeometryCache("connectx_baselines._minimax", self.weights)

    def scores(self, board: Board) -> np.ndarray:
        """The heuristic after each column (NaN for full columns; all NaN once the game is over)."""
        g = board.geometry
        out = np.full(g.columns, np.nan)
        if board.is_terminal():
            return out
        kernels, _, d, own, other = self._cache.get(g)
        kernels.onestep_scores(board.current, board.mask, own, other, d, out)
        return out

    def act(self, board: Board, rng: np.random.Generator) -> int:
        require_playable(board)
        scores = self.scores(board)
        self.last_info = {"scores": scores}
        return choose_best(scores, rng)

    def __repr__(self) -> str:
        if self.weights is ONESTEP_WEIGHTS:
            return "OneStepPolicy()"
        return f"OneStepPolicy({self.weights!r})"


class MinimaxPolicy(Policy):
    """The tutorials' N-Step Lookahead (minimax) agent (``"minimax"``).

    Args:
        depth: plies searched, >= 1 (3: the agent's move, the reply, the agent's next move).
        weights: window weights of the leaves; the tutorial's by default (:data:`MINIMAX_WEIGHTS`).
    """

    name = "minimax"

    def __init__(self, depth: int = 3, weights: WindowWeights | None = None) -> None:
        super().__init__()
        self.depth = require_depth("depth", depth)
        self.weights = weights or MINIMAX_WEIGHTS
        self._cache = GeometryCache("connectx_baselines._resumable", self.weights)

    def _search(self, board: Board, exact: bool) -> np.ndarray:
        g = board.geometry
        require_depth_fits("depth", self.depth, g)
        out = np.full(g.columns, np.nan)
        if board.is_terminal():
            return out
        kernels, order, d, own, other = self._cache.get(g)
        frames, bounds, state = self._cache.stack(g, self.depth)
        restart(state)
        current, mask, depth = board.current, board.mask, self.depth

        def step() -> bool:
            return kernels.minimax_run(
                current, mask, depth, exact, own, other, order, d, out, frames, bounds, state
            )

        run_in_chunks(step, state, node_chunk(g))
        self.last_info = {"depth": depth, "nodes": int(state[STAT_NODES])}
        return out

    def scores(self, board: Board) -> np.ndarray:
        """Exact minimax score of every column (NaN for full columns)."""
        return self._search(board, exact=True)

    def best_columns(self, board: Board) -> tuple[list[int], float]:
        """The columns of maximal minimax score and that score (a search that prunes only the
        columns strictly worse than the best; what :meth:`act` chooses from)."""
        require_playable(board)
        scores = self._search(board, exact=False)
        best = float(np.nanmax(scores))
        return [int(c) for c in np.flatnonzero(scores == best)], best

    def act(self, board: Board, rng: np.random.Generator) -> int:
        require_playable(board)
        scores = self._search(board, exact=False)
        column = choose_best(scores, rng)
        self.last_info["score"] = float(scores[column])
        return column

    def __repr__(self) -> str:
        return f"MinimaxPolicy(depth={self.depth})"


# The batched env answers all boards of these opponents at once (connectx_gym.batch).
register_batch_actor(OneStepPolicy, "connectx_baselines.batch_actors:onestep_act_batch")
register_batch_actor(MinimaxPolicy, "connectx_baselines.batch_actors:minimax_act_batch")
