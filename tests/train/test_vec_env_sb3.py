"""The SB3 adapter of the batched env: SB3's VecEnv contract, checked explicitly (SB3's env checker
covers single envs only), and MaskablePPO training on it directly."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
pytest.importorskip("torch")

from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported
from stable_baselines3.common.vec_env import VecEnv, VecMonitor

from connectx_train.vec_env import ConnectXVecEnv


def rollout(venv: VecEnv, seed: int, steps: int) -> list:
    venv.seed(seed)
    out = [venv.reset()]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        masks = get_action_masks(venv)
        out.append(venv.step(np.argmax(masks * rng.random(masks.shape), axis=1)))
    return out


def test_vec_env_contract():
    venv = ConnectXVecEnv(num_envs=6, rows=4, columns=5, inarow=3, opponent="onestep~0.5")
    assert isinstance(venv, VecEnv)
    assert is_masking_supported(venv)
    assert venv.num_envs == 6
    assert venv.observation_space.shape == (2, 4, 5)
    observations = venv.reset()
    assert observations.shape == (6, 2, 4, 5)
    assert observations.dtype == np.int8
    assert len(venv.reset_infos) == 6
    masks = get_action_masks(venv)
    assert masks.shape == (6, 5)
    assert masks.dtype == bool
    np.testing.assert_array_equal(masks, venv.action_masks())
    ended = 0
    for _ in range(30):
        masks = venv.action_masks()
        observations, rewards, dones, infos = venv.step(np.argmax(masks, axis=1))
        assert rewards.dtype == np.float32
        assert dones.dtype == bool
        assert rewards.shape == dones.shape == (6,)
        assert isinstance(infos, list)
        assert len(infos) == 6
        for i in np.flatnonzero(dones):
            ended += 1
            assert infos[i]["terminal_observation"].shape == (2, 4, 5)
            assert infos[i]["TimeLimit.truncated"] is False
            assert infos[i]["winner"] in (0, 1, 2)
        for i in np.flatnonzero(~dones):
            assert "terminal_observation" not in infos[i]
    assert ended > 0
    assert venv.get_attr("num_envs") == [6] * 6
    assert venv.env_is_wrapped(VecMonitor) == [False] * 6
    venv.env_method("set_opponent", "negamax", indices=[0, 2])
    assert venv.env._next_policy_of[[0, 2]].min() >= 0
    venv.close()


def test_seeding_reproduces_episodes():
    def make() -> ConnectXVecEnv:
        return ConnectXVecEnv(num_envs=4, opponent="random")

    first, second = rollout(make(), 5, 30), rollout(make(), 5, 30)
    for a, b in zip(first[1:], second[1:], strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[2], b[2])
    np.testing.assert_array_equal(first[0], second[0])


@pytest.mark.parametrize("policy", ["MlpPolicy", "CnnPolicy"])
def test_maskable_ppo_trains_on_it(policy):
    from tests.train.test_sb3_smoke import SmallCNN

    venv = VecMonitor(
        ConnectXVecEnv(num_envs=8, rows=4, columns=5, inarow=3, illegal_action="raise")
    )
    kwargs = {"features_extractor_class": SmallCNN} if policy == "CnnPolicy" else {}
    model = MaskablePPO(
        policy, venv, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu",
        policy_kwargs=kwargs,
    )  # fmt: skip
    model.learn(total_timesteps=512)
    assert model.num_timesteps >= 512
    assert len(model.ep_info_buffer) > 0
