"""The searches' clock reads ``time.perf_counter()``'s clock in plain Python and compiled code."""

from __future__ import annotations

import subprocess
import sys
import time

import numba

from connectx_baselines._clock import monotonic


@numba.njit
def compiled_read() -> float:
    return monotonic()


def test_plain_and_compiled_reads_are_perf_counter() -> None:
    compiled_read()  # compiles
    for read in (monotonic, compiled_read):
        before = time.perf_counter()
        now = read()
        after = time.perf_counter()
        assert before <= now <= after


def test_the_object_mode_clock_of_other_systems_reads_the_same_clock() -> None:
    # Compiled where the system is not Linux (the platform is looked at when numba compiles).
    program = (
        "import sys, time, numba\n"
        "from connectx_baselines._clock import monotonic\n"
        "sys.platform = 'win32'\n"
        "read = numba.njit(lambda: monotonic())\n"
        "before = time.perf_counter(); now = read(); after = time.perf_counter()\n"
        "assert before <= now <= after, (before, now, after)\n"
    )
    subprocess.run([sys.executable, "-c", program], check=True, timeout=120)
