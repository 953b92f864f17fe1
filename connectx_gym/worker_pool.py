"""Worker processes that end with their parent, however the parent ends.

A ``ProcessPoolExecutor``'s workers outlive a parent killed with SIGKILL and go on computing
their tasks (a killed run's labelling, for many minutes). :func:`worker_pool` makes a pool whose
workers

- ask Linux to kill them when their parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), and
  check the parent's process id once that is set (the parent may have died before);
- watch the parent's process id from a thread elsewhere (once a second), the same guard where
  ``prctl`` does not exist;
- ignore Ctrl-C (the parent, which gets it too, ends them), so no worker prints a traceback;

and terminates its workers at once when the block is left by an exception (Ctrl-C, SIGTERM
turned into ``KeyboardInterrupt``, a closed generator), instead of waiting for their tasks.
:func:`ends_with_this_process` gives a ``subprocess.Popen`` child the same request to Linux.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor

__all__ = [
    "die_with_parent",
    "ends_with_this_process",
    "signal_at_parent_death",
    "worker_pool",
]

#: ``prctl`` option that sets the signal a process gets when its parent dies (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: seconds between two looks at the parent's process id
WATCH_SECONDS = 1.0
#: seconds :func:`terminate` waits for a pool's manager thread once the workers are gone
MANAGER_JOIN_SECONDS = 10.0


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux), or None."""
    if not sys.platform.startswith("linux"):
        return None
    with contextlib.suppress(OSError, AttributeError):
        prctl: Callable[..., int] = ctypes.CDLL(
            ctypes.util.find_library("c") or None, use_errno=True
        ).prctl
        return prctl
    return None


def signal_at_parent_death(signum: int) -> bool:
    """Ask Linux to send this process ``signum`` when its parent ends (``PR_SET_PDEATHSIG``; the
    request outlives ``exec``); False where it cannot be asked."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


def ends_with_this_process(signum: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``signum`` when this
    process ends, however it ends (Linux), and exits at once if it already has. libc is looked
    up here, before the fork, not in the child. Linux sends the signal when the thread that
    started the child ends: start it from one that lives as long (the main thread)."""
    parent = os.getpid()
    _prctl()

    def preexec() -> None:
        signal_at_parent_death(signum)
        if os.getppid() != parent:  # ended before prctl took effect
            os._exit(1)

    return preexec


def die_with_parent(parent: int) -> None:
    """Make this (worker) process end when process ``parent``, its parent, ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a forked worker inherits the parent's Python handlers (a trainer's or Ray's SIGTERM handler
    # would turn the pool's SIGTERM into an exception that the worker loop answers and survives)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal_at_parent_death(signal.SIGKILL)
    if os.getppid() != parent:  # died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os._exit(1)


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A ``ProcessPoolExecutor`` of ``workers`` processes that die with this one; left normally,
    the block waits for the tasks, left by an exception it terminates the workers."""
    pool = ProcessPoolExecutor(
        max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),)
    )
    try:
        yield pool
    except BaseException:
        terminate(pool)
        raise
    pool.shutdown(wait=True)


def terminate(pool: ProcessPoolExecutor) -> None:
    """Cancel the pool's pending tasks, end its workers now and wait for the pool's manager
    thread to see them gone."""
    # the manager thread closes its wake-up pipe as it ends, and the interpreter's exit hook
    # writes to that pipe without a lock: an exit while the thread is ending would print a
    # traceback ("Bad file descriptor"), so the thread is waited for here
    manager: threading.Thread | None = getattr(pool, "_executor_manager_thread", None)
    if hasattr(pool, "terminate_workers"):  # Python 3.14
        pool.terminate_workers()
    else:
        _end_processes(pool)
    if manager is not None:
        manager.join(timeout=MANAGER_JOIN_SECONDS)


def _end_processes(pool: ProcessPoolExecutor) -> None:
    # the executor keeps its processes by pid; there is no public way to end them before 3.14
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.terminate()
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(timeout=5)
        with contextlib.suppress(OSError, ValueError, AssertionError):
            if process.is_alive():  # SIGTERM blocked or not yet delivered: no second chance
                process.kill()
                process.join(timeout=5)
