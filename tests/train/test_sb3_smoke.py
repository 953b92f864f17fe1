"""MaskablePPO trains on ``ConnectX-v0`` through DummyVecEnv and SubprocVecEnv, finding the action
masks by itself (no ``ActionMasker`` wrapper), with an MLP and with a small CNN."""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import pytest

sb3_contrib = pytest.importorskip("sb3_contrib")
torch = pytest.importorskip("torch")

from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv  # noqa: E402

# A small board fills its columns quickly, and an illegal action raises: any action sampled
# without the mask would end the test with a ValueError.
make_env = partial(
    gym.make, "connectx_gym:ConnectX-v0", rows=4, columns=5, inarow=3, illegal_action="raise"
)


class SmallCNN(BaseFeaturesExtractor):
    """One 3x3 convolution over the two (agent, opponent) planes, then a linear layer."""

    def __init__(self, observation_space: gym.spaces.Box, features_dim: int = 32) -> None:
        super().__init__(observation_space, features_dim)
        channels, rows, columns = observation_space.shape
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(channels, 8, kernel_size=3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(8 * rows * columns, features_dim),
            torch.nn.ReLU(),
        )

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.net(observations)


def train_and_check(env: VecEnv, policy_kwargs: dict, steps: int) -> None:
    assert is_masking_supported(env)
    model = MaskablePPO(
        "MlpPolicy",
        env,
        n_steps=64,
        batch_size=64,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs=policy_kwargs,
    )
    model.learn(total_timesteps=steps)
    assert model.num_timesteps >= steps
    observations = env.reset()
    for _ in range(20):
        masks = get_action_masks(env)
        assert masks.dtype == np.bool_
        assert masks.shape == (env.num_envs, 5)
        actions, _ = model.predict(observations, action_masks=masks, deterministic=True)
        assert all(masks[i, action] for i, action in enumerate(actions))
        observations, _, _, _ = env.step(actions)


def test_maskable_ppo_through_subproc_vec_env() -> None:
    env = SubprocVecEnv([make_env, make_env])
    try:
        train_and_check(env, {"net_arch": [32]}, steps=384)
    finally:
        env.close()


def test_maskable_ppo_through_dummy_vec_env_with_mlp_and_cnn() -> None:
    env = DummyVecEnv([make_env, make_env])
    train_and_check(env, {"net_arch": [32]}, steps=256)
    cnn = {"features_extractor_class": SmallCNN, "net_arch": [], "normalize_images": False}
    train_and_check(env, cnn, steps=256)
