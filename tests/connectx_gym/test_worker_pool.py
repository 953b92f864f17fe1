"""The worker pool's early end: :func:`terminate` returns once the pool's workers and its manager
thread are gone, so nothing of the pool is left for the interpreter's exit hook to wake."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from connectx_gym.worker_pool import terminate, worker_pool


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_terminate_waits_for_the_pools_manager_thread() -> None:
    with worker_pool(2) as pool:
        futures = [pool.submit(_sleep, 30) for _ in range(4)]
        time.sleep(0.5)  # the workers have taken their first tasks
        manager: threading.Thread = pool._executor_manager_thread  # type: ignore[attr-defined]
        assert manager.is_alive()
        started = time.monotonic()
        terminate(pool)
        assert not manager.is_alive()
    assert time.monotonic() - started < 20  # not the tasks' 30 s
    assert all(future.done() for future in futures)


EXIT_AFTER_AN_INTERRUPTED_POOL = """
import sys, time
from connectx_gym.worker_pool import worker_pool

try:
    with worker_pool(2) as pool:
        for _ in range(4):
            pool.submit(time.sleep, 30)
        time.sleep(0.3)
        raise KeyboardInterrupt
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_an_interpreter_leaving_an_interrupted_pool_exits_without_a_traceback() -> None:
    ended = subprocess.run(
        [sys.executable, "-c", EXIT_AFTER_AN_INTERRUPTED_POOL],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ended.returncode == 130, ended.stderr
    assert ended.stderr == ""
