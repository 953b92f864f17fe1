"""The progress bar on stderr: the plain counter used when tqdm is absent, and the no-op."""

from __future__ import annotations

import io

from connectx_gym.progress import Progress


def test_counter_without_tqdm_ends_its_line() -> None:
    stream = io.StringIO()
    with Progress(3, "games", stream=stream, use_tqdm=False, interval=0.0) as progress:
        for _ in range(3):
            progress.update()
    assert stream.getvalue() == "\rgames 1/3\rgames 2/3\rgames 3/3\n"
    assert progress.done == 3


def test_disabled_progress_writes_nothing() -> None:
    stream = io.StringIO()
    with Progress(5, "positions", enabled=False, stream=stream) as progress:
        progress.update(5)
    assert stream.getvalue() == ""
    assert progress.done == 5
