"""Opening sets and the match protocol that plays each opening from both seats."""

from __future__ import annotations

from collections import Counter

import pytest

from connectx_gym.bitboard import Geometry
from connectx_gym.match import play_match
from connectx_gym.openings import OPENING_SETS, ply_openings, resolve_openings
from tests.support.scripted_policies import Column


def test_two_ply_openings_on_6x7_are_all_49_pairs() -> None:
    openings = resolve_openings("two-ply", Geometry(6, 7, 4))
    assert len(openings) == len(set(openings)) == 49
    assert openings[0] == (0, 0)
    assert openings[-1] == (6, 6)
    # Balanced: every column is the first move 7 times and the reply 7 times.
    assert Counter(first for first, _ in openings) == dict.fromkeys(range(7), 7)
    assert Counter(second for _, second in openings) == dict.fromkeys(range(7), 7)


@pytest.mark.parametrize(
    ("rows", "columns", "inarow"), [(6, 7, 4), (4, 4, 3), (5, 9, 4), (3, 3, 3)]
)
def test_named_sets_have_columns_to_the_plies(rows: int, columns: int, inarow: int) -> None:
    geometry = Geometry(rows, columns, inarow)
    for name, plies in OPENING_SETS.items():
        assert len(resolve_openings(name, geometry)) == columns**plies
    assert resolve_openings(None, geometry) == resolve_openings("two-ply", geometry)


def test_openings_skip_illegal_and_finished_lines() -> None:
    # One row: the second move cannot go on top of the first.
    assert ply_openings(Geometry(1, 3, 2), 2) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)]
    # A single cell: no opening leaves the game running, the default is the empty board.
    assert ply_openings(Geometry(1, 1, 2), 1) == []
    assert resolve_openings(None, Geometry(1, 1, 2)) == [()]
    # Lines of one: the first stone wins, so even one ply ends the game.
    assert resolve_openings(None, Geometry(3, 3, 1)) == [()]
    # One column of two rows: two plies fill the board; one ply is the longest set.
    assert resolve_openings(None, Geometry(2, 1, 2)) == [(0,)]


def test_custom_openings_are_checked() -> None:
    geometry = Geometry(6, 7, 4)
    assert resolve_openings([[3], (2, 4)], geometry) == [(3,), (2, 4)]
    with pytest.raises(ValueError, match="not playable"):
        resolve_openings([[7]], geometry)
    with pytest.raises(ValueError, match="ends the game"):
        resolve_openings([[0, 1, 0, 1, 0, 1, 0]], geometry)
    with pytest.raises(ValueError, match="empty"):
        resolve_openings([], geometry)
    with pytest.raises(ValueError, match="unknown opening set"):
        resolve_openings("four-ply", geometry)


def test_default_match_plays_every_opening_from_both_seats() -> None:
    result = play_match(Column(0), Column(6), seed=5)
    assert result.games == 98
    assert result.openings == "two-ply"
    pairs = [result.records[i : i + 2] for i in range(0, 98, 2)]
    assert {tuple(game.moves[:2]) for game, _ in pairs} == set(ply_openings(Geometry(), 2))
    for game, swapped in pairs:
        assert game.moves[:2] == swapped.moves[:2]
        assert (game.first, swapped.first) == (0, 1)
        assert game.opening_plies == swapped.opening_plies == 2
    # Column(0) against Column(6): whoever has mark 1 after the opening stacks four first.
    assert (result.wins, result.draws, result.losses) == (49, 0, 49)


def test_short_match_draws_openings_from_a_seeded_order() -> None:
    first = play_match("random", "random", games=20, seed=1)
    again = play_match("random", "random", games=20, seed=1)
    other = play_match("random", "random", games=20, seed=2)
    openings = [tuple(r.moves[:2]) for r in first.records]
    assert openings == [tuple(r.moves[:2]) for r in again.records]
    assert openings != [tuple(r.moves[:2]) for r in other.records]
    assert len(set(openings)) == 10  # ten openings, each from both seats
    assert openings[::2] == openings[1::2]
    # Not the first ten in lexicographic order: a short match sees more than column 0.
    assert {first_move for first_move, _ in openings} != {0}
