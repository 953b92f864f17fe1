"""One run per output folder: an operating-system lock on ``out/run.lock`` for the run's life.

The lock is ``flock`` (``fcntl``) on Linux and macOS, the ``filelock`` library's lock elsewhere:
either way the operating system drops it when the process ends, however it ends (SIGKILL
included), so a crashed run never leaves a stale lock behind. The file itself stays; it holds
the process id of the run that last took it, which the refusal names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LOCK_FILE", "RunLockedError", "run_lock"]

#: the lock file, in the run's output directory
LOCK_FILE = "run.lock"


class RunLockedError(OSError):
    """Another process holds the output folder's lock."""


@contextlib.contextmanager
def run_lock(out: Path) -> Iterator[None]:
    """Hold the lock of ``out`` (created if needed) within the block; ``RunLockedError`` (one
    line, naming the holder's process id) when another process holds it."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield from _filelock(path)
        return
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(_refusal(out, _holder(descriptor))) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _filelock(path: Path) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise RunLockedError(_refusal(path.parent, None)) from None
    try:
        yield
    finally:
        lock.release()


def _holder(descriptor: int) -> str | None:
    """The process id written by the lock's holder, if it reads as one."""
    with contextlib.suppress(OSError):
        text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return text
    return None


def _refusal(out: Path, holder: str | None) -> str:
    who = f"another run (process {holder})" if holder else "another run"
    return (
        f"{out} is in use by {who}: one run per output folder; wait for it to end "
        "or choose another --out"
    )
