"""kaggle-environments' agents as policies, and our agents as Kaggle agents (the round trip)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from connectx_baselines.kaggle_agents import KaggleBuiltinPolicy, load_kaggle_agent
from connectx_gym import Board, Geometry, as_kaggle_agent, make_policy
from connectx_gym.policy import Struct

CONFIG = {"rows": 6, "columns": 7, "inarow": 4}


def test_missing_kaggle_environments_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "kaggle_environments", None)
    monkeypatch.setitem(sys.modules, "kaggle_environments.envs.connectx", None)
    with pytest.raises(ImportError, match=r'pip install "connectx-gym\[kaggle\]"'):
        make_policy("kaggle:negamax")


def test_unknown_kaggle_agent() -> None:
    with pytest.raises(ValueError, match="unknown kaggle agent"):
        load_kaggle_agent("alphazero")


@pytest.mark.parametrize(
    ("spec", "board"),
    [
        # O to move on X X X . : the only answer that does not lose at once is column 3.
        ("alphabeta:time_budget=0.2", [0] * 35 + [1, 1, 1, 0, 2, 2, 0]),
        ("minimax", [0] * 35 + [1, 1, 1, 0, 2, 2, 0]),
        ("negamax", [0] * 35 + [1, 1, 1, 0, 2, 2, 0]),
        ("onestep", [0] * 35 + [1, 1, 1, 0, 2, 2, 0]),
    ],
)
def test_our_agents_answer_kaggle_observations(spec: str, board: list[int]) -> None:
    agent = as_kaggle_agent(spec, seed=0)
    assert agent({"board": board, "mark": 2}, CONFIG) == 3
    assert agent(Struct(board=board, mark=2), Struct(CONFIG)) == 3


def test_round_trip_matches_the_policy() -> None:
    # The same policy and seed give the same columns through the Kaggle adapter.
    rng = np.random.default_rng(7)
    policy = make_policy("minimax:depth=2")
    agent = as_kaggle_agent("minimax:depth=2", seed=7)
    board = Board.empty()
    for _ in range(12):
        column = agent({"board": board.to_kaggle(), "mark": board.mark}, CONFIG)
        assert column == policy.act(board, rng)
        board = board.play(column)
        if board.is_terminal():
            break


@pytest.mark.parametrize("name", ["random", "negamax"])
def test_kaggle_builtins_play_legal_reproducible_moves(name: str) -> None:
    pytest.importorskip("kaggle_environments")
    policy = KaggleBuiltinPolicy(agent=name)
    board = Board.from_moves(Geometry(6, 7, 4), [3, 3, 3, 3, 3, 3])
    picks = [policy.act(board, np.random.default_rng(seed)) for seed in range(5)]
    assert all(board.can_play(c) for c in picks)
    assert picks == [policy.act(board, np.random.default_rng(seed)) for seed in range(5)]
    if name == "random":
        np.testing.assert_array_equal(np.isnan(policy.scores(board)), ~board.legal_mask())
    else:
        with pytest.raises(NotImplementedError):
            policy.scores(board)


def test_kaggle_negamax_blocks() -> None:
    pytest.importorskip("kaggle_environments")
    board = Board.from_moves(Geometry(6, 7, 4), [0, 1, 6, 2, 6, 3])  # O threatens column 4
    assert make_policy("kaggle:negamax").act(board, np.random.default_rng(0)) == 4


def test_real_kaggle_game() -> None:
    kaggle_environments = pytest.importorskip("kaggle_environments")
    env = kaggle_environments.make("connectx", debug=True)
    ours = as_kaggle_agent("alphabeta:time_budget=0.1", seed=0)
    env.run([ours, "random"])
    first, second = env.steps[-1]
    assert first.status == second.status == "DONE"
    assert (first.reward, second.reward) == (1, -1)
    env.reset()
    env.run(["random", ours])
    first, second = env.steps[-1]
    assert (first.reward, second.reward) == (-1, 1)
