"""A strong ConnectX agent (``"alphabeta"``): iterative-deepening alpha-beta under a time budget.

Each move searches depth 1, 2, 3, ... with a negamax alpha-beta
(:mod:`connectx_baselines._alphabeta`): a transposition table kept for the whole game, move ordering
that settles immediate wins, forced blocks and moves handing the opponent a win before searching,
and at the horizon the window heuristic weighing windows one, two and three discs short of a line.
The search reads the clock inside the tree and stops at the budget; the move comes from the deepest
depth completed.

At the root only the columns strictly worse than the best so far are pruned, so all columns of
the best score are known and the agent picks among them with the caller's generator.
"""

from __future__ import annotations

import time

import numpy as np

from connectx_baselines._checks import require_depth_fits, require_seconds, signal_safe
from connectx_baselines._layout import (
    STAT_INTERRUPTIBLE,
    STAT_NODES,
    STOPPED_LIMIT,
    STOPPED_PROVEN,
    STOPPED_TIME,
    center_order,
    new_frames,
    new_state,
)
from connectx_baselines.heuristic import WindowWeights
from connectx_gym._dims import dims_arg
from connectx_gym._jit import backend
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.deadline import time_left
from connectx_gym.policy import (
    Policy,
    choose_best,
    register_batch_actor,
    require_depth,
    require_playable,
)

__all__ = ["ALPHABETA_WEIGHTS", "AlphaBetaPolicy"]

#: Horizon evaluation: windows lacking one, two and three discs, for and against the mover.
ALPHABETA_WEIGHTS = WindowWeights.relative({1: 16, 2: 4, 3: 1}, {1: -16, 2: -4, 3: -1})

_TABLE_SIZE = (1 << 19) + 21  # not a power of two: keys are ``current + mask + 1``
_STOPPED_NAMES = {STOPPED_PROVEN: "proven", STOPPED_TIME: "time"}


def _interruptible_state() -> np.ndarray:
    """A fresh search state whose clock reads let Ctrl-C stop the search (a search of one board
    runs on its caller's thread, often the main one)."""
    stats = new_state()
    stats[STAT_INTERRUPTIBLE] = 1
    return stats


class _Tables:
    """Per-geometry kernels, weights and transposition table."""

    def __init__(self, geometry: Geometry, weights: WindowWeights, table_size: int) -> None:
        self.kernels = backend("connectx_baselines._alphabeta", geometry)
        self.own, self.other = weights.arrays(geometry.inarow)
        self.order = center_order(geometry.columns)
        # Python integers for boards beyond 64 bits, so their keys fit (on 64 bits
        # a key may wrap to a negative int64: it is stored and compared whole, so that is harmless).
        dtype = np.int64 if geometry.fits_64_bits else object
        self.table = np.zeros((table_size, self.kernels.TABLE_WIDTH), dtype=dtype)
        self.check_every = 256 if geometry.fits_64_bits else 8
        # The kernel's arguments after the stats, made once: a search is at most cells deep.
        self.arguments = (
            self.table,
            self.own,
            self.other,
            self.order,
            dims_arg(geometry),
            *new_frames(geometry.cells, geometry),
        )
        self.warm = False

    @property
    def keys(self) -> np.ndarray:
        """The table's keys (0: empty slot)."""
        return self.table[:, 0]

    def clear(self) -> None:
        self.table[:, 0] = 0


class AlphaBetaPolicy(Policy):
    """Iterative-deepening negamax alpha-beta with a transposition table (``"alphabeta"``).

    Args:
        time_budget: seconds per move (default 1.0, half of Kaggle's 2 s ``actTimeout``). The
            search checks the clock inside the tree and stops in time; the one-off numba
            compilation (or cache load) for a new board size happens before the clock starts.
        max_depth: stop deepening at this many plies (``None``: until the game's end or the
            budget); at most the board's cells. Play under a time budget alone is not
            reproducible move for move (the depth reached depends on the machine's speed and
            load); with a ``max_depth`` reached well within the budget, play is deterministic
            given the generator.
        weights: the horizon evaluation (:data:`ALPHABETA_WEIGHTS` by default).
    """

    name = "alphabeta"

    def __init__(
        self,
        time_budget: float = 1.0,
        max_depth: int | None = None,
        weights: WindowWeights | None = None,
    ) -> None:
        super().__init__()
        self.time_budget = require_seconds("time_budget", time_budget, optional=False)
        self.max_depth = None if max_depth is None else require_depth("max_depth", max_depth)
        self.weights = weights or ALPHABETA_WEIGHTS
        self._tables: dict[Geometry, _Tables] = {}
        # Load the compiled kernels for the usual 6x7 board now, not inside a timed first move
        # (other sizes load on their first move, before its clock starts).
        self._get_tables(Geometry())

    def reset(self) -> None:
        """Forget the transposition table (a new game)."""
        for tables in self._tables.values():
            tables.clear()

    def _get_tables(self, geometry: Geometry) -> _Tables:
        tables = self._tables.get(geometry)
        if tables is None:
            tables = _Tables(geometry, self.weights, _TABLE_SIZE)
            self._tables[geometry] = tables
        if not tables.warm:
            # Compile (or load) the kernels before any clock starts. The first few clock reads
            # from compiled code are slow (tens of ms, numba's object mode warming up), so
            # they happen here too: a depth-2 search reads the clock at its first node.
            empty = Board(geometry, 0, 0, 0)
            for _ in range(4):
                start = time.perf_counter()
                deadline = tables.kernels.move_deadline(start, 3600.0)  # compiled here too
                self._deepen(empty, tables, 2, start, deadline, _interruptible_state())
            tables.clear()
            tables.warm = True
        return tables

    def _deepen(
        self,
        board: Board,
        tables: _Tables,
        limit: int,
        start: float,
        deadline: float,
        stats: np.ndarray,
    ) -> tuple[np.ndarray, int, int]:
        """The root scores of the deepest search completed, that depth and why it stopped
        (:func:`connectx_baselines._alphabeta.deepen`)."""
        scores = np.full(board.geometry.columns, np.nan)
        reached, stopped = tables.kernels.deepen(
            board.current, board.mask, board.moves, limit, start, deadline, tables.check_every,
            stats, scores, *tables.arguments,
        )  # fmt: skip
        return scores, int(reached), int(stopped)

    def scores(self, board: Board) -> np.ndarray:
        """Scores of the deepest search completed in the budget (NaN for full columns).

        Ctrl-C stops the search at its next read of the clock (a ``KeyboardInterrupt``).

        Columns of the best score carry their exact score at the depth reached; the others a
        score below it (an upper bound of theirs at that depth). A win made with ``s`` stones on
        the board scores ``1e6 - s``, a loss the negation. ``last_info`` tells the depth reached
        and why the search stopped (``"time"``, ``"proven"``, ``"end of game"``,
        ``"max_depth"``).
        """
        return signal_safe(lambda: self._scores(board))

    def _scores(self, board: Board) -> np.ndarray:
        g = board.geometry
        if self.max_depth is not None:
            require_depth_fits("max_depth", self.max_depth, g)
        if board.is_terminal():
            return np.full(g.columns, np.nan)
        tables = self._get_tables(g)
        start = time.perf_counter()
        deadline = tables.kernels.move_deadline(start, self.time_budget)
        # The caller's deadline (connectx serve's requests), if any, stops it too: it answers with
        # the deepest search completed by then.
        outer = time_left()
        if outer is not None:
            deadline = min(deadline, start + outer)
        stats = _interruptible_state()
        to_end = g.cells - board.moves
        limit = to_end if self.max_depth is None else min(to_end, self.max_depth)
        scores, reached, stopped = self._deepen(board, tables, limit, start, deadline, stats)
        if stopped == STOPPED_LIMIT:
            why = "end of game" if limit == to_end else "max_depth"
        else:
            why = _STOPPED_NAMES[stopped]
        self.last_info = {
            "depth": reached,
            "stopped": why,
            "nodes": int(stats[STAT_NODES]),
            "seconds": time.perf_counter() - start,
        }
        return scores

    def act(self, board: Board, rng: np.random.Generator) -> int:
        require_playable(board)
        scores = self.scores(board)
        column = choose_best(scores, rng)
        self.last_info["score"] = float(scores[column])
        return column

    def __repr__(self) -> str:
        depth = "" if self.max_depth is None else f", max_depth={self.max_depth}"
        return f"AlphaBetaPolicy(time_budget={self.time_budget}{depth})"


register_batch_actor(AlphaBetaPolicy, "connectx_baselines.batch_actors:alphabeta_act_batch")
