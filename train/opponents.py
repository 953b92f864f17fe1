"""The env side of training: opponent slots in the vectorised envs, timed opponents.

Each env is a ``ConnectX-v0`` wrapped in an :class:`OpponentSlot`: the trainer queues the opponent
of the env's next episode (a spec such as ``"onestep~0.25"`` or a policy), the slot builds it with
:func:`connectx_gym.registry.make_policy` at the next reset, labels finished episodes with
``info["opponent"]`` and times the opponent's moves. :func:`queue_opponents` is the one call a
callback makes to hand out a rollout's opponents; a batched vector env only needs to answer the
same ``env_method("queue_opponent", ...)`` and ``env_method("timing")`` calls, as
:class:`~connectx_train.batched.BatchedOpponentSlots` does (``--vec-env batched``).
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecMonitor

from connectx_gym.env import ConnectXEnv
from connectx_gym.files import NumpyNetPolicy, load_weights
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.curriculum import SELF_LABEL
from connectx_train.device_snapshots import DeviceWeights
from connectx_train.timed_policy import TimedPolicy

__all__ = [
    "OpponentSlot",
    "close_env",
    "collect_timing",
    "make_vec_env",
    "queue_opponents",
]


class OpponentSlot(gym.Wrapper):
    """Lets the trainer queue the opponent of the next episode, labels finished episodes with
    ``info["opponent"]`` and times the opponent (see :meth:`timing`)."""

    def __init__(self, env: gym.Env, label: str = "random") -> None:
        super().__init__(env)
        self.label = label
        self._pending: tuple[str, Any] | None = (label, label)
        self._ledger: dict[str, list[float]] = {}
        self._env_seconds = 0.0

    def queue_opponent(self, label: str, opponent: str | Policy) -> None:
        """Play ``opponent`` (a spec or policy), reported as ``label``, from the next reset on."""
        self._pending = (label, opponent)

    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        started = time.perf_counter()
        if self._pending is not None:
            self.label, opponent = self._pending
            self._pending = None
            timed = TimedPolicy(make_policy(opponent), self.label, self._ledger)
            kwargs["options"] = {**(kwargs.get("options") or {}), "opponent": timed}
        result = self.env.reset(**kwargs)
        self._env_seconds += time.perf_counter() - started
        return result

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        started = time.perf_counter()
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["opponent"] = self.label
        self._env_seconds += time.perf_counter() - started
        return observation, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """The legal columns (for MaskablePPO)."""
        return self.env.unwrapped.action_masks()

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponent included) and, per opponent label, the opponent's
        seconds and moves."""
        return {"env_seconds": self._env_seconds, "opponents": dict(self._ledger)}


def _env_factory(config: TrainConfig, index: int) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        env = ConnectXEnv(
            config.rows,
            config.columns,
            config.inarow,
            opponent="random",
            opening_plies=config.training_opening_plies(),
        )
        env.reset(seed=config.seed * 1000 + index)
        return Monitor(OpponentSlot(env))

    return make


def make_vec_env(config: TrainConfig) -> VecEnv:
    """``config.n_envs`` envs in one process (``dummy``) or one each (``subproc``; ``auto`` falls
    back to ``dummy`` when subprocesses cannot start), or all boards in one batched env
    (``batched``: :class:`~connectx_train.batched.BatchedOpponentSlots` in a ``VecMonitor``)."""
    if config.vec_env == "batched":
        from connectx_train.batched import BatchedOpponentSlots

        return VecMonitor(BatchedOpponentSlots(config))
    factories = [_env_factory(config, i) for i in range(config.n_envs)]
    if config.vec_env == "dummy":
        return DummyVecEnv(factories)
    # Workers ignore Ctrl-C and SIGTERM (the disposition survives exec), so that the main process
    # can save a checkpoint and then close them.
    stopping = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in stopping}
    try:
        return SubprocVecEnv(factories)
    except Exception:
        if config.vec_env == "subproc":
            raise
        return DummyVecEnv(factories)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def queue_opponents(
    env: VecEnv,
    mixture: Sequence[tuple[str, float]],
    snapshots: Sequence[str],
    rng: np.random.Generator,
    weights_cache: dict[str, WeightsFile] | None = None,
    snapshot_device: torch.device | None = None,
) -> None:
    """Draw each env's opponent for its next episodes from ``mixture`` (``(label, weight)``; label
    :data:`~connectx_train.curriculum.SELF_LABEL` plays a snapshot drawn from ``snapshots``).

    ``weights_cache`` (path -> weights) spares reading a snapshot's file again at every rollout;
    paths no longer in ``snapshots`` are dropped from it. With ``snapshot_device`` the snapshots'
    batches run there (:class:`~connectx_train.device_snapshots.DeviceWeights`).
    """
    labels = [label for label, _ in mixture]
    probabilities = np.array([p for _, p in mixture])
    probabilities /= probabilities.sum()
    cache = {} if weights_cache is None else weights_cache
    for stale in set(cache) - set(snapshots):
        del cache[stale]
    loaded: dict[str, NumpyNetPolicy] = {}  # one policy per snapshot: a batched env asks it once
    for index in range(env.num_envs):
        label = labels[rng.choice(len(labels), p=probabilities)]
        opponent: str | Policy = label
        if label == SELF_LABEL:
            snapshot = snapshots[rng.integers(len(snapshots))]
            if snapshot not in loaded:
                if snapshot not in cache:
                    weights = load_weights(snapshot)
                    if snapshot_device is not None:
                        weights = DeviceWeights.of(weights, snapshot_device)
                    cache[snapshot] = weights
                weights = cache[snapshot]
                loaded[snapshot] = NumpyNetPolicy(weights, deterministic=False, name="self")
            opponent = loaded[snapshot]
        env.env_method("queue_opponent", label, opponent, indices=[index])


def collect_timing(env: VecEnv) -> dict[str, Any]:
    """The envs' :meth:`OpponentSlot.timing`, summed."""
    opponents: dict[str, list[float]] = {}
    env_seconds = 0.0
    for timing in env.env_method("timing"):
        env_seconds += timing["env_seconds"]
        for label, (seconds, moves) in timing["opponents"].items():
            entry = opponents.setdefault(label, [0.0, 0])
            entry[0] += seconds
            entry[1] += moves
    return {"env_seconds": env_seconds, "opponents": opponents}


def close_env(env: VecEnv) -> None:
    """Close ``env``, ignoring workers that already died (a signal to the whole group)."""
    with contextlib.suppress(EOFError, BrokenPipeError, OSError):
        env.close()
