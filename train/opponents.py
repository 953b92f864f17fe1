"""The env side of training: the envs the agent plays in, and the opponent each env plays.

Each env is a ``ConnectX-v0`` wrapped in an :class:`OpponentSlot`: the trainer queues the opponent
of the env's next episode (a spec such as ``"onestep~0.25"`` or a policy), the slot builds it with
:func:`connectx_gym.registry.make_policy` at the next reset, labels finished episodes with
``info["opponent"]`` and times the opponent's moves. :func:`queue_opponents` hands out a rollout's
opponents; the vector envs answer it through ``env_method("queue_opponent", ...)`` and
``env_method("timing")``: SB3's ``DummyVecEnv`` and ``SubprocVecEnv`` by calling each env's slot,
and :class:`BatchedOpponentSlots` (``--vec-env batched``: every board in one
:class:`~connectx_train.vec_env.ConnectXVecEnv`) by answering for its boards itself.

Self-play snapshots are weights-only networks played with numpy; when the run trains on a GPU,
their batched logits run there instead (:class:`DeviceWeights`, with the torch kernels of
:mod:`connectx_train.networks`).
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import (
    DummyVecEnv,
    SubprocVecEnv,
    VecEnv,
    VecMonitor,
    subproc_vec_env,
)

from connectx_gym.batch import BoardBatch, choose_columns
from connectx_gym.bitboard import Board
from connectx_gym.env import ConnectXEnv
from connectx_gym.files import NumpyNetPolicy, load_weights
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy
from connectx_gym.weights import WeightsFile
from connectx_train.config import TrainConfig
from connectx_train.networks import TorchRun
from connectx_train.state import SELF_LABEL
from connectx_train.vec_env import ConnectXVecEnv

__all__ = [
    "BatchedOpponentSlots",
    "DeviceWeights",
    "OpponentSlot",
    "TimedBatchPolicy",
    "TimedPolicy",
    "close_env",
    "collect_timing",
    "make_vec_env",
    "queue_opponents",
    "snapshot_device",
]

#: SB3's subprocess worker, as its module defines it (:func:`_quiet_worker` runs it)
_SB3_WORKER = subproc_vec_env._worker


class TimedPolicy(Policy):
    """Delegates to ``policy`` and adds its thinking time and move count to ``ledger[label]``."""

    def __init__(self, policy: Policy, label: str, ledger: dict[str, list[float]]) -> None:
        super().__init__()
        self.policy, self.label, self.ledger = policy, label, ledger
        self.name = getattr(policy, "name", label)

    def act(self, board: Board, rng: np.random.Generator) -> int:
        started = time.perf_counter()
        column = self.policy.act(board, rng)
        self._count(time.perf_counter() - started, 1)
        return column

    def reset(self) -> None:
        self.policy.reset()

    def _count(self, seconds: float, moves: int) -> None:
        entry = self.ledger.setdefault(self.label, [0.0, 0])
        entry[0] += seconds
        entry[1] += moves


class TimedBatchPolicy(TimedPolicy):
    """A :class:`TimedPolicy` that answers a whole batch of boards in one call (the wrapped
    policy's batch method, or board by board) and counts one move per board."""

    def act_batch(self, batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
        started = time.perf_counter()
        columns = choose_columns(self.policy, batch, rng, f"opponent {self.label!r}")
        self._count(time.perf_counter() - started, len(batch))
        return columns


class OpponentSlot(gym.Wrapper[np.ndarray, np.int64, np.ndarray, np.int64]):
    """Lets the trainer queue the opponent of the next episode, labels finished episodes with
    ``info["opponent"]`` and times the opponent (see :meth:`timing`)."""

    def __init__(self, env: gym.Env[np.ndarray, np.int64], label: str = "random") -> None:
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
        return observation, float(reward), terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """The legal columns (for MaskablePPO)."""
        # the env under the wrappers is the ConnectX env (make_vec_env)
        return cast(ConnectXEnv, self.env.unwrapped).action_masks()

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponent included) and, per opponent label, the opponent's
        seconds and moves."""
        return {"env_seconds": self._env_seconds, "opponents": dict(self._ledger)}


class BatchedOpponentSlots(ConnectXVecEnv):
    """``config.n_envs`` boards of ``config``'s geometry in one batched env, answering the calls
    the trainer makes of the per-env :class:`OpponentSlot`:

    - ``env_method("queue_opponent", label, opponent, indices=[i])``: board ``i`` plays
      ``opponent``, reported as ``label``, from its next game. Calls are gathered and handed to
      the batched env in one ``set_opponent`` at the next step, so boards that queue the same
      spec (or the same policy object: one self-play snapshot) share one policy, answered in one
      batch call;
    - the infos of finished episodes carry ``info["opponent"]``;
    - ``env_method("timing")``: the batch has one clock, so the first index asked gets its
      totals and the others empty ones (summed by :func:`collect_timing`).

    All randomness comes from the batched env's generator, seeded at construction."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__(
            num_envs=config.n_envs,
            rows=config.rows,
            columns=config.columns,
            inarow=config.inarow,
            opponent="random",
            opening_plies=config.training_opening_plies(),
        )
        self.labels = ["random"] * self.num_envs  # the label of each board's current opponent
        self._next_labels: list[str | None] = [None] * self.num_envs
        self._queued: dict[int, tuple[str, str | Policy]] = {}
        self._ledger: dict[str, list[float]] = {}
        self._env_seconds = 0.0
        self.seed(config.seed * 1000)

    def board_methods(self) -> dict[str, Callable[..., list[Any]]]:
        return {
            **super().board_methods(),
            "queue_opponent": self._queue_opponent,
            "timing": self._timing,
        }

    def _queue_opponent(self, boards: list[int], label: str, opponent: str | Policy) -> list[None]:
        for board in boards:
            self._queued[board] = (label, opponent)
        return [None] * len(boards)

    def _timing(self, boards: list[int]) -> list[dict[str, Any]]:
        empty: dict[str, Any] = {"env_seconds": 0.0, "opponents": {}}
        return [self.timing()] + [empty] * (len(boards) - 1) if boards else []

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponents included) and, per opponent label, the opponents'
        seconds and moves."""
        opponents = {label: list(entry) for label, entry in self._ledger.items()}
        return {"env_seconds": self._env_seconds, "opponents": opponents}

    def _hand_over_queued(self) -> None:
        """Give the queued opponents to the batched env: one timed policy per distinct label and
        spec (or policy object), in one ``set_opponent`` call."""
        if not self._queued:
            return
        made: dict[tuple[str, Any], TimedBatchPolicy] = {}
        boards, policies = [], []
        for board, (label, opponent) in sorted(self._queued.items()):
            key = (label, opponent if isinstance(opponent, str) else id(opponent))
            if key not in made:
                made[key] = TimedBatchPolicy(make_policy(opponent), label, self._ledger)
            boards.append(board)
            policies.append(made[key])
            self._next_labels[board] = label
        self._queued.clear()
        self.env.set_opponent(policies, boards=boards)

    def _start_queued(self, boards: np.ndarray) -> None:
        """The queued labels of ``boards``, whose new games started, become current."""
        for board in boards:
            label = self._next_labels[board]
            if label is not None:
                self.labels[board], self._next_labels[board] = label, None

    def reset(self) -> Any:
        started = time.perf_counter()
        self._hand_over_queued()
        observations = super().reset()
        self._start_queued(np.arange(self.num_envs))
        self._env_seconds += time.perf_counter() - started
        return observations

    def step_wait(self) -> Any:
        started = time.perf_counter()
        self._hand_over_queued()  # from each board's next game, which may start in this step
        observations, rewards, dones, infos = super().step_wait()
        ended = np.flatnonzero(dones)
        for board in ended:
            infos[board]["opponent"] = self.labels[board]
        self._start_queued(ended)
        self._env_seconds += time.perf_counter() - started
        return observations, rewards, dones, infos


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
    (``batched``: :class:`BatchedOpponentSlots` in a ``VecMonitor``)."""
    if config.vec_env == "batched":
        return VecMonitor(BatchedOpponentSlots(config))
    factories = [_env_factory(config, i) for i in range(config.n_envs)]
    if config.vec_env == "dummy":
        return DummyVecEnv(factories)
    # Workers ignore Ctrl-C and SIGTERM (the disposition survives exec), so that the main process
    # can save a checkpoint and then close them.
    stopping = (signal.SIGINT, signal.SIGTERM)
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in stopping}
    try:
        with _quiet_workers():
            return SubprocVecEnv(factories)
    except Exception:
        if config.vec_env == "subproc":
            raise
        return DummyVecEnv(factories)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _quiet_worker(*args: Any) -> None:
    """SB3's subprocess worker, in a process that imported ``connectx_train`` first: SB3 is then
    imported there without the unmaintained ``gym`` and its banner
    (:func:`connectx_train.sb3_files.install_without_gym`), as in the main process."""
    _SB3_WORKER(*args)


@contextlib.contextmanager
def _quiet_workers() -> Iterator[None]:
    """Within the block, the ``SubprocVecEnv`` made starts its workers with :func:`_quiet_worker`
    (a fresh worker imports the function it runs before anything else: here, this package)."""
    subproc_vec_env._worker = _quiet_worker  # type: ignore[assignment]
    try:
        yield
    finally:
        subproc_vec_env._worker = _SB3_WORKER


def snapshot_device(device: torch.device) -> torch.device | None:
    """Where a run on ``device`` answers its snapshots' batches: the GPU it trains on, or
    ``None`` (numpy) on a CPU, where a batched env asks each snapshot for a board or two a step."""
    return device if device.type == "cuda" else None


class DeviceWeights(WeightsFile):
    """``weights`` whose batched :meth:`logits` run on ``device`` (float32, inference mode);
    single boards (``act``, ``scores``) stay on numpy."""

    tensors: dict[str, torch.Tensor]
    device: torch.device

    @classmethod
    def of(cls, weights: WeightsFile, device: torch.device) -> DeviceWeights:
        """``weights`` (already checked when read) with its arrays on ``device``."""
        moved = cls.__new__(cls)
        moved.__dict__.update(weights.__dict__)
        moved.tensors = {
            name: torch.tensor(value, device=device) for name, value in weights.params.items()
        }
        moved.device = device
        return moved

    def logits(self, planes: np.ndarray) -> np.ndarray:
        """Raw logits for a batch ``(N, 2, rows, columns)`` of observations."""
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(planes, dtype=np.float32)).to(self.device)
            return TorchRun(self.tensors.__getitem__, {}).run(self.layers, x).cpu().numpy()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the plain :class:`WeightsFile` (numpy), as a subprocess env's workers
        receive their opponents."""
        return WeightsFile, (self.geometry, self.layers, self.params)


def queue_opponents(
    env: VecEnv,
    mixture: Sequence[tuple[str, float]],
    snapshots: Sequence[str | Path],
    rng: np.random.Generator,
    weights_cache: dict[str, WeightsFile] | None = None,
    snapshot_device: torch.device | None = None,
) -> None:
    """Draw each env's opponent for its next episodes from ``mixture`` (``(label, weight)``; label
    :data:`~connectx_train.state.SELF_LABEL` plays a snapshot drawn from ``snapshots``, the
    pool's weights files).

    ``weights_cache`` (path -> weights) spares reading a snapshot's file again at every rollout;
    paths no longer in ``snapshots`` are dropped from it. With ``snapshot_device`` the snapshots'
    batches run there (:class:`DeviceWeights`).
    """
    labels = [label for label, _ in mixture]
    probabilities = np.array([p for _, p in mixture])
    probabilities /= probabilities.sum()
    paths = [str(path) for path in snapshots]
    cache = {} if weights_cache is None else weights_cache
    for stale in set(cache) - set(paths):
        del cache[stale]
    loaded: dict[str, NumpyNetPolicy] = {}  # one policy per snapshot: a batched env asks it once
    for index in range(env.num_envs):
        label = labels[rng.choice(len(labels), p=probabilities)]
        opponent: str | Policy = label
        if label == SELF_LABEL:
            snapshot = paths[rng.integers(len(paths))]
            if snapshot not in loaded:
                if snapshot not in cache:
                    weights = load_weights(snapshot)
                    if snapshot_device is not None:
                        weights = DeviceWeights.of(weights, snapshot_device)
                    cache[snapshot] = weights
                loaded[snapshot] = NumpyNetPolicy(cache[snapshot], deterministic=False, name="self")
            opponent = loaded[snapshot]
        env.env_method("queue_opponent", label, opponent, indices=[index])


def collect_timing(env: VecEnv) -> dict[str, Any]:
    """The envs' :meth:`OpponentSlot.timing`, summed (and the ``cluster`` of Ray actors that
    :class:`connectx_train.ray_rollouts.SlicedVecEnv` names)."""
    opponents: dict[str, list[float]] = {}
    env_seconds = 0.0
    timings = env.env_method("timing")
    named = [timing["cluster"] for timing in timings if "cluster" in timing]
    for timing in timings:
        env_seconds += timing["env_seconds"]
        for label, (seconds, moves) in timing["opponents"].items():
            entry = opponents.setdefault(label, [0.0, 0])
            entry[0] += seconds
            entry[1] += moves
    cluster = {"cluster": named[0]} if named else {}
    return {"env_seconds": env_seconds, "opponents": opponents, **cluster}


def close_env(env: VecEnv) -> None:
    """Close ``env``, ignoring workers that already died (a signal to the whole group)."""
    with contextlib.suppress(EOFError, BrokenPipeError, OSError):
        env.close()
