"""Worker processes that end with their parent, however the parent ends.

A ``ProcessPoolExecutor``'s workers outlive a parent killed with SIGKILL (labelling workers of a
killed run went on computing for 36 minutes). :func:`worker_pool` makes a pool whose workers

- ask Linux to kill them when their parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), and
  check the parent's process id once that is set (the parent may have died before);
- watch the parent's process id from a thread elsewhere (once a second), the same guard where
  ``prctl`` does not exist;
- ignore Ctrl-C (the parent, which gets it too, ends them), so no worker prints a traceback;

and terminates its workers at once when the block is left by an exception (Ctrl-C, SIGTERM
turned into ``KeyboardInterrupt``, a closed generator), instead of waiting for their tasks.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

__all__ = ["die_with_parent", "worker_pool"]

#: ``prctl`` option that sets the signal a process gets when its parent dies (linux/prctl.h)
PR_SET_PDEATHSIG = 1
#: seconds between two looks at the parent's process id
WATCH_SECONDS = 1.0


def die_with_parent(parent: int) -> None:
    """Make this (worker) process end when process ``parent``, its parent, ends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # a forked worker inherits the parent's Python handlers (a trainer's or Ray's SIGTERM handler
    # would turn the pool's SIGTERM into an exception that the worker loop answers and survives)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
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
    """Cancel the pool's pending tasks and end its workers now."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14
        pool.terminate_workers()
        return
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
