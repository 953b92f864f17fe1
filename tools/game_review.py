"""Where games were decided: each player's last value-losing move, found with the exact solver.

A game a player did not win was decided, for that player, by its **last value-losing move**: the
last move that turned a won position into a draw or a loss, or a drawn one into a loss (the
solver's game values, as in :mod:`connectx_baselines.perfect_play`). Every later move of its kept
the value that was left, so the result was fixed there unless the opponent erred again.

:func:`last_value_loss` walks one game backwards from its end and weakly solves the positions
where the player was to move (:meth:`~connectx_baselines.solver.Solver.move_values`; the last
positions are the cheapest) until it meets that move. :func:`review_games` does so for every game of
a :class:`~connectx_gym.match.MatchResult` that player A did not win and counts where the moves
fell, by the phases of :func:`connectx_baselines.game_positions.phase_bounds`::

    from tools.game_review import review_games
    from connectx_gym.match import play_match

    match = play_match("ppo", "alphabeta:time_budget=0.05")
    review = review_games(match, node_limit=20_000_000)
    review.counts            # {"opening": 12, "early": 9, ..., "unproven": 3, "none": 1}

Positions of few stones can cost seconds to weakly solve; one that is not proven within
``node_limit`` nodes stops the walk (the game counts as ``"unproven"``, with the ply reached).
A game with no value-losing move (``"none"``) was lost or drawn from the player's first position
after the opening.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from connectx_baselines.game_positions import phase_bounds
from connectx_baselines.solver import SearchLimitError, Solver, get_solver
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.match import MatchResult

__all__ = ["GameReview", "MatchReview", "last_value_loss", "phase_of", "review_games"]

#: Where a game's decisive move lay, besides the phases: before the first phase, no such move,
#: or a position the solver did not prove within its node limit.
FIRST_MOVES, NONE, UNPROVEN = "first moves", "none", "unproven"


@dataclass(frozen=True)
class GameReview:
    """The player's last value-losing move in one game.

    ``kind`` is ``"mistake"`` (``ply`` is the number of stones before that move, ``value_before``
    and ``value_after`` the player's game value, +1/0/-1, before and after it), ``"none"`` (no
    such move from ``start`` on) or ``"unproven"`` (the walk stopped at ``ply``: that position
    was not proven within the node limit, and no later move of the player lost value).
    """

    kind: str
    ply: int | None = None
    value_before: int | None = None
    value_after: int | None = None


def last_value_loss(
    geometry: Geometry,
    moves: Sequence[int],
    seat: int,
    *,
    start: int = 0,
    solver: Solver | None = None,
    node_limit: int | None = None,
) -> GameReview:
    """The last value-losing move of the player who moves at plies ``seat``, ``seat + 2``, ...
    (``seat`` 0: the first player) among ``moves[start:]``; ``node_limit`` caps each position's
    weak solve."""
    if seat not in (0, 1):
        raise ValueError(f"seat must be 0 (first player) or 1 (second player), got {seat!r}")
    if not 0 <= start <= len(moves):
        raise ValueError(f"start must be between 0 and the {len(moves)} moves, got {start}")
    solver = solver if solver is not None else get_solver(geometry)
    Board.from_moves(geometry, moves)  # ValueError on an illegal move or one after the end
    boards = [Board(geometry, 0, 0, 0)]
    for column in moves:
        boards.append(boards[-1].play(int(column)))
    for ply in reversed(range(start, len(moves))):
        if ply % 2 != seat:
            continue
        try:
            values = solver.move_values(boards[ply], node_limit=node_limit)
        except SearchLimitError:
            return GameReview(UNPROVEN, ply)
        best, chosen = int(np.nanmax(values)), int(values[int(moves[ply])])
        if chosen < best:
            return GameReview("mistake", ply, best, chosen)
    return GameReview(NONE)


def phase_of(geometry: Geometry, ply: int) -> str:
    """The phase name of :func:`~connectx_baselines.game_positions.phase_bounds` that holds ``ply``
    (``"first moves"`` before the first phase)."""
    for name, (first, last) in phase_bounds(geometry).items():
        if first <= ply <= last:
            return name
    return FIRST_MOVES


@dataclass
class MatchReview:
    """Player A's decisive moves in the games of a match it did not win.

    ``not_won`` counts the games reviewed: those A drew or lost, less any ended by an illegal
    answer. ``counts`` maps each phase name (and ``"first moves"``, ``"none"``, ``"unproven"``) to a
    number of games; ``plies`` lists the ply of each found mistake.
    """

    games: int
    not_won: int
    counts: dict[str, int] = field(default_factory=dict)
    plies: list[int] = field(default_factory=list)
    reviews: list[GameReview] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, object]:
        return {"games": self.games, "not_won": self.not_won, "counts": self.counts,
                "plies": self.plies}  # fmt: skip


def review_games(
    match: MatchResult,
    *,
    rows: int = 6,
    columns: int = 7,
    inarow: int = 4,
    node_limit: int | None = None,
    table_bits: int | None = None,
) -> MatchReview:
    """Review every game of ``match`` (played on that board) that player A did not win: where
    its last value-losing move fell (see the module docstring). Games ended by an illegal
    answer are skipped."""
    geometry = Geometry(rows, columns, inarow)
    solver = Solver(geometry, table_bits)
    bounds = phase_bounds(geometry)
    counts: Counter[str] = Counter({name: 0 for name in [FIRST_MOVES, *bounds, NONE, UNPROVEN]})
    reviews, plies = [], []
    for record in match.records:
        if record.winner == 1 or record.illegal is not None:
            continue
        seat = 0 if record.first == 0 else 1
        review = last_value_loss(
            geometry, record.moves, seat, start=record.opening_plies, solver=solver,
            node_limit=node_limit,
        )  # fmt: skip
        reviews.append(review)
        if review.kind == "mistake":
            assert review.ply is not None
            counts[phase_of(geometry, review.ply)] += 1
            plies.append(review.ply)
        else:
            counts[review.kind] += 1
    return MatchReview(match.games, len(reviews), dict(counts), plies, reviews)
