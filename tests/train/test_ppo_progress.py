"""What a watcher sees of PPO: a line a minute with the speed and time left where no bar is shown,
none where one is (the bar counts the session's steps on stderr)."""

from __future__ import annotations

import io

import pytest

from connectx_train.budget import PROGRESS_EVERY, PPOProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_a_minute_without_a_bar() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = PPOProgress(lines.append, clock, deadline=10_000.0, bar=False)
    progress.start(1_000, 13_000)
    clock.now = PROGRESS_EVERY / 2
    progress.announce(2_000)
    assert lines == []  # not yet a minute
    clock.now = PROGRESS_EVERY
    progress.announce(7_000)  # 6,000 steps in 60 s: 100 steps/s, 6,000 left: 60 s
    assert lines == ["PPO: step 7,000/13,000, 100 steps/s, ~60 s left"]
    clock.now = PROGRESS_EVERY + 1
    progress.announce(7_100)
    assert len(lines) == 1
    progress.close()


def test_the_time_limit_caps_the_time_left() -> None:
    lines: list[str] = []
    clock = Clock()
    progress = PPOProgress(lines.append, clock, deadline=90.0, bar=False)
    progress.start(0, 100_000)
    clock.now = 60.0
    progress.announce(6_000)
    assert lines == ["PPO: step 6,000/100,000, 100 steps/s, ~30 s left (the time limit first)"]


def test_a_bar_on_stderr_and_no_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    lines: list[str] = []
    clock = Clock()
    progress = PPOProgress(lines.append, clock, deadline=10_000.0, bar=True)
    progress.start(500, 1_500)
    progress.update(750)
    progress.update(1_000)
    assert progress.bar.done == 500  # the session's steps, not the run's
    clock.now = 2 * PROGRESS_EVERY
    progress.announce(1_000)
    progress.close()
    assert lines == []
    assert "PPO steps" in stream.getvalue()
    assert "0/1000" in stream.getvalue()  # the session's 1,000 steps
