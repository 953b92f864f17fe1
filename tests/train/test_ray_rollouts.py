"""The rollouts' boards in env slices, in this process (``--env-slices``): the partition, the
setting, and the games of the sliced env equal those of the batched env of each slice (the Ray
side: ``tests/ray/test_ray_rollouts.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from stable_baselines3.common.vec_env import VecEnv, VecMonitor
from threadpoolctl import threadpool_info, threadpool_limits

from connectx_train.config import TrainConfig
from connectx_train.env_slices import EnvSlice, actor_env, slice_bounds, slice_cpus
from connectx_train.opponents import BatchedOpponentSlots, collect_timing
from connectx_train.ray_rollouts import SlicedVecEnv, restart_seed, train_env

SPECS = ("random", "onestep~0.25", "minimax:depth=2")


def spec_of(board: int, phase: int) -> str:
    """The opponent of board ``board`` (of the whole env) in ``phase`` 0 or 1 of a rollout."""
    return SPECS[(board + phase) % len(SPECS)]


def rollout(env: VecEnv, first_board: int = 0, steps: int = 40) -> list[Any]:
    """Observations, rewards, dones and infos of ``steps`` moves on ``env``'s boards, numbered
    from ``first_board`` in the whole env: each board's opponents (:func:`spec_of`, queued before
    the reset and changed halfway) and moves (a legal column chosen by step and board) depend on
    its number alone."""

    def queue(phase: int) -> None:
        for board in range(env.num_envs):
            spec = spec_of(first_board + board, phase)
            env.env_method("queue_opponent", spec, spec, indices=[board])

    queue(0)
    played: list[Any] = [env.reset().copy()]
    for step in range(steps):
        if step == steps // 2:
            queue(1)
        masks = np.stack(env.env_method("action_masks"))
        actions = np.array(
            [
                np.flatnonzero(mask)[(step + first_board + board) % mask.sum()]
                for board, mask in enumerate(masks)
            ]
        )
        env.step_async(actions)
        observations, rewards, dones, infos = env.step_wait()
        ended = [sorted((key, repr(value)) for key, value in info.items()) for info in infos]
        played.append((observations.copy(), rewards.copy(), dones.copy(), ended))
    return played


def assert_same_games(got: list[Any], expected: list[Any]) -> None:
    np.testing.assert_array_equal(got[0], expected[0])
    assert len(got) == len(expected)
    for (obs, rewards, dones, infos), (obs_0, rewards_0, dones_0, infos_0) in zip(
        got[1:], expected[1:], strict=True
    ):
        np.testing.assert_array_equal(obs, obs_0)
        np.testing.assert_array_equal(rewards, rewards_0)
        np.testing.assert_array_equal(dones, dones_0)
        assert infos == infos_0


def test_boards_are_cut_into_runs_of_consecutive_boards_differing_by_one_at_most():
    assert slice_bounds(7, 3) == [(0, 3), (3, 5), (5, 7)]
    assert slice_bounds(4, 1) == [(0, 4)]
    assert slice_bounds(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    with pytest.raises(ValueError, match="between 1 and n_envs"):
        slice_bounds(2, 3)


def test_the_setting_defaults_to_one_slice_and_needs_the_batched_env_and_enough_boards():
    assert TrainConfig().env_slices == 1
    assert TrainConfig.from_json({}).env_slices == 1  # a run saved before the setting
    assert TrainConfig(env_slices=4).learning_settings()["env_slices"] == 4  # it shapes the games
    TrainConfig(n_envs=4, env_slices=4).validate()
    with pytest.raises(ValueError, match="--n-envs >= it"):
        TrainConfig(n_envs=2, env_slices=3).validate()
    with pytest.raises(ValueError, match="--vec-env batched"):
        TrainConfig(n_envs=4, env_slices=2, vec_env="dummy").validate()


def test_one_slice_and_no_ray_is_the_plain_batched_env():
    env = train_env(TrainConfig(n_envs=3))
    assert isinstance(env, VecMonitor)
    assert type(env.venv) is BatchedOpponentSlots
    env.close()
    sliced = train_env(TrainConfig(n_envs=3, env_slices=2))
    assert isinstance(sliced, VecMonitor)
    assert isinstance(sliced.venv, SlicedVecEnv)
    assert sliced.venv.cluster is None
    sliced.close()


def test_one_slice_plays_the_games_of_the_batched_env():
    config = TrainConfig(n_envs=5, seed=4)
    assert_same_games(rollout(SlicedVecEnv(config)), rollout(BatchedOpponentSlots(config)))


def test_each_slice_plays_the_games_of_a_batched_env_of_its_boards_seeded_at_its_first():
    config = TrainConfig(n_envs=5, seed=4, env_slices=2)  # boards 0-2 and 3-4
    sliced = SlicedVecEnv(config)
    sliced.seed(100)  # slice k from 100 + its first board
    played = rollout(sliced)
    assert sliced.bounds == [(0, 3), (3, 5)]
    for start, stop in sliced.bounds:
        alone = BatchedOpponentSlots(TrainConfig(n_envs=stop - start, seed=4))
        alone.seed(100 + start)
        part = [played[0][start:stop]] + [
            (obs[start:stop], rewards[start:stop], dones[start:stop], infos[start:stop])
            for obs, rewards, dones, infos in played[1:]
        ]
        assert_same_games(part, rollout(alone, first_board=start))
    assert any(dones.any() for _, _, dones, _ in played[1:])  # games ended and restarted


def test_the_timing_of_the_slices_is_summed():
    env = SlicedVecEnv(TrainConfig(n_envs=4, env_slices=2))
    rollout(env, steps=6)
    timing = collect_timing(env)
    slices = [env_slice.env.timing() for env_slice in env.slices.slices]
    assert timing["env_seconds"] == pytest.approx(sum(t["env_seconds"] for t in slices))
    for label, (_, moves) in timing["opponents"].items():
        assert moves == sum(t["opponents"].get(label, [0, 0])[1] for t in slices)
    assert sum(moves for _, moves in timing["opponents"].values()) > 0
    assert "cluster" not in timing
    env.close()


def test_restart_seeds_differ_by_slice_and_restart():
    seeds = {restart_seed(3, k, restart) for k in range(4) for restart in range(1, 4)}
    assert len(seeds) == 12
    assert restart_seed(3, 1, 1) == restart_seed(3, 1, 1)


def test_each_actor_holds_an_equal_share_of_the_cpus_that_fits_on_a_node():
    assert slice_cpus([2], 1) == 2  # one slice on a local instance: the machine
    assert slice_cpus([2], 2) == 1
    assert slice_cpus([16, 16, 16, 16], 4) == 16
    assert slice_cpus([16, 16, 16, 16], 1) == 16  # at most a node's
    assert slice_cpus([16, 16, 16, 16], 64) == 1
    assert slice_cpus([3, 1], 2) == 1  # two actors of 2 CPUs would not both fit
    assert slice_cpus([1, 1, 1], 2) == 1


def test_the_actors_threads_sleep_when_idle_unless_the_user_said_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert actor_env() == {"OMP_WAIT_POLICY": "PASSIVE"}
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert actor_env() == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_a_slice_on_an_actor_holds_numpy_blas_to_one_thread() -> None:
    import numba

    before = numba.get_num_threads()
    with threadpool_limits(limits=2, user_api="blas"):  # put back on the way out
        env_slice = EnvSlice(TrainConfig(n_envs=2), 0, 2, threads=1)  # as a Ray actor makes it
        blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
        env_slice.close()
    numba.set_num_threads(before)
    assert blas  # numpy's BLAS is seen
    assert set(blas) == {1}
