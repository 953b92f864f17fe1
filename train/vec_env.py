"""The batched env as a Stable-Baselines3 ``VecEnv``, with ``action_masks()`` for MaskablePPO.

::

    from sb3_contrib import MaskablePPO
    from connectx_train.vec_env import ConnectXVecEnv

    venv = ConnectXVecEnv(num_envs=64, opponent="minimax:depth=3")
    model = MaskablePPO("MlpPolicy", venv).learn(100_000)

One :class:`~connectx_gym.vector.ConnectXVectorEnv` runs every board; its same-step autoreset is
SB3's convention, so ``step_wait`` returns the first observation of the next game for the boards
that ended and puts the last one in ``infos[i]["terminal_observation"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from connectx_gym.vector import ConnectXVectorEnv

__all__ = ["ConnectXVecEnv"]


class ConnectXVecEnv(VecEnv):
    """SB3 ``VecEnv`` over a :class:`~connectx_gym.vector.ConnectXVectorEnv`.

    Give a batched env, or the keyword arguments to build one (``num_envs``, ``rows``,
    ``opponent``, ...). ``infos[i]`` is empty for boards whose game goes on; for a board whose game
    ended it holds ``terminal_observation``, ``TimeLimit.truncated`` (False), ``winner``,
    ``agent_mark`` and, after an illegal move, ``illegal_action``. Wrap it in SB3's ``VecMonitor``
    for episode statistics.

    ``seed(s)`` seeds the batched env's generator with ``s`` at the next reset; ``set_options``
    passes the first board's options (``opponent``, ``agent_mark``) to it.
    ``env_method("action_masks")`` gives one mask per board (what MaskablePPO calls);
    ``env_method("set_opponent", spec, indices=...)`` changes the opponent of those boards from
    their next game; other methods and attributes are the batched env's, called once.
    """

    def __init__(self, env: ConnectXVectorEnv | None = None, **kwargs: Any) -> None:
        if env is None:
            env = ConnectXVectorEnv(**kwargs)
        elif kwargs:
            raise ValueError("give either a ConnectXVectorEnv or the arguments to make one")
        if not isinstance(env, ConnectXVectorEnv):
            raise TypeError(f"expected a ConnectXVectorEnv, got {env!r}")
        self.env = env
        self._actions: np.ndarray | None = None
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self.render_mode = env.render_mode

    def reset(self) -> VecEnvObs:
        seed = self._seeds[0]
        options = self._options[0] or None
        observations, infos = self.env.reset(seed=seed, options=options)
        self._reset_seeds()
        self._reset_options()
        marks, masks = infos["agent_mark"], infos["action_mask"]
        self.reset_infos = [
            {"agent_mark": int(marks[i]), "action_mask": masks[i]} for i in range(self.num_envs)
        ]
        return observations

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        actions, self._actions = self._actions, None
        observations, rewards, terminated, truncated, infos = self.env.step(actions)
        dones = terminated | truncated
        board_infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        if dones.any():
            final_obs, final = infos["final_obs"], infos["final_info"]
            illegal = final["illegal_action"]
            for i in np.flatnonzero(dones):
                info = board_infos[i]
                info["terminal_observation"] = final_obs[i]
                info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
                info["winner"] = int(final["winner"][i])
                info["agent_mark"] = int(final["agent_mark"][i])
                if illegal[i]:
                    info["illegal_action"] = True
        return observations, rewards.astype(np.float32), dones, board_infos

    def action_masks(self) -> np.ndarray:
        """``(num_envs, columns)`` bool: the legal columns of every board."""
        return self.env.action_masks()

    def close(self) -> None:
        self.env.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.env.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self.env.render() or ())

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        return list(self._get_indices(indices))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        value = getattr(self.env, attr_name)
        return [value] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if len(self._indices(indices)) != self.num_envs:
            raise ValueError("attributes of the batched env are shared by every board")
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        picked = self._indices(indices)
        per_board = self.board_methods().get(method_name)
        if per_board is not None:
            return per_board(picked, *method_args, **method_kwargs)
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * len(picked)

    def board_methods(self) -> dict[str, Callable[..., list[Any]]]:
        """The methods :meth:`env_method` answers board by board, by name: each takes the boards
        picked, then the call's arguments, and returns one result per board. A subclass adds its
        own (:class:`connectx_train.opponents.BatchedOpponentSlots`)."""
        return {"action_masks": self._action_masks_of, "set_opponent": self._set_opponent_of}

    def _action_masks_of(self, boards: list[int]) -> list[Any]:
        return list(self.env.action_masks()[boards])

    def _set_opponent_of(self, boards: list[int], opponent: Any) -> list[None]:
        self.env.set_opponent(opponent, boards=boards)
        return [None] * len(boards)

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return [False] * len(self._indices(indices))
