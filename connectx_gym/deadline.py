"""A deadline that the searches of one thread obey, whatever their own limits.

A caller that must have an answer (or the search stopped) by some time, such as one request of
``connectx serve``, runs the search inside :func:`search_deadline`. The searches already work in
chunks of nodes so that Ctrl-C is handled between them; between chunks they also call
:func:`check_deadline`, which raises :class:`DeadlineExceededError` once the deadline has passed
(full-width searches and the solver: no result). Iterative deepening (``alphabeta``) instead
stops its clock at :func:`time_left` and answers with the deepest search completed::

    with search_deadline(2.0):
        policy.act(board, rng)  # returns within about a chunk of 2 s, or raises the error

Outside a :func:`search_deadline` block nothing changes: searches run to their own limits.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator

__all__ = ["DeadlineExceededError", "check_deadline", "search_deadline", "time_left"]

_local = threading.local()


class DeadlineExceededError(TimeoutError):
    """The search passed the deadline of its :func:`search_deadline` block."""


@contextlib.contextmanager
def search_deadline(seconds: float) -> Iterator[None]:
    """Searches of this thread inside the block stop ``seconds`` from now (nested blocks: the
    earliest deadline wins)."""
    if not seconds == seconds:  # NaN
        raise ValueError(f"a deadline must be a number of seconds, got {seconds!r}")
    previous = getattr(_local, "deadline", math.inf)
    _local.deadline = min(previous, time.perf_counter() + seconds)
    try:
        yield
    finally:
        _local.deadline = previous


def time_left() -> float | None:
    """Seconds left before this thread's deadline (<= 0 once passed), or None without one."""
    deadline = getattr(_local, "deadline", math.inf)
    return None if deadline == math.inf else deadline - time.perf_counter()


def check_deadline() -> None:
    """Raise :class:`DeadlineExceededError` when this thread's deadline has passed."""
    left = time_left()
    if left is not None and left <= 0:
        raise DeadlineExceededError("the search ran past its deadline")
