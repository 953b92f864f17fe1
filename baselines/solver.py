"""An exact ConnectX solver and a perfect-play policy (judging policies:
connectx_baselines.perfect_play).

Scores follow Pascal Pons' Connect Four benchmark: 0 for a draw; when the side to move wins, a
positive score that is larger the sooner it wins, negative when it loses. With ``cells`` cells on
the board and ``moves`` stones already played, a win with the mover's very next stone scores
``(cells + 1 - moves) // 2``, and each two plies later one less; on 6x7 that is 22 minus the
number of the winner's stones at the win. A loss scores the negative of the winner's score.

The search is Pons' (bitboards, negamax with alpha-beta on null windows narrowed by binary search, a
transposition table, centre-first and threat-count move ordering, only moves that do not lose at
once, immediate wins seen first), in :mod:`connectx_baselines._solver_kernels`: numba-compiled when
the board fits in 64 bits, plain Python on larger boards. Typical use::

    from connectx_gym import Board, Geometry
    from connectx_baselines.solver import move_scores, solve

    moves = [4, 4, 4, 3, 1, 1, 3, 2, 2, 2, 1, 2, 3, 4, 0, 0, 6, 5, 3, 3, 0, 4, 0, 0, 4]
    board = Board.from_moves(Geometry(6, 7, 4), moves)
    solve(board)              # 4: the side to move wins, with its 18th stone (22 - 4)
    move_scores(board)        # [-8, -8, -8, -8, nan, 4, -8]: column 5 wins, column 4 is full
    solve(Board.empty(), time_limit=1.0)  # raises SearchLimitError: too hard for a second
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict

import numpy as np

from connectx_baselines._checks import (
    require_node_limit,
    require_seconds,
    require_table_bits,
    reserve_table,
)
from connectx_baselines._layout import (
    STAT_ABORTED,
    STAT_BUDGET,
    STAT_NODES,
    center_order,
    new_frames,
    new_state,
)
from connectx_gym._dims import dims_arg
from connectx_gym._jit import backend
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.deadline import check_deadline, time_left
from connectx_gym.policy import Policy, require_depth
from connectx_gym.registry import make_policy

__all__ = [
    "SearchLimitError",
    "Solver",
    "SolverPolicy",
    "best_moves",
    "get_solver",
    "move_scores",
    "solve",
]

_KERNELS = "connectx_baselines._solver_kernels"
#: Nodes per second assumed before a solver has timed itself (kept low: a too-high guess overruns).
_INITIAL_RATE = {True: 300_000.0, False: 5_000.0}
#: Nodes per kernel call at most (a fraction of a second): Python handles Ctrl-C between calls.
#: A call cut short starts again from the root and finds the subtrees it proved in the table.
#: A count of nodes, not of seconds, so that searches under a node limit are reproducible.
_CHUNK_NODES = {True: 1 << 21, False: 1 << 13}


class SearchLimitError(TimeoutError):
    """The solver hit its node or time limit before proving the score."""


def next_prime(n: int) -> int:
    """The first prime at least ``n`` (and 2): the entries of a transposition table."""
    candidate = max(n, 2)
    while any(candidate % d == 0 for d in range(2, math.isqrt(candidate) + 1)):
        candidate += 1
    return candidate


class _Limits:
    """Node and wall-clock budgets shared by the kernel calls of one request."""

    def __init__(self, node_limit: int | None, time_limit: float | None, chunk: int) -> None:
        self.nodes_left = node_limit
        self.chunk = chunk
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit

    def next_budget(self, rate: float) -> int:
        outer = time_left()  # the caller's deadline (connectx serve's requests), if any
        if outer is not None:
            check_deadline()
        elif self.nodes_left is None and self.deadline is None:
            return self.chunk  # no limit: the fast path of most requests
        budget = self.chunk
        if outer is not None:
            budget = min(budget, int(outer * rate))
        if self.nodes_left is not None:
            budget = min(budget, self.nodes_left)
        if self.deadline is not None:
            remaining = self.deadline - time.perf_counter()
            budget = min(budget, int(max(remaining, 0.0) * rate))
        if budget <= 0:
            raise SearchLimitError("the solver's limit was reached")
        floor = max(int(rate * 1e-3), 1)  # about a millisecond of search at least
        if self.nodes_left is not None:
            floor = min(floor, self.nodes_left)
        return max(budget, floor)

    def spend(self, nodes: int) -> None:
        if self.nodes_left is not None:
            self.nodes_left -= nodes

    def exhausted(self) -> bool:
        if self.nodes_left is not None and self.nodes_left <= 0:
            return True
        return self.deadline is not None and time.perf_counter() >= self.deadline


class Solver:
    """Exact solver for one board geometry, keeping its transposition table between calls.

    ``table_bits`` sets the table to the first prime above ``2 ** table_bits`` entries (16 bytes
    each); by default it grows with the board, up to about 8 million entries (2 ** 20 on boards
    that take the plain-Python backend). The table holds exact bounds, so it stays valid across
    positions and games. Not thread-safe. The tables of all solvers alive in the process count
    against one budget, a share of the machine's RAM (:data:`connectx_baselines._checks.
    TABLE_RAM_SHARE`): a ``table_bits`` that does not fit beside them is a ``ValueError``.
    """

    def __init__(self, geometry: Geometry, table_bits: int | None = None) -> None:
        g = geometry
        self.geometry = g
        self.nodes = 0
        self._kernels = backend(_KERNELS, g)
        self._lines_possible = g.inarow <= max(g.rows, g.columns)
        # every table counts in the process's budget; a size the caller chose must fit in it
        checked = table_bits is not None
        if table_bits is None:
            table_bits = min(max(g.cells + 2, 12), 23 if g.fits_64_bits else 20)
        reserve_table(self, table_bits, checked=checked)
        entries = next_prime((1 << table_bits) + 1)
        # Zeroed lazily by the OS: the first searches pay for the pages they touch (see reset).
        # np.full writes every page now; np.zeros would leave the page faults to the first solves.
        self._table = np.full((entries, 2), 0, dtype=np.int64 if g.fits_64_bits else object)
        self._stats = new_state()
        # The arguments of every kernel call after the position and window, made once.
        self._arguments = (
            dims_arg(g),
            self._table,
            center_order(g.columns),
            *new_frames(g.cells, g),
            self._stats,
        )
        self._rate = _INITIAL_RATE[g.fits_64_bits]
        self._chunk = _CHUNK_NODES[g.fits_64_bits]
        self._timed_nodes = 0
        self._timed_seconds = 0.0
        # Compile (or load the compiled kernels) now, not inside the first timed request: a
        # search with a node limit of 0 stops at once.
        self._kernels.solve_position(0, 0, 0, -1, 1, *self._arguments)

    def reset(self) -> None:
        """Empty the transposition table (writing all of it, so later searches find its memory
        mapped: benchmarks call this before timing)."""
        self._table[:] = 0

    # -- requests -----------------------------------------------------------------------------
    def solve(
        self, board: Board, *, node_limit: int | None = None, time_limit: float | None = None
    ) -> int:
        """The exact score of ``board`` for the player to move (0 on a full board).

        Raises :class:`SearchLimitError` when the score is not proven within ``node_limit``
        nodes or ``time_limit`` seconds, and ``ValueError`` when a player already has a line.
        """
        self._check(board)
        return self._search(
            board.current, board.mask, board.moves, -board.geometry.cells, board.geometry.cells,
            self._limits(node_limit, time_limit),
        )  # fmt: skip

    def move_scores(
        self, board: Board, *, node_limit: int | None = None, time_limit: float | None = None
    ) -> np.ndarray:
        """Exact score of each column for the player to move (float, NaN for illegal columns).

        The score of a column is the score of the position for the mover after playing it. Limits
        apply to the whole request, as in :meth:`solve`.
        """
        self._check(board)
        limits = self._limits(node_limit, time_limit)
        return self._column_scores(board, board.geometry.cells, limits)

    def move_values(self, board: Board, *, node_limit: int | None = None) -> np.ndarray:
        """The game value of each column for the player to move: +1 win, 0 draw, -1 loss (float,
        NaN for full columns).

        A *weak* solve: each child is searched with the null window around a draw, which is much
        cheaper than :meth:`move_scores` and enough to tell value-losing moves. ``node_limit``
        applies to the whole request (:class:`SearchLimitError` when exceeded).
        """
        self._check(board)
        return np.sign(self._column_scores(board, 1, self._limits(node_limit, None)))

    def game_value(self, board: Board, *, node_limit: int | None = None) -> int:
        """The game value of ``board`` for the player to move (+1 win, 0 draw, -1 loss): a weak
        solve, much cheaper than :meth:`solve`; ``SearchLimitError`` past ``node_limit``."""
        self._check(board)
        value = self._search(
            board.current, board.mask, board.moves, -1, 1, self._limits(node_limit, None)
        )
        return int(np.sign(value))

    def best_moves(
        self, board: Board, *, node_limit: int | None = None, time_limit: float | None = None
    ) -> tuple[int, list[int]]:
        """The exact score of ``board`` and every column that keeps it, in increasing order.

        Cheaper than :meth:`move_scores`: after solving the position, each column is only
        tested against the best score with one null window.
        """
        limits = self._limits(node_limit, time_limit)
        self._check(board)
        if board.is_full():
            raise ValueError("the board is full: there is no move to play")
        g = board.geometry
        best = self._search(board.current, board.mask, board.moves, -g.cells, g.cells, limits)
        return best, [c for c in board.legal_moves() if self._keeps(board, c, best, limits)]

    def keeps_best(
        self,
        board: Board,
        column: int,
        best: int | None = None,
        *,
        node_limit: int | None = None,
        time_limit: float | None = None,
    ) -> bool:
        """True when playing ``column`` keeps the best exact score ``best`` of ``board``
        (solved first when not given)."""
        limits = self._limits(node_limit, time_limit)
        best = self._best_before(board, column, best, limits)
        return self._keeps(board, column, best, limits)

    def keeps_value(
        self,
        board: Board,
        column: int,
        best: int | None = None,
        *,
        node_limit: int | None = None,
        time_limit: float | None = None,
    ) -> bool:
        """True when playing ``column`` keeps the game value (win, draw or loss) of ``board``,
        whose best exact score is ``best`` (solved first when not given): the move is not a
        *mistake*. One weak search of the child (the null window around a draw)."""
        limits = self._limits(node_limit, time_limit)
        best = self._best_before(board, column, best, limits)
        if board.is_winning_move(column):
            return True
        child = board.play(column)
        value = -self._search(child.current, child.mask, child.moves, -1, 1, limits)
        return bool(np.sign(value) == np.sign(best))

    # -- internals ----------------------------------------------------------------------------
    def _best_before(self, board: Board, column: int, best: int | None, limits: _Limits) -> int:
        """``best``, or the exact score of ``board`` solved when not given, once ``column`` is
        checked to be a legal move."""
        self._check(board)
        if not board.can_play(column) or board.is_full():
            raise ValueError(f"column {column} is not a legal move on this board")
        if best is None:
            g = board.geometry
            best = self._search(board.current, board.mask, board.moves, -g.cells, g.cells, limits)
        return best

    def _limits(self, node_limit: int | None, time_limit: float | None) -> _Limits:
        if node_limit is not None:
            node_limit = require_node_limit("node_limit", node_limit)
        if time_limit is not None:
            time_limit = require_seconds("time_limit", time_limit)
        return _Limits(node_limit, time_limit, self._chunk)

    def _check(self, board: Board) -> None:
        if board.geometry != self.geometry:
            raise ValueError(f"this solver is for {self.geometry}, not {board.geometry}")

    def _column_scores(self, board: Board, bound: int, limits: _Limits) -> np.ndarray:
        """Each column's score for the mover, searched in the window ``[-bound, bound]`` (exact
        inside it, only its sign beyond it); NaN for full columns."""
        g = board.geometry
        scores = np.full(g.columns, np.nan)
        if board.is_full():
            return scores
        win_now = (g.cells + 1 - board.moves) // 2
        for column in board.legal_moves():
            if board.is_winning_move(column):
                scores[column] = win_now
                continue
            child = board.play(column)
            scores[column] = -self._search(
                child.current, child.mask, child.moves, -bound, bound, limits
            )
        return scores

    def _keeps(self, board: Board, column: int, best: int, limits: _Limits) -> bool:
        if board.is_winning_move(column):
            return best == (board.geometry.cells + 1 - board.moves) // 2
        child = board.play(column)
        value = self._search(child.current, child.mask, child.moves, -best, 1 - best, limits)
        return value <= -best

    def _search(
        self, current: int, mask: int, moves: int, lower: int, upper: int, limits: _Limits
    ) -> int:
        if not self._lines_possible:
            return 0
        stats = self._stats
        solve_position, arguments = self._kernels.solve_position, self._arguments
        while True:
            stats[STAT_NODES] = 0
            stats[STAT_BUDGET] = limits.next_budget(self._rate)
            stats[STAT_ABORTED] = 0
            start = time.perf_counter()
            result = solve_position(current, mask, moves, lower, upper, *arguments)
            elapsed = time.perf_counter() - start
            nodes = int(stats[STAT_NODES])
            self.nodes += nodes
            limits.spend(nodes)
            self._update_rate(nodes, elapsed)
            if not stats[STAT_ABORTED]:
                break
            if limits.exhausted():
                raise SearchLimitError(f"no proof within the solver's limits ({nodes} nodes)")
        if result == self._kernels.GAME_OVER:
            raise ValueError("a player already has a line: the game is over")
        return int(result)

    def _update_rate(self, nodes: int, elapsed: float) -> None:
        if elapsed < 1e-3:
            return
        self._timed_nodes += nodes
        self._timed_seconds += elapsed
        self._rate = max(self._timed_nodes / self._timed_seconds, 1.0)


#: Shared solvers kept at once (each holds a table of up to 134 MB): the most recently used.
SHARED_SOLVERS = 4
_solvers: OrderedDict[Geometry, Solver] = OrderedDict()


def get_solver(geometry: Geometry) -> Solver:
    """The shared :class:`Solver` of ``geometry`` (made on first use; keeps its table while it
    is among the :data:`SHARED_SOLVERS` geometries used last)."""
    solver = _solvers.get(geometry)
    if solver is None:
        solver = _solvers[geometry] = Solver(geometry)
        while len(_solvers) > SHARED_SOLVERS:
            _solvers.popitem(last=False)
    _solvers.move_to_end(geometry)
    return solver


def solve(board: Board, *, node_limit: int | None = None, time_limit: float | None = None) -> int:
    """The exact Pons score of ``board`` for the player to move; see :meth:`Solver.solve`."""
    return get_solver(board.geometry).solve(board, node_limit=node_limit, time_limit=time_limit)


def move_scores(
    board: Board, *, node_limit: int | None = None, time_limit: float | None = None
) -> np.ndarray:
    """Exact score of each column (NaN where illegal); see :meth:`Solver.move_scores`."""
    solver = get_solver(board.geometry)
    return solver.move_scores(board, node_limit=node_limit, time_limit=time_limit)


def best_moves(
    board: Board, *, node_limit: int | None = None, time_limit: float | None = None
) -> tuple[int, list[int]]:
    """The exact score and the columns that keep it; see :meth:`Solver.best_moves`."""
    solver = get_solver(board.geometry)
    return solver.best_moves(board, node_limit=node_limit, time_limit=time_limit)


class SolverPolicy(Policy):
    """Perfect play whenever the position is solved in time, else the ``alphabeta`` move.

    Each move first tries to prove the best columns within ``solve_share`` of ``time_budget``
    seconds, and plays one of them (ties broken by the rng); otherwise it plays what ``fallback``
    (a policy spec taking ``time_budget``, and ``max_depth`` when ``fallback_depth`` is given)
    chooses with the rest of the budget. ``node_limit`` also bounds each proof attempt.
    ``table_bits`` gives the policy its own transposition table of about ``2 ** table_bits``
    entries (16 bytes each); by default it shares the module's solver of the board size (about
    8 million entries, 134 MB, on 6x7).
    ``last_info`` tells which: ``{"proven": True, "score": s, "best_moves": [...]}`` or
    ``{"proven": False, "fallback": {...}}``.
    The solver's kernels are compiled (or loaded) and its table allocated before the clock
    starts, and it stops within a few milliseconds of its share of the budget.

    Under a time budget, play is not reproducible move for move: what gets proven in time
    depends on the machine and its load. A ``node_limit`` reached well within a generous budget
    (with ``fallback_depth`` for the moves it cannot prove) bounds the work instead, for play
    that repeats given the generator and the same table contents.
    """

    name = "solver"

    def __init__(
        self,
        time_budget: float = 1.0,
        solve_share: float = 0.5,
        node_limit: int | None = None,
        fallback: str = "alphabeta",
        fallback_depth: int | None = None,
        table_bits: int | None = None,
    ) -> None:
        super().__init__()
        self.time_budget = require_seconds("time_budget", time_budget, optional=False)
        if (
            isinstance(solve_share, bool)
            or not isinstance(solve_share, (int, float))
            or not 0 < solve_share <= 1
        ):
            raise ValueError(f"solve_share must be a number in (0, 1], got {solve_share!r}")
        self.solve_share = float(solve_share)
        self.node_limit = require_node_limit("node_limit", node_limit)
        if fallback_depth is not None:
            fallback_depth = require_depth("fallback_depth", fallback_depth)
        if table_bits is not None:
            require_table_bits(table_bits)
        self.fallback_spec = fallback
        self.fallback_depth = fallback_depth
        self.table_bits = table_bits
        self._fallback: Policy | None = None
        self._solvers: dict[Geometry, Solver] = {}
        # Compile the kernels and allocate the table of the usual 6x7 board now, and make the
        # fallback, so that a first move on 6x7 spends its budget searching.
        self.solver(Geometry())
        _ = self.fallback

    @property
    def fallback(self) -> Policy:
        """The policy that moves when the solver cannot prove a move in time (made lazily)."""
        if self._fallback is None:
            budget = max(self.time_budget * (1.0 - self.solve_share), 0.05 * self.time_budget)
            options: dict[str, object] = {"time_budget": budget}
            if self.fallback_depth is not None:
                options["max_depth"] = self.fallback_depth
            self._fallback = make_policy(self.fallback_spec, **options)
        return self._fallback

    def solver(self, geometry: Geometry) -> Solver:
        """The solver this policy uses on ``geometry`` (its own when ``table_bits`` is set)."""
        if self.table_bits is None:
            return get_solver(geometry)
        if geometry not in self._solvers:
            self._solvers[geometry] = Solver(geometry, self.table_bits)
        return self._solvers[geometry]

    def act(self, board: Board, rng: np.random.Generator) -> int:
        solver = self.solver(board.geometry)
        try:
            best, columns = solver.best_moves(
                board, node_limit=self.node_limit, time_limit=self.time_budget * self.solve_share
            )
        except SearchLimitError:
            column = int(self.fallback.act(board, rng))
            self.last_info = {"proven": False, "fallback": dict(self.fallback.last_info)}
            return column
        self.last_info = {"proven": True, "score": best, "best_moves": list(columns)}
        return columns[0] if len(columns) == 1 else columns[int(rng.integers(len(columns)))]

    def scores(self, board: Board) -> np.ndarray:
        """Exact move scores when solved within the budget, else the fallback's scores."""
        solver = self.solver(board.geometry)
        try:
            scores = solver.move_scores(
                board, node_limit=self.node_limit, time_limit=self.time_budget * self.solve_share
            )
        except SearchLimitError:
            self.last_info = {"proven": False}
            return self.fallback.scores(board)
        self.last_info = {"proven": True}
        return scores

    def reset(self) -> None:
        if self._fallback is not None:
            self._fallback.reset()

    def __repr__(self) -> str:
        return (
            f"SolverPolicy(time_budget={self.time_budget}, solve_share={self.solve_share}, "
            f"table_bits={self.table_bits})"
        )
