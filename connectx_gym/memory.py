"""How much memory the machine can give: the basis of the caps on input that costs memory.

Accepted input must not exhaust the machine: a batched env of ``num_envs`` boards
(:class:`connectx_gym.vector.ConnectXVectorEnv`) is refused, with one line naming the cap, when it
would need more than :data:`MEMORY_SHARE` of :func:`available_memory`, before anything is
allocated.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MEMORY_SHARE", "available_memory", "format_bytes"]

#: The share of the available memory one object built from user input may take.
MEMORY_SHARE = 0.5


def available_memory() -> int | None:
    """Bytes of memory this process can still allocate without swapping: the machine's (Linux
    ``MemAvailable``, else the free physical pages), less where the process's control group or
    address-space limit (``ulimit -v``) allows less; None where none of them can be read."""
    limits = [_machine_available(), _cgroup_available(), _address_space_available()]
    known = [limit for limit in limits if limit is not None]
    return min(known) if known else None


def _machine_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_available() -> int | None:
    """The room left under the control group's memory limit (cgroup v2), if there is one."""
    try:
        group = Path("/proc/self/cgroup").read_text().strip().splitlines()[0].split(":", 2)[2]
        folder = Path("/sys/fs/cgroup") / group.lstrip("/")
        limit = (folder / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((folder / "memory.current").read_text())
    except (OSError, ValueError, IndexError):
        return None


def _address_space_available() -> int | None:
    """The room left under ``RLIMIT_AS`` (``ulimit -v``), if it is set."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        pages = int(Path("/proc/self/statm").read_text().split()[0])
        return limit - pages * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError, IndexError, AttributeError):
        return None


def format_bytes(count: float) -> str:
    """``count`` bytes for people: ``"5.6 GB"``, ``"120 MB"``."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count:.0f} bytes"
