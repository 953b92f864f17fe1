"""The one search thread of ``connectx serve``: a bounded queue of jobs, each with a deadline.

A request hands its search to :meth:`SearchWorker.run` and waits at most its timeout. Nothing
outlives that wait: a job whose request gave up is never started, and a running job runs inside
:func:`~connectx_gym.deadline.search_deadline` set to the same moment, so the searches stop
themselves (between chunks of nodes) and agents in child processes are killed
(:mod:`connectx_gym.serve.child`). At most ``max_waiting`` jobs wait behind the running one; a
request beyond that is refused at once (:class:`WorkerBusyError`).
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectx_gym.deadline import search_deadline

__all__ = ["MAX_MOVE_TIMEOUT", "SearchWorker", "WorkerBusyError"]

#: The longest a request may wait for its search, in seconds (``--move-timeout``): far beyond any
#: search the server allows, and well within what thread waits take.
MAX_MOVE_TIMEOUT = 3600.0


class WorkerBusyError(RuntimeError):
    """The queue of searches is full: the request is refused without waiting."""


@dataclass
class _Job:
    call: Callable[[], Any]
    deadline: float  # time.perf_counter() by which the job is answered or abandoned
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None
    abandoned: bool = False


class SearchWorker:
    """One daemon thread running searches one at a time (it never keeps the process alive)."""

    def __init__(self, max_waiting: int = 4) -> None:
        if max_waiting < 1:
            raise ValueError(f"max_waiting must be >= 1, got {max_waiting}")
        self.max_waiting = max_waiting
        self._waiting: collections.deque[_Job] = collections.deque()
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="search", daemon=True)
        self._thread.start()

    def run(self, call: Callable[[], Any], timeout: float) -> Any:
        """``call()``'s result, run on the search thread within ``timeout`` seconds of now.

        Raises :class:`WorkerBusyError` at once when ``max_waiting`` jobs already wait (or the
        worker is closed), ``TimeoutError`` when no answer came in time (the job is then
        abandoned: never started, or stopped by its deadline), and whatever ``call`` raised.
        """
        job = _Job(call, time.perf_counter() + timeout)
        with self._changed:
            if self._closed:
                raise WorkerBusyError("the server is stopping")
            if len(self._waiting) >= self.max_waiting:
                raise WorkerBusyError(
                    f"{self.max_waiting} searches are already waiting; try again shortly"
                )
            self._waiting.append(job)
            self._changed.notify()
        if not job.done.wait(timeout):
            with self._changed:
                job.abandoned = True
                if job in self._waiting:  # never started: its place is free at once
                    self._waiting.remove(job)
            raise TimeoutError(f"no answer within {timeout:g} s")
        if job.error is not None:
            raise job.error
        return job.result

    def close(self) -> None:
        """Refuse new jobs, drop the waiting ones and end the thread after its current job."""
        with self._changed:
            self._closed = True
            for job in self._waiting:
                job.error = WorkerBusyError("the server is stopping")
                job.done.set()
            self._waiting.clear()
            self._changed.notify()

    def _next(self) -> _Job | None:
        with self._changed:
            while not self._waiting and not self._closed:
                self._changed.wait()
            if self._closed:
                return None
            job = self._waiting.popleft()
            return None if job.abandoned else job

    def _serve(self) -> None:
        while not self._closed:
            job = self._next()
            if job is None:
                continue
            left = job.deadline - time.perf_counter()
            if left <= 0:  # its request may still be waiting: the deadline came first, by a hair
                job.error = TimeoutError("no answer before the deadline")
                job.done.set()
                continue
            try:
                with search_deadline(left):
                    job.result = job.call()
            except BaseException as error:  # handed to the waiting request, which re-raises it
                job.error = error
            finally:
                job.done.set()
