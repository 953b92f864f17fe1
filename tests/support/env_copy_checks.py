"""Shared checks that an env copy (``copy.deepcopy`` or pickle) is faithful and independent."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

from connectx_gym.env import ConnectXEnv

COPIERS: dict[str, Callable[[Any], Any]] = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
}


def legal(env: ConnectXEnv, rng: np.random.Generator) -> int:
    return int(rng.choice(np.flatnonzero(env.action_masks())))


def check_copy_mid_game(opponent: Any, copier: Callable[[Any], Any], **kwargs: Any) -> None:
    """Two moves in, copy the env: the copy must show the same state, then evolve exactly as the
    original does for the same actions (same seeded generator), without touching the original."""
    env = ConnectXEnv(opponent=opponent, agent_mark=1, **kwargs)
    observation, _ = env.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(2):
        observation, *_ = env.step(legal(env, rng))
    twin = copier(env)
    assert twin is not env
    np.testing.assert_array_equal(twin.board().to_planes(), env.board().to_planes())
    np.testing.assert_array_equal(twin.action_masks(), env.action_masks())
    assert twin.board() == env.board()
    frozen = env.board()
    transcripts = []
    for copy_ in (twin, env):
        moves_rng = np.random.default_rng(1)
        transcript = []
        while not copy_._done:
            observation, reward, terminated, _, info = copy_.step(legal(copy_, moves_rng))
            stones = int(observation.sum())
            # The observation follows the game: the copy's views are live, not frozen.
            assert stones == copy_.board().moves
            np.testing.assert_array_equal(info["action_mask"], copy_.action_masks())
            transcript.append((observation.tobytes(), reward, terminated, info["opponent_action"]))
        transcripts.append(transcript)
        if copy_ is twin:
            assert env.board() == frozen  # playing the copy left the original alone
    assert transcripts[0] == transcripts[1]
    # And a fresh episode from the copy's generator equals the original's.
    assert twin.reset()[0].tobytes() == env.reset()[0].tobytes()
