"""Match statistics on scripted policies whose results are known in advance."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scripted_policies import Column, Illegal

from connectx_gym.match import play_match, wilson_interval


def wilson_reference(wins: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's interval written out from its textbook formula."""
    p = wins / n
    centre = p + z**2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2))
    return ((centre - margin) / (1 + z**2 / n), (centre + margin) / (1 + z**2 / n))


@pytest.mark.parametrize("games", [1, 2, 7, 10])
def test_first_mover_wins_race_and_seats_alternate(games: int) -> None:
    # Both stack their own column: whoever moves first completes four on its 4th move.
    result = play_match(Column(0), Column(6), games=games, seed=3, openings="none")
    a_first = (games + 1) // 2
    assert (result.wins, result.losses, result.draws) == (a_first, games - a_first, 0)
    assert [record.first for record in result.records] == [i % 2 for i in range(games)]
    for record in result.records:
        assert record.moves[0] == (0 if record.first == 0 else 6)
        assert len(record.moves) == 7
        assert record.winner == (1 if record.first == 0 else 2)
    assert result.moves_a + result.moves_b == 7 * games
    assert result.score == pytest.approx(a_first / games)


def test_illegal_answers_lose_and_are_counted() -> None:
    result = play_match("random", Illegal(), games=6, seed=0)
    assert (result.wins, result.draws, result.losses) == (6, 0, 0)
    assert (result.illegal_a, result.illegal_b) == (0, 6)
    assert all(record.illegal == 2 and record.illegal_answer == "99" for record in result.records)


def test_draws_count_half() -> None:
    # On a 1x1 board nobody can make two in a row: every game is a draw after one move.
    result = play_match("random", "random", games=5, seed=1, rows=1, columns=1, inarow=2)
    assert (result.wins, result.draws, result.losses) == (0, 5, 0)
    assert result.score == 0.5
    assert result.interval == pytest.approx(wilson_reference(2.5, 5))


def test_match_json_and_summary_agree() -> None:
    result = play_match(Column(0), Column(6), games=4, seed=0, openings="none")
    summary = result.to_dict()
    assert summary["wins"] + summary["draws"] + summary["losses"] == summary["games"] == 4
    assert summary["ci95"] == list(result.interval)
    assert "2W 0D 2L" in result.summary()


def test_same_seed_same_games() -> None:
    first = play_match("random", "random", games=6, seed=42)
    second = play_match("random", "random", games=6, seed=42)
    assert [r.moves for r in first.records] == [r.moves for r in second.records]
    third = play_match("random", "random", games=6, seed=43)
    assert [r.moves for r in first.records] != [r.moves for r in third.records]


def test_games_must_be_positive() -> None:
    with pytest.raises(ValueError, match="games"):
        play_match("random", "random", games=0)


def test_wilson_known_values() -> None:
    low, high = wilson_interval(0.5, 100)
    assert low == pytest.approx(0.4038, abs=1e-4)
    assert high == pytest.approx(0.5962, abs=1e-4)
    assert wilson_interval(1.0, 200)[1] == 1.0
    assert wilson_interval(0.0, 200)[0] == 0.0
    assert wilson_interval(0.3, 0) == (0.0, 1.0)


@given(st.integers(1, 500), st.data())
def test_wilson_matches_reference_and_contains_score(games: int, data: st.DataObject) -> None:
    half_points = data.draw(st.integers(0, 2 * games))
    score = half_points / (2 * games)
    low, high = wilson_interval(score, games)
    ref_low, ref_high = wilson_reference(score * games, games)
    assert low == pytest.approx(max(0.0, ref_low), abs=1e-12)
    assert high == pytest.approx(min(1.0, ref_high), abs=1e-12)
    eps = 1e-12  # rounding at the ends (score 0 or 1)
    assert 0.0 <= low <= score + eps
    assert score - eps <= high <= 1.0
    wider_low, wider_high = wilson_interval(score, games, z=2.58)
    assert wider_low <= low + eps
    assert high <= wider_high + eps
