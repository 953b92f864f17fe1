"""One thread or many for a batch of searches: chosen by measuring both as the batches come.

Spreading a batch's boards over numba's threads pays only when the batch is long enough to repay
starting the threads and when cores are free to run them: on an idle 16-core machine a batch of
minimax searches runs several times faster, while on a machine whose cores are all busy (a
shared 2-core one, measured with ``benchmarks/bench_rollout_scaling.py``) each call waits for the
slowest thread to be scheduled and runs slower than on one thread. So a batch whose estimated
work passes :data:`LEAST_PARALLEL_NANOSECONDS` is run both ways for its first calls, then the
faster way, the other being tried again now and then (:data:`PROBE_EVERY`) to follow the
machine's load. Batches are told apart by search kind, depth and size class (the bit length of
the board count). The answers never depend on this choice (each board's search is independent).
"""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable, Hashable

#: Below this work on one thread (the estimate of the caller, in nanoseconds), one thread.
LEAST_PARALLEL_NANOSECONDS = 100_000
#: After the first calls, the slower way is tried again once every this many calls times how
#: many times slower it was (so that the tries cost about 1 / PROBE_EVERY of the time).
PROBE_EVERY = 32
#: Timings kept per way (their median is compared); the first of each way (compilation) is not.
SAMPLES = 7
#: Timings of each way taken before the faster is chosen.
FIRST_SAMPLES = 3


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system has one; numba's
    default thread count is the same), at least 1: the default of the labelling workers."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


class ThreadChoice:
    """Times per board of recent batches on one thread and on ``threads``, per batch class."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._seconds: dict[tuple[Hashable, int], deque[float]] = {}
        self._seen: set[tuple[Hashable, int]] = set()
        self._calls: dict[Hashable, int] = {}
        self._last_probe: dict[Hashable, int] = {}

    def threads(self, key: Hashable, available: int, nanoseconds: float) -> int:
        """Threads for the next batch of class ``key``: 1, or ``available`` (numba's threads,
        at most one per board) when the estimated ``nanoseconds`` on one thread repay them and
        they were not measured slower."""
        if available < 2 or nanoseconds < LEAST_PARALLEL_NANOSECONDS:
            return 1
        calls = self._calls[key] = self._calls.get(key, 0) + 1
        serial = self._seconds.get((key, 1), ())
        spread = self._seconds.get((key, available), ())
        if len(serial) < FIRST_SAMPLES or len(spread) < FIRST_SAMPLES:
            return 1 if len(serial) <= len(spread) else available
        serial_time, spread_time = statistics.median(serial), statistics.median(spread)
        faster, slower = (1, available) if serial_time <= spread_time else (available, 1)
        gap = max(serial_time, spread_time) / max(min(serial_time, spread_time), 1e-12)
        if calls - self._last_probe.get(key, 0) >= PROBE_EVERY * gap:
            self._last_probe[key] = calls
            return slower
        return faster

    def seconds_per_board(self, key: Hashable, threads: int) -> float | None:
        """The median time per board of the recent batches of class ``key`` on ``threads``
        threads, or None before one was timed."""
        seconds = self._seconds.get((key, threads))
        return statistics.median(seconds) if seconds else None

    def run(self, key: Hashable, threads: int, boards: int, call: Callable[[], None]) -> None:
        """``call()``, its time per board recorded for ``threads`` threads and class ``key``."""
        start = self._clock()
        call()
        elapsed = (self._clock() - start) / max(boards, 1)
        way = (key, threads)
        if way not in self._seen:  # the first call of a way may compile its kernel
            self._seen.add(way)
            return
        self._seconds.setdefault(way, deque(maxlen=SAMPLES)).append(elapsed)
