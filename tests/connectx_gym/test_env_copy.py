"""Env copies: ``copy.deepcopy`` and pickle give a faithful, independent env, generator included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from connectx_gym.env import ConnectXEnv
from connectx_gym.policy import NoisyPolicy
from tests.support.env_copy_checks import COPIERS, check_copy_mid_game
from tests.support.scripted_policies import Column

OPPONENTS: dict[str, Any] = {
    "random": "random",
    "policy object": Column(3),
    "noisy spec": "random~0.5",
    "noisy policy object": NoisyPolicy(Column(2), 0.5),
}


@pytest.mark.parametrize("copier", COPIERS)
@pytest.mark.parametrize("opponent", OPPONENTS)
def test_copy_mid_game_is_faithful_and_independent(opponent: str, copier: str) -> None:
    check_copy_mid_game(OPPONENTS[opponent], COPIERS[copier])


@pytest.mark.parametrize("copier", COPIERS)
@pytest.mark.parametrize("size", [(6, 7, 4), (9, 9, 5), (4, 20, 4)])  # 64-bit and larger boards
def test_copy_on_every_board_kind(size: tuple[int, int, int], copier: str) -> None:
    rows, columns, inarow = size
    check_copy_mid_game("random", COPIERS[copier], rows=rows, columns=columns, inarow=inarow)


@pytest.mark.parametrize("copier", COPIERS)
def test_copy_of_a_fresh_and_of_a_finished_env(copier: str) -> None:
    fresh = COPIERS[copier](ConnectXEnv())
    observation, _ = fresh.reset(seed=1)
    assert observation.sum() in (0, 1)
    env = ConnectXEnv(opponent=Column(0), agent_mark=1)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(1)
    finished = COPIERS[copier](env)
    assert not finished.action_masks().any()
    with pytest.raises(RuntimeError, match="call reset"):
        finished.step(0)
    finished.reset(seed=3)
    assert finished.action_masks().all()
    assert not env.action_masks().any()  # the original is still over


def test_copied_generator_is_independent() -> None:
    env = ConnectXEnv()
    env.reset(seed=5)
    twin = COPIERS["deepcopy"](env)
    first = env.np_random.integers(1 << 30, size=4)
    assert np.array_equal(twin.np_random.integers(1 << 30, size=4), first)
