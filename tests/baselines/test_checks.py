"""The helpers of compiled searches: a Ctrl-C that stops a search on a helper thread."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator

import pytest

from connectx_baselines._checks import run_stoppable


def ctrl_c_to_the_main_thread_after(seconds: float) -> threading.Timer:
    """A timer that sends SIGINT to the main thread (where the call waits) after ``seconds``."""
    main = threading.main_thread().ident
    assert main is not None
    timer = threading.Timer(seconds, signal.pthread_kill, args=(main, signal.SIGINT))
    timer.start()
    return timer


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt, as in a user's process (xdist's workers ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("ctrl_c_raises")
def test_a_ctrl_c_returns_only_after_the_stopped_call_has_ended() -> None:
    # A call that takes a while to end once told to stop: the Ctrl-C is raised after it ended,
    # never while it still runs (the next call would share its scratch arrays).
    told_to_stop = threading.Event()
    ended = threading.Event()

    def call() -> None:
        told_to_stop.wait(timeout=10)  # bounded: a Ctrl-C that never comes fails, not hangs
        time.sleep(0.3)
        ended.set()

    timer = ctrl_c_to_the_main_thread_after(0.2)
    with pytest.raises(KeyboardInterrupt):
        run_stoppable(call, told_to_stop.set, poll=0.05)
    timer.join()
    assert told_to_stop.is_set()
    assert ended.is_set()


def test_what_the_call_raises_is_raised_by_the_waiting_thread() -> None:
    def call() -> None:
        raise ValueError("from the helper thread")

    with pytest.raises(ValueError, match="from the helper thread"):
        run_stoppable(call, lambda: None)


def test_the_call_runs_on_a_helper_thread_and_off_the_main_thread_on_its_own() -> None:
    names: list[str] = []

    def call() -> None:
        names.append(threading.current_thread().name)

    run_stoppable(call, lambda: None)
    off_main = threading.Thread(target=run_stoppable, args=(call, lambda: None), name="caller")
    off_main.start()
    off_main.join()
    assert names == ["connectx-search", "caller"]
