"""Round robins and Bradley-Terry Elo ratings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_gym.tournament import (
    TournamentResult,
    bradley_terry_elo,
    run_tournament,
    short_label,
)
from tests.support.scripted_policies import Column, Illegal


def test_two_players_closed_form() -> None:
    # With no prior, p = 1 / (1 + 10^(-d/400)), so 75% means d = 400 log10(3).
    scores = np.array([[0.0, 75.0], [25.0, 0.0]])
    games = np.array([[0.0, 100.0], [100.0, 0.0]])
    elo = bradley_terry_elo(scores, games, prior_draws=0)
    assert elo[0] - elo[1] == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert elo.mean() == pytest.approx(1500)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2**32 - 1))
def test_maximum_likelihood_conditions(players: int, seed: int) -> None:
    # At the Bradley-Terry optimum every player's expected score equals its actual score.
    rng = np.random.default_rng(seed)
    games = np.zeros((players, players))
    scores = np.zeros((players, players))
    for i in range(players):
        for j in range(i + 1, players):
            n = int(rng.integers(1, 30))
            s = rng.integers(0, 2 * n + 1) / 2
            games[i, j] = games[j, i] = n
            scores[i, j], scores[j, i] = s, n - s
    prior = 1.0
    elo = bradley_terry_elo(scores, games, prior_draws=prior)
    strength = 10 ** (elo / 400)
    expected = strength[:, None] / (strength[:, None] + strength[None, :])
    padded_games = games + prior * (1 - np.eye(players))
    padded_scores = scores + prior / 2 * (1 - np.eye(players))
    np.testing.assert_allclose(
        (padded_games * expected).sum(axis=1), padded_scores.sum(axis=1), rtol=1e-6, atol=1e-6
    )


def test_round_robin_orders_scripted_players(tmp_path: Path) -> None:
    # column0 vs column6: the first mover wins, so they split; everyone beats the illegal player.
    result = run_tournament(
        [Column(0), Column(6), Illegal(), "random"], games=6, seed=1, bootstrap=200
    )
    names = result.players
    assert names == ["column0", "column6", "illegal", "random"]
    index = {name: i for i, name in enumerate(names)}
    assert result.scores[index["column0"], index["column6"]] == 3
    for name in ("column0", "column6", "random"):
        assert result.scores[index[name], index["illegal"]] == 6
    assert result.ranking()[-1] == index["illegal"]
    assert (result.elo_low <= result.elo + 1e-9).all()
    assert (result.elo <= result.elo_high + 1e-9).all()
    assert result.elo_high[index["illegal"]] < result.elo_low[index["column0"]]
    summary = json.loads(json.dumps(result.to_dict()))
    assert [p["player"] for p in summary["players"]][-1] == "illegal"
    assert len(summary["matches"]) == 6
    table = result.table()
    assert table.count("\n| ") >= 4 + 4
    assert "illegal" in table
    pytest.importorskip("matplotlib")
    png = result.plot(tmp_path / "ratings.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_tournament_is_reproducible() -> None:
    first = run_tournament(["random", "onestep"], games=4, seed=5, bootstrap=50)
    second = run_tournament(["random", "onestep"], games=4, seed=5, bootstrap=50)
    np.testing.assert_array_equal(first.scores, second.scores)
    np.testing.assert_array_equal(first.elo_low, second.elo_low)


def test_bad_tournaments() -> None:
    with pytest.raises(ValueError, match="at least two"):
        run_tournament(["random"], games=2)
    with pytest.raises(ValueError, match="distinct"):
        run_tournament(["random", "random"], games=2)
    with pytest.raises(ValueError, match="unknown policy"):
        run_tournament(["random", "nonsense"], games=2)


def test_intervals_contain_estimates_for_players_who_lose_everything() -> None:
    result = run_tournament([Column(0), Illegal(), "random"], games=10, seed=2, bootstrap=200)
    assert (result.elo_low <= result.elo).all()
    assert (result.elo <= result.elo_high).all()


def synthetic_result(names: list[str]) -> TournamentResult:
    size = len(names)
    games = np.full((size, size), 4)
    np.fill_diagonal(games, 0)
    upper = np.triu(np.arange(size * size).reshape(size, size) % 5, 1).astype(float)
    scores = upper + np.triu(4 - upper, 1).T
    np.fill_diagonal(scores, 0)
    elo = np.linspace(1700, 1300, size)
    return TournamentResult(names, [], scores, games, elo, elo - 40, elo + 40)


def test_short_labels() -> None:
    assert short_label("minimax:depth=3") == "minimax:depth=3"
    assert short_label("/a/very/long/path/to/runs/connectx/final.npz") == "final.npz"
    long = short_label("alphabeta:time_budget=0.5,max_depth=12~0.25")
    assert len(long) == 18
    assert long.startswith("alphabet")
    assert long.endswith("0.25")


@pytest.mark.slow
def test_plot_stays_readable_for_long_names_and_many_players(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib import image

    long_name = "/some/" + "very/" * 60 + "long/path/agent.npz"
    small = synthetic_result(["random", "onestep", "minimax:depth=3", long_name])
    large = synthetic_result([f"{long_name}{i}" for i in range(24)])
    small_png = image.imread(small.plot(tmp_path / "small.png"))
    large_png = image.imread(large.plot(tmp_path / "large.png"))
    # The long name does not stretch the figure (it is shortened, and written once in the key,
    # cut to 90 characters); the figure grows with the number of players.
    assert small_png.shape[1] <= 1200
    assert small_png.shape[0] <= 600
    assert large_png.shape[0] > small_png.shape[0]
    assert large_png.shape[1] > small_png.shape[1]


def test_plot_axes_keep_their_room_beside_long_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    figures = []
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda figure: (figures.append(figure), close(figure)))
    long_name = "/some/" + "very/" * 60 + "long/path/agent.npz"
    synthetic_result(["random", "onestep", "minimax:depth=3", long_name]).plot(tmp_path / "p.png")
    ratings, scores = figures[0].axes[:2]
    for axes in (ratings, scores):
        assert axes.get_position().width > 0.25  # old plot: a sliver beside the full path
    assert ratings.get_title() == "ratings"
