"""Teacher positions labelled as Ray tasks, one task per chunk (``connectx train --ray``).

:func:`run_chunks_on_ray` is the Ray backend of :func:`connectx_baselines.teacher_labels.
run_chunks`: every chunk is a Ray task running :func:`~connectx_baselines.teacher_labels.
label_chunk` on the same arguments as a local process would, so the labels do not depend on the
cluster (its size, its nodes, the order chunks finish in: :func:`~connectx_baselines.
teacher_labels.label_chunks` puts them in chunk order). Faults:

- a task lost with its worker process or its node is run again elsewhere, up to ``retries``
  times (Ray's ``max_retries``; a chunk's result does not depend on where it runs);
- a chunk that fails for good (retries spent, an error inside the labelling, the cluster gone)
  and a cluster without a CPU for ``no_cpu_seconds`` raise :class:`ChunkLostError` at
  once; the chunks done before are yielded first (and cached
  by the caller), so that a later run labels only the rest;
- each wait is bounded (:data:`POLL_SECONDS`), so ``stop()`` is seen while long chunks run; on a
  stop, an error or an interrupt (Ctrl-C, or SIGTERM where the caller turns it into one) the
  tasks in flight are cancelled and their workers ended, and a Ray instance started here is
  stopped with every process it started.

One start for a run: within :func:`one_ray_start`, the instance that a :func:`ray_session`
starts outlives that session for the next one to use (``connectx train --ray``'s labelling then
its rollouts' actors), and is stopped once, by the last session that has it.
"""

from __future__ import annotations

import contextlib
import contextvars
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from connectx_baselines.teacher_cache import ChunkResult
from connectx_gym.ray_executor import RayExecutor, import_ray

__all__ = [
    "LOCAL",
    "NO_CPU_SECONDS",
    "POLL_SECONDS",
    "RETRIES",
    "ChunkLostError",
    "one_ray_start",
    "ray_session",
    "run_chunks_on_ray",
]

#: the address that starts a Ray instance on this machine (stopped when the labelling ends)
LOCAL = "local"
#: times a chunk lost with its worker or node is run again (Ray's ``max_retries``)
RETRIES = 3
#: seconds of each wait for a chunk, between two looks at ``stop()`` and at the cluster
POLL_SECONDS = 1.0
#: seconds the cluster may have no CPU (its nodes gone) before the labelling stops
NO_CPU_SECONDS = 60.0


class ChunkLostError(RuntimeError):
    """Chunk ``index`` could not be labelled (``reason``); ``done`` of ``total`` chunks were (set
    by :func:`connectx_baselines.teacher_labels.label_chunks`, with where they are ``kept``)."""

    def __init__(self, index: int, reason: str, done: int = 0, total: int = 0, kept: str = ""):
        counts = f"; labelling stopped with {done} of {total} chunks done{kept}" if total else ""
        super().__init__(f"chunk {index} could not be labelled: {reason}{counts}")
        self.index, self.reason, self.done, self.total = index, reason, done, total


class _Kept:
    """The Ray instance kept between the sessions of a :func:`one_ray_start` block."""

    def __init__(self) -> None:
        self.executor: RayExecutor | None = None  # started, and no session has it now
        self.open = True


_KEPT: contextvars.ContextVar[_Kept | None] = contextvars.ContextVar("ray_kept", default=None)


@contextlib.contextmanager
def one_ray_start() -> Iterator[None]:
    """Within this block, a Ray instance that :func:`ray_session` starts is not stopped when that
    session ends: the next session uses it, so a run's labelling and rollouts share one start.
    It is stopped by the session that has it when the block ends (when that one ends), or by
    the block's end when none has it then."""
    kept = _Kept()
    token = _KEPT.set(kept)
    try:
        yield
    finally:
        _KEPT.reset(token)
        kept.open = False
        executor, kept.executor = kept.executor, None
        if executor is not None:
            executor.close()


@contextlib.contextmanager
def ray_session(address: str) -> Iterator[Any]:
    """The ``ray`` module, joined to the cluster at ``address`` (:data:`LOCAL`: a Ray instance
    started on this machine and stopped on the way out, or kept for the next session within
    :func:`one_ray_start`; a Ray already initialised in this process is used as it is). A wrong
    address is a one-line ``ValueError`` or ``ConnectionError`` (:class:`connectx_gym.
    ray_executor.RayExecutor`). The caller's SIGTERM handler (a run's, that stops it in order) is
    put back over the one ``ray.init`` installs."""
    kept = _KEPT.get()
    executor = None
    if kept is not None:
        executor, kept.executor = kept.executor, None
    if executor is None:
        executor = _start(address)
    try:
        yield import_ray()
    finally:
        if kept is not None and kept.open:
            kept.executor = executor
        else:
            executor.close()


def _start(address: str) -> RayExecutor:
    """Ray started or joined at ``address`` (see :func:`ray_session`), the caller's SIGTERM
    handler put back."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main_thread else None
    try:
        return RayExecutor(address=None if address == LOCAL else address)
    finally:
        if previous not in (None, signal.SIG_DFL):  # Ray's handler beats ending uncleaned
            signal.signal(signal.SIGTERM, previous)


def run_chunks_on_ray(
    label: Callable[..., ChunkResult],
    jobs: dict[int, tuple[Any, ...]],
    address: str,
    stop: Callable[[], bool] = lambda: False,
    *,
    retries: int | None = None,
    no_cpu_seconds: float | None = None,
) -> Generator[tuple[int, ChunkResult], None, None]:
    """``(index, label(*job))`` for each of ``jobs`` (``label`` is
    :func:`~connectx_baselines.teacher_labels.label_chunk`), as each is done, labelled by Ray
    tasks on the cluster at ``address`` (see :func:`ray_session`). Once ``stop()`` is true the
    tasks in flight are cancelled and the iteration ends; a chunk that cannot be labelled raises
    :class:`ChunkLostError` (see the module docstring). ``retries`` and ``no_cpu_seconds`` default
    to :data:`RETRIES` and :data:`NO_CPU_SECONDS`."""
    if not jobs:
        return
    with ray_session(address) as ray:
        retries = RETRIES if retries is None else retries
        no_cpu = NO_CPU_SECONDS if no_cpu_seconds is None else no_cpu_seconds
        yield from _labelled(ray, label, jobs, stop, retries, no_cpu)


def _labelled(
    ray: Any,
    label: Callable[..., ChunkResult],
    jobs: dict[int, tuple[Any, ...]],
    stop: Callable[[], bool],
    retries: int,
    no_cpu_seconds: float,
) -> Generator[tuple[int, ChunkResult], None, None]:
    task = ray.remote(label).options(num_cpus=1, max_retries=retries)
    running: dict[Any, int] = {}
    try:
        shared: dict[int, Any] = {}  # each excluded set once in the object store, not per task
        for index, (settings, seed, count, excluded) in jobs.items():
            if stop():
                return
            if id(excluded) not in shared:
                shared[id(excluded)] = ray.put(excluded)
            running[task.remote(settings, seed, count, shared[id(excluded)])] = index
        without_cpu_since: float | None = None
        while running:
            lost: ChunkLostError | None = None
            for ref in sorted(_wait(ray, running), key=running.__getitem__):
                try:
                    result = _result(ray, ref, running[ref])
                except ChunkLostError as error:  # raised once the others finished are yielded
                    lost = lost or error
                    continue
                yield running.pop(ref), result
            if lost is not None:
                raise lost
            if stop():
                return
            if _cluster_cpus(ray, running) >= 1:
                without_cpu_since = None
            elif without_cpu_since is None:
                without_cpu_since = time.monotonic()
            elif time.monotonic() - without_cpu_since > no_cpu_seconds:
                raise ChunkLostError(
                    min(running.values()),
                    f"the Ray cluster has had no CPU for {no_cpu_seconds:g} s (its nodes left)",
                )
    finally:
        for ref in running:  # in flight or queued: cancelled, their worker processes ended
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)


def _wait(ray: Any, running: dict[Any, int]) -> list[Any]:
    """The tasks of ``running`` finished within :data:`POLL_SECONDS` (maybe none)."""
    try:
        finished, _ = ray.wait(
            list(running), num_returns=len(running), timeout=POLL_SECONDS, fetch_local=False
        )
    except ray.exceptions.RayError as failure:
        raise ChunkLostError(min(running.values()), _one_line(failure)) from None
    return list(finished)


def _result(ray: Any, ref: Any, index: int) -> ChunkResult:
    try:
        return ray.get(ref, timeout=max(60.0, 10 * POLL_SECONDS))
    except (ray.exceptions.RayError, TimeoutError) as failure:
        raise ChunkLostError(index, _one_line(failure)) from None


def _cluster_cpus(ray: Any, running: dict[Any, int]) -> float:
    try:
        return float(ray.cluster_resources().get("CPU", 0))
    except Exception as failure:  # the cluster's control service is gone
        raise ChunkLostError(min(running.values()), _one_line(failure)) from None


def _one_line(error: BaseException) -> str:
    """The error's class and the first sentence of its message (Ray's go on for lines)."""
    lines = str(error).strip().splitlines()
    first = lines[0].split(". ")[0] if lines else ""
    return f"{type(error).__name__}: {first}".rstrip(": ")
