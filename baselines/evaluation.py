"""Judging policies against perfect play: Pons' benchmark files, move accuracy, game positions.

* :func:`load_pons` reads Pascal Pons' benchmark files (6x7 positions with their exact score);
* :func:`move_accuracy` is the share of a policy's moves that keep the best exact score, and the
  share that lose the game value (mistakes), with 95% confidence intervals
  (:class:`AccuracyResult`);
* :func:`positions_from_games` collects the positions a policy meets in games, to judge it on.

Typical use::

    from baselines.evaluation import load_pons, move_accuracy

    positions = load_pons("Test_L2_R1", limit=200)
    print(move_accuracy("minimax:depth=4", positions))
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from baselines.solver import SearchLimitError, get_solver
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.match import wilson_interval
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy

__all__ = [
    "AccuracyResult",
    "PonsPosition",
    "load_pons",
    "move_accuracy",
    "positions_from_games",
]


# -- Pons' benchmark positions ----------------------------------------------------------------
@dataclass(frozen=True)
class PonsPosition:
    """A line of Pascal Pons' benchmark files: moves (1-indexed columns), the board, its score."""

    moves: str
    board: Board
    score: int


def load_pons(path: str | Path, limit: int | None = None) -> list[PonsPosition]:
    """Positions of a Pons benchmark file (lines ``"<1-indexed columns> <score>"``, 6x7 board)."""
    geometry = Geometry(6, 7, 4)
    positions = []
    with open(path, encoding="ascii") as lines:
        for number, line in enumerate(lines, 1):
            if limit is not None and len(positions) >= limit:
                break
            if not line.strip():
                continue
            try:
                moves, score = line.split()
                board = Board.from_moves(geometry, [int(c) - 1 for c in moves])
                positions.append(PonsPosition(moves, board, int(score)))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a Pons position: {line!r}") from error
    return positions


# -- move accuracy ----------------------------------------------------------------------------
@dataclass(frozen=True)
class AccuracyResult:
    """How many of a policy's moves kept the best exact score, and how many lost the game value.

    ``positions`` were judged: ``correct`` of them kept the best score, ``mistakes`` turned a win
    into a draw or a loss or a draw into a loss (the measure of :mod:`baselines.perfect_play` and
    of AlphaZero.jl's Pons benchmark); ``unsolved`` were left out because the solver hit its limit.
    ``low`` and ``high`` bound the accuracy at 95% confidence (Wilson score interval),
    :attr:`mistake_ci` the mistake rate.
    """

    positions: int
    correct: int
    unsolved: int
    low: float
    high: float
    mistakes: int = 0

    @property
    def accuracy(self) -> float:
        """Share of judged moves that kept the best score (NaN when none was judged)."""
        return self.correct / self.positions if self.positions else math.nan

    @property
    def mistake_rate(self) -> float:
        """Share of judged moves that lost the game value (NaN when none was judged)."""
        return self.mistakes / self.positions if self.positions else math.nan

    @property
    def mistake_ci(self) -> tuple[float, float]:
        """95% Wilson interval of :attr:`mistake_rate`."""
        rate = self.mistakes / self.positions if self.positions else 0.0
        return wilson_interval(rate, self.positions)

    def __str__(self) -> str:
        low, high = self.mistake_ci
        return (
            f"{self.accuracy:.1%} of {self.positions} moves keep the best score "
            f"(95% CI {self.low:.1%}-{self.high:.1%}); {self.mistake_rate:.1%} lose the game "
            f"value (95% CI {low:.1%}-{high:.1%}); {self.unsolved} unsolved"
        )


def move_accuracy(
    policy: str | Policy,
    positions: Iterable[Board | PonsPosition],
    *,
    seed: int | None = 0,
    rng: np.random.Generator | None = None,
    node_limit: int | None = None,
    time_limit: float | None = None,
) -> AccuracyResult:
    """The share of ``policy``'s moves that keep the best exact score on ``positions``, and the
    count of those that lose the game value.

    ``positions`` are boards (terminal ones are skipped) or :class:`PonsPosition` (whose known
    score spares a solve). The policy is reset before each position and draws from ``rng``
    (default ``numpy.random.default_rng(seed)``). A position the solver cannot settle within
    ``node_limit`` / ``time_limit`` (per solver call: up to three per position) counts as
    unsolved and is left out.
    """
    policy = make_policy(policy)
    rng = np.random.default_rng(seed) if rng is None else rng
    judged = correct = mistakes = unsolved = 0
    limits = {"node_limit": node_limit, "time_limit": time_limit}
    for item in positions:
        board, known = (item.board, item.score) if isinstance(item, PonsPosition) else (item, None)
        if board.is_terminal():
            continue
        policy.reset()
        column = int(policy.act(board, rng))
        solver = get_solver(board.geometry)
        try:
            best = solver.solve(board, **limits) if known is None else known
            kept = solver.keeps_best(board, column, best, **limits)
            # a move that keeps the best score keeps the value: a second search only otherwise
            lost = not kept and not solver.keeps_value(board, column, best, **limits)
        except SearchLimitError:
            unsolved += 1
            continue
        judged += 1
        correct += kept
        mistakes += lost
    low, high = wilson_interval(correct / judged if judged else 0.0, judged)
    return AccuracyResult(judged, correct, unsolved, low, high, mistakes)


def positions_from_games(
    policy: str | Policy,
    games: int,
    *,
    geometry: Geometry | None = None,
    opponent: str | Policy = "random",
    seed: int | None = 0,
    openings: Sequence[Sequence[int]] = (),
) -> list[Board]:
    """The positions where ``policy`` was to move in ``games`` games against ``opponent``.

    Seats alternate (the policy moves first in even-numbered games). ``openings``, if given, are
    move sequences played before the policies take over, cycled over the games.
    """
    geometry = geometry or Geometry()
    policy, opponent = make_policy(policy), make_policy(opponent)
    rng = np.random.default_rng(seed)
    positions: list[Board] = []
    for game in range(games):
        board = Board.from_moves(geometry, openings[game % len(openings)] if openings else ())
        policy.reset()
        opponent.reset()
        ours = (board.moves + game) % 2
        while not board.is_terminal():
            if board.moves % 2 == ours:
                positions.append(board)
                board = board.play(int(policy.act(board, rng)))
            else:
                board = board.play(int(opponent.act(board, rng)))
    return positions
