"""How busy the machine is now: the share of its cores that other work keeps busy, and the
advice that follows from it for torch's thread count (printed at the start of a run).

This module imports torch only to read torch's default thread count.
"""

from __future__ import annotations

import os
import time

import torch

__all__ = ["busy_cores", "busy_machine_hint", "cpu_times"]


def cpu_times() -> tuple[int, int]:
    """All CPU time since boot and its idle part (idle and I/O wait), in ticks, from the first
    line of Linux's ``/proc/stat`` (user nice system idle iowait irq softirq steal ...)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]


def busy_cores(seconds: float = 0.25) -> float | None:
    """Cores that other work keeps busy now: the busy share of all CPU time over ``seconds``
    (:func:`cpu_times`; time taken by the hypervisor counts as busy) times the core count. None
    where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        total_before, idle_before = cpu_times()
        time.sleep(seconds)
        total_after, idle_after = cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    if elapsed <= 0:
        return None
    return (1 - (idle_after - idle_before) / elapsed) * (os.cpu_count() or 1)


def busy_machine_hint(torch_threads: int) -> str | None:
    """A line advising ``--torch-threads 1`` when other work already keeps the cores busy.

    Under load, torch's threads wait for each other at every operation: with two busy processes
    beside it, the default run's settings trained at 711 steps/s on 2 threads and 1,712 on one
    (quiet: 3,442 and 2,592). Measured over a quarter of a second (:func:`busy_cores`), not by
    the load average, which stays high for a minute after a run stops (an immediate
    ``--resume`` was told the machine was busy); the load average where that cannot be read.
    """
    cores = os.cpu_count() or 1
    torch_threads = torch_threads or torch.get_num_threads()  # 0: torch's default
    if torch_threads <= 1:
        return None
    busy = busy_cores()
    if busy is not None:
        what = f"{busy:.1f} of {cores} cores in use by other work"
    elif hasattr(os, "getloadavg"):
        busy = os.getloadavg()[0]
        what = f"load average {busy:.1f} on {cores} cores"
    else:
        return None
    if busy < cores - 0.5:
        return None
    return (
        f"note: the machine is busy ({what}); torch's {torch_threads} threads wait for each "
        "other under load, --torch-threads 1 is faster then"
    )
