"""The RLlib env (:mod:`connectx_train.rllib.env`): agents alternate, the last step gives every
learner its result, the observations are the project's planes, the opponents of a mixture play
inside the env with the seat drawn per game, finished games are counted by label, and the random
openings stay within their bound. Runs in the RLlib environment (``.ci/rllib_tests``); skipped
without ``pip install -e ".[rllib]"``."""

from __future__ import annotations

import numpy as np
import pytest

multi_agent_env = pytest.importorskip(
    "connectx_train.rllib.env",
    reason='RLlib is not installed (pip install -e ".[rllib]")',
    exc_type=ImportError,
)

from connectx_gym.bitboard import Board, Geometry  # noqa: E402
from connectx_train.state import SELF_LABEL  # noqa: E402

ConnectXMultiAgentEnv = multi_agent_env.ConnectXMultiAgentEnv


def play_out(env, columns):
    """Step ``env`` with ``columns`` in turn from a reset; the step results."""
    observations, _ = env.reset(seed=0)
    steps = []
    for column in columns:
        (agent,) = observations
        observations, rewards, terminated, truncated, _ = env.step({agent: column})
        steps.append((observations, rewards, terminated, truncated))
    return steps


def test_selfplay_agents_alternate_and_both_get_the_result():
    env = ConnectXMultiAgentEnv()
    observations, _ = env.reset(seed=0)
    assert list(observations) == ["player_0"]
    first = observations["player_0"]
    assert first["observations"].shape == (2, 6, 7)
    assert first["observations"].dtype == np.float32
    assert first["action_mask"].tolist() == [1.0] * 7
    steps = play_out(env, [0, 1, 0, 1, 0, 1, 0])  # player_0 wins in column 0
    for index, (observations, rewards, terminated, _) in enumerate(steps[:-1]):
        mover = "player_1" if index % 2 == 0 else "player_0"
        assert list(observations) == [mover]
        assert rewards == {mover: 0.0}
        assert terminated == {"__all__": False}
    observations, rewards, terminated, truncated = steps[-1]
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert terminated == {"player_0": True, "player_1": True, "__all__": True}
    assert truncated == {"player_0": False, "player_1": False, "__all__": False}
    assert observations["player_1"]["action_mask"].sum() == 0
    assert env.drain() == []  # self-play games count toward no opponent


def test_observations_are_the_movers_planes():
    env = ConnectXMultiAgentEnv()
    steps = play_out(env, [3, 2, 3])
    (observation,) = steps[-1][0].values()
    board = Board.from_moves(Geometry(6, 7, 4), [3, 2, 3])
    assert np.array_equal(observation["observations"], board.to_planes())
    assert observation["observations"][0, 5, 2] == 1  # the mover's stone: bottom row, column 2
    assert np.array_equal(observation["action_mask"], board.legal_mask())


def test_an_illegal_column_loses():
    env = ConnectXMultiAgentEnv({"rows": 4, "columns": 5, "inarow": 3})
    steps = play_out(env, [0, 0, 0, 0, 0])  # column 0 is full after four stones
    assert steps[-1][1] == {"player_0": -1.0, "player_1": 1.0}
    assert steps[-1][2]["__all__"]


def test_opponent_plays_inside_the_env_and_games_are_counted():
    mixture = [("random", 0.5), ("onestep~0.5", 0.5)]
    env = ConnectXMultiAgentEnv({"mixture": mixture, "seed": 3})
    seats, labels = set(), []
    for _ in range(12):
        observations, _ = env.reset()
        (learner,) = observations
        seats.add(learner)
        done = False
        while not done:
            (agent,) = observations
            assert agent == learner
            legal = np.flatnonzero(observations[agent]["action_mask"])
            observations, rewards, terminated, _, _ = env.step({agent: int(legal[-1])})
            done = terminated["__all__"]
        assert set(rewards) == {learner}
        (outcome,) = env.drain()
        labels.append(outcome[0])
        assert outcome[1] == (rewards[learner] == 1.0)
    assert seats == {"player_0", "player_1"}
    assert set(labels) == {"random", "onestep~0.5"}
    timing = env.timing()
    assert set(timing["opponents"]) == {"random", "onestep~0.5"}
    assert all(moves > 0 for _, moves in timing["opponents"].values())
    assert timing["env_seconds"] > 0


def test_the_same_seed_and_place_play_the_same_games():
    def games(config):
        env = ConnectXMultiAgentEnv({"mixture": [("random", 1.0), (SELF_LABEL, 1.0)], **config})
        starts = []
        for _ in range(6):
            observations, _ = env.reset()
            ((agent, observation),) = observations.items()
            starts.append((agent, observation["observations"].tobytes(), env.label))
        return starts

    config = {"seed": 5, "opening_plies": 4}
    assert games(config) == games(config)
    assert games(config) != games({"seed": 6, "opening_plies": 4})


def test_random_openings_stay_within_their_bound():
    env = ConnectXMultiAgentEnv({"opening_plies": 3, "seed": 1})
    stones = []
    for _ in range(60):
        observations, _ = env.reset()
        (observation,) = observations.values()
        stones.append(int(observation["observations"].sum()))
    assert min(stones) == 0
    assert max(stones) == 3


@pytest.mark.parametrize("mixture", [[("random", 1.0)], [(SELF_LABEL, 1.0)]])
def test_long_random_openings_leave_a_learner_to_move_and_no_line(mixture):
    """Past ``2 * inarow - 3`` stones (as ``ConnectX-v0``): stones only where they complete no
    line, a learner to move after the opening (and after the opponent's reply, if any)."""
    env = ConnectXMultiAgentEnv({"mixture": mixture, "opening_plies": 30, "seed": 3})
    stones = []
    for _ in range(200):
        observations, _ = env.reset()
        ((agent, observation),) = observations.items()
        assert agent == f"player_{env.board.mark - 1}"
        assert env.board.mark in env.learners
        assert env.board.winner() is None
        stones.append(int(observation["observations"].sum()))
    assert max(stones) >= 29
    assert min(stones) <= 1


def test_set_mixture_moves_every_next_game_and_refuses_empty_weights():
    env = ConnectXMultiAgentEnv({"mixture": [("random", 1.0)]})
    env.set_mixture([("onestep", 1.0)])
    env.reset(seed=0)
    assert env.label == "onestep"
    with pytest.raises(ValueError, match="probabilities > 0"):
        env.set_mixture([("random", 0.0)])
    with pytest.raises(ValueError, match="probabilities > 0"):
        env.set_mixture([])
