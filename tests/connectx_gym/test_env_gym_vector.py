"""``ConnectX-v0`` in Gymnasium's own vector envs: every ``info`` key holds one type in every
episode, so ``gym.make_vec`` (sync and async) stacks them."""

from __future__ import annotations

from collections import defaultdict

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

import connectx_gym  # noqa: F401 - registers ConnectX-v0
from connectx_gym.env import NO_OPPONENT_ACTION, ConnectXEnv


def _actions(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random legal column per env (0 where none is legal: the step that resets it)."""
    return np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in masks.astype(bool)])


def _play(vector: gym.vector.VectorEnv, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    _, infos = vector.reset(seed=seed)
    assert infos["opponent_action"].dtype.kind == "i"
    for _ in range(steps):
        masks = infos["action_mask"].astype(bool)
        actions = np.array(
            [rng.choice(np.flatnonzero(mask)) if mask.any() else 0 for mask in masks]
        )
        _, _, _, _, infos = vector.step(actions)
        assert infos["opponent_action"].dtype.kind == "i"
        assert set(infos["opponent_action"].tolist()) <= {NO_OPPONENT_ACTION, *range(7)}


@pytest.mark.parametrize("mode", ["sync", "vector_entry_point"])
def test_make_vec_sync(mode: str) -> None:
    if mode == "sync":
        vector = gym.make_vec("ConnectX-v0", num_envs=2, vectorization_mode="sync")
    else:
        vector = SyncVectorEnv([lambda: gym.make("ConnectX-v0") for _ in range(3)])
    try:
        _play(vector, 60, seed=0)
    finally:
        vector.close()


def test_make_vec_async_in_bounded_time() -> None:
    vector = gym.make_vec("ConnectX-v0", num_envs=2, vectorization_mode="async")
    assert isinstance(vector, AsyncVectorEnv)
    try:
        vector.reset_async(seed=1)
        _, infos = vector.reset_wait(timeout=60)
        rng = np.random.default_rng(1)
        for _ in range(30):
            vector.step_async(_actions(infos["action_mask"], rng))
            _, _, _, _, infos = vector.step_wait(timeout=60)
            assert infos["opponent_action"].dtype.kind == "i"
    finally:
        vector.close(terminate=True)


def test_every_info_value_keeps_one_type_over_many_episodes() -> None:
    env = ConnectXEnv(4, 5, 3, opening_plies=3)
    rng = np.random.default_rng(0)
    seen: dict[str, set[tuple[type, str]]] = defaultdict(set)

    def record(info: dict) -> None:
        for key, value in info.items():
            seen[key].add((type(value), np.asarray(value).dtype.str))

    env.reset(seed=0)
    for episode in range(300):
        _, info = env.reset(options={"agent_mark": None})
        record(info)
        done = False
        while not done:
            legal = np.flatnonzero(info["action_mask"])
            illegal_now = episode % 7 == 0 and rng.random() < 0.2
            if illegal_now or not legal.size:
                action = int(rng.integers(0, 5)) if legal.size < 5 else 99
            else:
                action = int(rng.choice(legal))
            _, _, done, _, info = env.step(action)
            record(info)
    assert set(seen) == {"action_mask", "agent_mark", "opponent_action", "winner", "illegal_action"}
    for key, kinds in seen.items():
        assert len(kinds) == 1, f"info[{key!r}] took {sorted(map(str, kinds))}"
