"""The rollouts' boards cut into env slices (``--env-slices``), and where the slices run.

:func:`slice_bounds` cuts the boards into runs of consecutive boards; :class:`EnvSlice` holds one
run as a :class:`~connectx_train.opponents.BatchedOpponentSlots` seeded at its first board, and
answers a step (with the opponents queued since the last call) in one call. The slices run in
this process (:class:`LocalSlices`) or as Ray actors, one CPU each, spread over the cluster's
nodes (:class:`RaySlices`); both take calls by :meth:`submit` and give answers by :meth:`result`,
which for an actor waits a bounded time and raises :class:`SliceLostError` when the actor is
lost. :class:`connectx_train.ray_rollouts.SlicedVecEnv` is the ``VecEnv`` over them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from connectx_gym.files import one_blas_thread
from connectx_train.config import TrainConfig
from connectx_train.opponents import BatchedOpponentSlots

__all__ = [
    "EnvSlice",
    "LocalSlices",
    "Queued",
    "RaySlices",
    "SliceLostError",
    "SliceReset",
    "SliceStep",
    "actor_env",
    "slice_bounds",
    "slice_cpus",
]

#: a slice's queued opponents: (board of the slice, label, opponent spec or policy)
Queued = list[tuple[int, str, Any]]


class SliceLostError(Exception):
    """A slice's actor did not answer: ``reason`` (one line); ``hung`` when it timed out, ``dead``
    when Ray holds it dead for good (asked after a loss: its restarts spent)."""

    def __init__(self, reason: str, hung: bool = False, dead: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.hung, self.dead = reason, hung, dead


def slice_bounds(n_envs: int, slices: int) -> list[tuple[int, int]]:
    """``(start, stop)`` of each of ``slices`` runs of consecutive boards among ``n_envs``, the
    first ``n_envs % slices`` one board longer."""
    if not 1 <= slices <= n_envs:
        raise ValueError(f"env slices must be between 1 and n_envs ({n_envs}), got {slices}")
    sizes = [n_envs // slices + (k < n_envs % slices) for k in range(slices)]
    stops = np.cumsum(sizes).tolist()
    return [(stop - size, stop) for size, stop in zip(sizes, stops, strict=True)]


@dataclass
class SliceStep:
    """What one slice answers to a step: its boards' observations, rewards and ends of games (as
    :class:`~connectx_train.vec_env.ConnectXVecEnv` returns them; the infos of the boards whose
    game ended, by board of the slice) and the action masks of the next step."""

    observations: np.ndarray
    rewards: np.ndarray
    dones: np.ndarray
    ended: list[tuple[int, dict[str, Any]]]
    masks: np.ndarray


@dataclass
class SliceReset:
    """What one slice answers to a reset: first observations, masks and reset infos."""

    observations: np.ndarray
    masks: np.ndarray
    infos: list[dict[str, Any]]


class EnvSlice:
    """Boards ``start`` to ``stop`` (excluded) of the run's batched env with their opponents: a
    :class:`~connectx_train.opponents.BatchedOpponentSlots` of ``stop - start`` boards seeded
    with ``config.seed * 1000 + start``. ``threads`` (0: unchanged) sets numba's threads, which
    the searching opponents use (on a Ray actor: the CPUs it holds, at most the node's cores),
    and holds numpy's BLAS to one thread."""

    def __init__(self, config: TrainConfig, start: int, stop: int, threads: int = 0) -> None:
        self._limits = contextlib.ExitStack()
        if threads:
            import numba

            most = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
            numba.set_num_threads(min(threads, most))
            # numpy's BLAS on one thread while the slice lives, as in the learner's process (its
            # thread_pools): the self-play snapshots' matrix products are small, and BLAS threads
            # spin after each
            self._limits.enter_context(one_blas_thread())
        self.env = BatchedOpponentSlots(dataclasses.replace(config, n_envs=stop - start))
        self.env.seed(config.seed * 1000 + start)

    def reset(self, seed: int | None, options: dict[str, Any] | None, queued: Queued) -> SliceReset:
        """Queue ``queued``, then reset every board (from ``seed`` when given)."""
        self._queue(queued)
        if seed is not None:
            self.env.seed(seed)
        if options:
            self.env.set_options(options)
        observations = self.env.reset()
        return SliceReset(observations, self.env.action_masks(), self.env.reset_infos)

    def step(self, actions: np.ndarray, queued: Queued) -> SliceStep:
        """Queue ``queued``, then play ``actions`` (one per board)."""
        self._queue(queued)
        self.env.step_async(actions)
        observations, rewards, dones, infos = self.env.step_wait()
        ended = [(int(board), infos[board]) for board in np.flatnonzero(dones)]
        return SliceStep(observations, rewards, dones, ended, self.env.action_masks())

    def _queue(self, queued: Queued) -> None:
        for board, label, opponent in queued:
            self.env.env_method("queue_opponent", label, opponent, indices=[board])

    def env_method(
        self, name: str, args: Sequence[Any], kwargs: dict[str, Any], boards: list[int]
    ) -> list[Any]:
        """The slice's ``env_method(name, *args, indices=boards, **kwargs)``."""
        return self.env.env_method(name, *args, indices=boards, **kwargs)

    def get_attr(self, name: str) -> Any:
        """An attribute of the slice's batched env."""
        return self.env.get_attr(name, [0])[0]

    def set_attr(self, name: str, value: Any) -> None:
        self.env.set_attr(name, value)

    def close(self) -> None:
        self.env.close()
        self._limits.close()


class LocalSlices:
    """The slices in this process: each call runs at once, and its answer is its handle."""

    cluster: str | None = None

    def __init__(self, config: TrainConfig, bounds: list[tuple[int, int]]) -> None:
        self.slices = [EnvSlice(config, start, stop) for start, stop in bounds]

    def submit(self, index: int, method: str, *args: Any) -> Any:
        return getattr(self.slices[index], method)(*args)

    def result(self, index: int, handle: Any, seconds: float) -> Any:
        return handle

    def revive(self, index: int, hung: bool) -> None:
        raise AssertionError("a slice in this process is never lost")  # pragma: no cover

    def close(self) -> None:
        for env_slice in self.slices:
            env_slice.close()


class RaySlices:
    """The slices as Ray actors on the cluster at ``address`` (``"local"``: an instance started
    here, stopped by :meth:`close`), spread over the nodes, each holding an equal share of the
    cluster's CPUs (:func:`slice_cpus`) and running numba's threads on them; Ray restarts a lost
    one up to ``restarts`` times. A wrong address, or a cluster with fewer CPUs than slices, is
    a one-line error."""

    def __init__(
        self, config: TrainConfig, bounds: list[tuple[int, int]], address: str, restarts: int
    ) -> None:
        from connectx_baselines.teacher_ray import ray_session

        self._session = contextlib.ExitStack()
        self.ray = ray = self._session.enter_context(ray_session(address))
        try:
            nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
            node_cpus = [int(node.get("CPU", 0)) for node in nodes]
            cpus, gpus = sum(node_cpus), sum(int(node.get("GPU", 0)) for node in nodes)
            if cpus < len(bounds):
                raise ValueError(
                    f"--env-slices {len(bounds)} needs {len(bounds)} CPUs on the Ray cluster (one "
                    f"an actor); it has {cpus}: lower --env-slices or add nodes"
                )
            share = slice_cpus(node_cpus, len(bounds))
            where = "a Ray instance on this machine" if address == "local" else address
            self.cluster = (
                f"{_count(len(bounds), 'env slice')} as Ray actors of {_count(share, 'CPU')} on "
                f"{where}: {_count(len(nodes), 'node')}, {_count(cpus, 'CPU')}, "
                f"{_count(gpus, 'GPU')}"
            )
            actor = ray.remote(
                num_cpus=share, max_restarts=restarts, max_task_retries=0,
                scheduling_strategy="SPREAD", runtime_env={"env_vars": actor_env()},
            )(EnvSlice)  # fmt: skip
            self.actors = [actor.remote(config, start, stop, share) for start, stop in bounds]
        except BaseException:
            self._session.close()
            raise

    def submit(self, index: int, method: str, *args: Any) -> Any:
        return getattr(self.actors[index], method).remote(*args)

    def result(self, index: int, handle: Any, seconds: float) -> Any:
        """The answer of ``handle``, within ``seconds``; an error raised inside the slice is raised
        here as it was, a lost or silent actor raises :class:`SliceLostError`."""
        exceptions = self.ray.exceptions
        try:
            return self.ray.get(handle, timeout=seconds)
        except exceptions.RayTaskError as failure:  # an error of the env or an opponent
            cause = failure.cause
            raise (
                cause if isinstance(cause, Exception) else RuntimeError(_one_line(failure))
            ) from None
        except exceptions.RayError as failure:
            hung = isinstance(failure, exceptions.GetTimeoutError)
            dead = isinstance(failure, exceptions.ActorDiedError)
            raise SliceLostError(_one_line(failure), hung, dead) from None

    def revive(self, index: int, hung: bool) -> None:
        """Make Ray restart the actor of slice ``index`` when it hung (a dead one restarts)."""
        if hung:
            with contextlib.suppress(Exception):
                self.ray.kill(self.actors[index], no_restart=False)

    def close(self) -> None:
        """End the actors; stop the Ray instance if it was started here."""
        try:
            for actor in getattr(self, "actors", ()):
                with contextlib.suppress(Exception):
                    self.ray.kill(actor)
        finally:
            self._session.close()


def actor_env() -> dict[str, str]:
    """Environment variables of the slices' actors: their OpenMP threads (the opponents' searches)
    sleep rather than spin when they are out of work, as a step ends, so that they leave the
    cores to the learner where both share a machine (a local instance: each process's spinning
    threads slowed the other's work). A value the user set is kept."""
    return {"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}


def slice_cpus(node_cpus: Sequence[int], slices: int) -> int:
    """The CPUs of each of ``slices`` actors on nodes of ``node_cpus`` CPUs: the largest equal
    share of all the CPUs with which every actor fits on a node, at least 1 (one slice on a
    local instance holds the machine, as the env of a run without Ray does)."""
    share = sum(node_cpus) // slices
    while share > 1 and sum(cpus // share for cpus in node_cpus) < slices:
        share -= 1
    return max(share, 1)


def _count(count: int, what: str) -> str:
    return f"{count} {what}{'s' * (count != 1)}"


def _one_line(error: BaseException) -> str:
    """The error's class and the first sentence of its message (Ray's go on for lines)."""
    lines = str(error).strip().splitlines()
    first = lines[0].split(". ")[0] if lines else ""
    return f"{type(error).__name__}: {first}".rstrip(": ")
