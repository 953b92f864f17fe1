"""tools.game_review: the last value-losing move of a game, against a brute-force reference."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_gym import Board, Geometry
from connectx_gym.match import play_match
from tools.game_review import last_value_loss, phase_of, review_games

SMALL = Geometry(4, 4, 3)


@cache
def value(geometry: Geometry, current: int, mask: int, moves: int) -> int:
    """Game value (+1/0/-1) for the player to move, by plain negamax over every move."""
    board = Board(geometry, current, mask, moves)
    if board.winner() is not None:
        return -1
    if board.is_full():
        return 0
    return max(-value(geometry, *board.play(c)[1:]) for c in board.legal_moves())


def child_value(board: Board, column: int) -> int:
    return -value(board.geometry, *board.play(column)[1:])


def reference_last_loss(geometry: Geometry, moves: list[int], seat: int, start: int):
    """The obvious forward scan: every move of the player, the last that lost value."""
    found = None
    board = Board.from_moves(geometry, [])
    for ply, column in enumerate(moves):
        if ply >= start and ply % 2 == seat:
            best = max(child_value(board, c) for c in board.legal_moves())
            chosen = child_value(board, column)
            if chosen < best:
                found = (ply, best, chosen)
        board = board.play(column)
    return found


def random_game(geometry: Geometry, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    board, moves = Board.from_moves(geometry, []), []
    while not board.is_terminal():
        column = int(rng.choice(board.legal_moves()))
        board, moves = board.play(column), [*moves, column]
    return moves


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), seat=st.sampled_from([0, 1]), start=st.integers(0, 6))
@pytest.mark.slow
def test_last_value_loss_matches_a_forward_scan(seed: int, seat: int, start: int) -> None:
    moves = random_game(SMALL, seed)
    start = min(start, len(moves))
    review = last_value_loss(SMALL, moves, seat, start=start)
    expected = reference_last_loss(SMALL, moves, seat, start)
    if expected is None:
        assert (review.kind, review.ply) == ("none", None)
    else:
        assert review.kind == "mistake"
        assert (review.ply, review.value_before, review.value_after) == expected


def test_a_missed_block_is_the_decisive_mistake() -> None:
    # 4x4, four in a row (a draw): the first player stacks column 0; the second answers in
    # column 3 at ply 5 instead of blocking on top of the three stones, and loses at ply 6.
    geometry = Geometry(4, 4, 4)
    moves = [0, 3, 0, 3, 0, 3, 0]
    review = last_value_loss(geometry, moves, seat=1)
    assert (review.kind, review.ply, review.value_before, review.value_after) == (
        "mistake",
        5,
        0,
        -1,
    )
    # The winner made no value-losing move: it kept the draw, then took the win.
    assert last_value_loss(geometry, moves, seat=0).kind == "none"


def test_an_unproven_position_stops_the_walk() -> None:
    geometry = Geometry(6, 7, 4)
    moves = [3, 3, 2, 4, 3, 2]
    review = last_value_loss(geometry, moves, seat=1, node_limit=1)
    assert (review.kind, review.ply) == ("unproven", 5)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="seat"):
        last_value_loss(SMALL, [0, 1], seat=2)
    with pytest.raises(ValueError, match="start"):
        last_value_loss(SMALL, [0, 1], seat=0, start=3)
    with pytest.raises(ValueError, match="illegal"):
        last_value_loss(SMALL, [0, 0, 0, 0, 0], seat=0)
    with pytest.raises(ValueError, match="after the game has ended"):
        last_value_loss(SMALL, [0, 1, 0, 1, 0, 1], seat=0)


def test_phases_follow_phase_bounds() -> None:
    geometry = Geometry(6, 7, 4)
    assert [phase_of(geometry, p) for p in (2, 5, 6, 11, 12, 19, 41)] == [
        "first moves", "first moves", "opening", "opening", "early", "middle", "late"
    ]  # fmt: skip


def test_review_games_counts_every_game_a_did_not_win() -> None:
    match = play_match("random", "minimax:depth=3", rows=4, columns=4, inarow=3, seed=1)
    review = review_games(match, rows=4, columns=4, inarow=3)
    not_won = [r for r in match.records if r.winner != 1 and r.illegal is None]
    assert review.not_won == len(not_won) > 0
    assert sum(review.counts.values()) == review.not_won
    assert len(review.plies) == sum(r.kind == "mistake" for r in review.reviews)
    for record, game in zip(not_won, review.reviews, strict=True):
        seat = 0 if record.first == 0 else 1
        expected = reference_last_loss(SMALL, record.moves, seat, record.opening_plies)
        assert (game.ply, game.value_before, game.value_after) == (
            expected if expected is not None else (None, None, None)
        )
    assert set(review.to_dict()) == {"games", "not_won", "counts", "plies"}
