"""RLlib multi-agent PPO on the PettingZoo adapter: the env's protocol, and two tiny iterations on a
local Ray instance (2 CPUs). Skipped without ``pip install -e ".[rllib]"``."""

from __future__ import annotations

import time

import numpy as np
import pytest

rllib = pytest.importorskip(
    "connectx_train.rllib_selfplay",
    reason='RLlib is not installed (pip install -e ".[rllib]")',
    exc_type=ImportError,  # the module raises ImportError with the install hint
)

from connectx_gym.bitboard import Board, Geometry  # noqa: E402
from connectx_gym.match import play_match  # noqa: E402


def play_out(env, columns):
    """Step ``env`` with ``columns`` in turn; the step results."""
    observations, _ = env.reset(seed=0)
    steps = []
    for column in columns:
        (agent,) = observations
        observations, rewards, terminated, truncated, _ = env.step({agent: column})
        steps.append((observations, rewards, terminated, truncated))
    return steps


def test_env_alternates_agents_and_ends_with_both_rewards():
    env = rllib.ConnectXMultiAgentEnv()
    observations, _ = env.reset(seed=0)
    assert list(observations) == ["player_0"]
    first = observations["player_0"]
    assert first["observations"].shape == (84,)
    assert first["observations"].dtype == np.float32
    assert first["action_mask"].tolist() == [1.0] * 7
    steps = play_out(env, [0, 1, 0, 1, 0, 1, 0])  # player_0 wins in column 0
    for observations, _, terminated, _ in steps[:-1]:
        assert len(observations) == 1
        assert not terminated["__all__"]
    observations, rewards, terminated, _ = steps[-1]
    assert rewards == {"player_1": -1.0, "player_0": 1.0}
    assert terminated == {"player_1": True, "player_0": True, "__all__": True}
    assert observations["player_1"]["action_mask"].sum() == 0
    # The mover's view: before its third move player_1 sees its 2 discs in plane 0, 3 in plane 1.
    planes = steps[4][0]["player_1"]["observations"].reshape(6, 7, 2)
    assert planes[..., 0].sum() == 2
    assert planes[..., 1].sum() == 3
    assert planes[5, 1, 0] == 1  # its first disc: bottom row (row 0 on top), column 1


def test_opponent_plays_inside_the_env_and_seats_alternate():
    env = rllib.ConnectXMultiAgentEnv({"opponent": "random", "seed": 1})
    learners = []
    for _ in range(2):
        observations, _ = env.reset()
        learners.append(next(iter(observations)))
        done = False
        while not done:
            (agent,) = observations
            assert agent == learners[-1]
            legal = np.flatnonzero(observations[agent]["action_mask"])
            observations, rewards, terminated, _, _ = env.step({agent: int(legal[0])})
            done = terminated["__all__"]
        assert set(rewards) == {learners[-1]}
    assert learners == ["player_0", "player_1"]


@pytest.mark.slow
def test_two_tiny_ppo_iterations_on_local_ray():
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        config = rllib.build_config(
            batch=128, minibatch=64, epochs=1, env_runners=0, hidden=(32,), seed=0
        )
        algo, history = rllib.train(2, config, report=lambda summary: None)
        assert [h["iteration"] for h in history] == [1, 2]
        assert history[-1]["env_steps"] >= 256
        assert history[-1]["episodes"] > 0
        player = rllib.RLlibPolicy(algo.get_module(rllib.MODULE_ID))
        full = Board.from_moves(Geometry(6, 7, 4), [3] * 6)
        assert player.act(full, np.random.default_rng(0)) in (0, 1, 2, 4, 5, 6)
        result = play_match(player, "random", games=4, seed=0, openings="none")
        assert result.games == 4
        assert result.illegal_a == 0
        algo.stop()
    finally:
        ray.shutdown()
    print(f"rllib smoke: {time.perf_counter() - started:.1f} s")
