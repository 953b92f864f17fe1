"""Match statistics on scripted policies whose results are known in advance."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectx_gym.match import play_match, read_games, wilson_interval
from connectx_gym.tournament import run_tournament
from tests.support.scripted_policies import Column, Illegal


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


def test_hand_checked_custom_opening() -> None:
    # After 1, 2 it is mark 1's turn: Column(0) and Column(6) stack; mark 1 gets four first.
    result = play_match(Column(0), Column(6), games=2, seed=0, openings=[[1, 2]])
    assert [r.moves for r in result.records] == [
        [1, 2, 0, 6, 0, 6, 0, 6, 0],
        [1, 2, 6, 0, 6, 0, 6, 0, 6],
    ]
    assert [r.winner for r in result.records] == [1, 2]
    assert result.openings == "custom"


def test_saved_games_replay_to_the_recorded_winner(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    result = play_match(
        "minimax:depth=1~0.3", "random", games=12, seed=7, rows=5, columns=6, save_games=path
    )
    games = read_games(path)  # replays every game and checks its winner
    assert len(games) == 12
    for index, (game, record) in enumerate(zip(games, result.records, strict=True)):
        assert (game["rows"], game["columns"], game["inarow"]) == (5, 6, 4)
        assert game["game"] == index
        assert game["seed"] == 7
        assert game["opening_plies"] == 2
        assert game["moves"] == record.moves
        assert game["players"] == (
            ["minimax:depth=1~0.3", "random"]
            if index % 2 == 0
            else ["random", "minimax:depth=1~0.3"]
        )
        # The file speaks of marks, the record of players (1 is A).
        a_mark = 1 if index % 2 == 0 else 2
        expected = 0 if record.winner == 0 else (a_mark if record.winner == 1 else 3 - a_mark)
        assert game["winner"] == expected
        assert game["illegal"] is None


def test_saved_games_record_illegal_answers(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    play_match("random", Illegal(), games=2, seed=0, save_games=path)
    games = read_games(path)
    assert [g["illegal"] for g in games] == [2, 1]  # Illegal has mark 2, then mark 1
    assert [g["winner"] for g in games] == [1, 2]


def test_read_games_refuses_a_wrong_winner(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    play_match(Column(0), Column(6), games=1, seed=0, openings="none", save_games=path)
    game = json.loads(path.read_text())
    game["winner"] = 2
    path.write_text(json.dumps(game) + "\n")
    with pytest.raises(ValueError, match=r"games.jsonl:1: .*winner"):
        read_games(path)


def test_empty_board_protocol_is_still_available() -> None:
    result = play_match("minimax:depth=2", "minimax:depth=2", games=4, seed=0, openings="none")
    assert result.openings == "none"
    assert all(record.opening_plies == 0 for record in result.records)
    assert play_match("random", "random", seed=0, openings="none").games == 100


def test_tournament_saves_every_game(tmp_path: Path) -> None:
    path = tmp_path / "games.jsonl"
    result = run_tournament(["random", "onestep", Column(3)], games=4, bootstrap=0, save_games=path)
    games = read_games(path)
    assert len(games) == 3 * 4 == sum(match.games for match in result.matches)
