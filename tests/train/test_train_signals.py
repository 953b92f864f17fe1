"""A run as other processes see it: one run per output folder (an OS lock), SIGTERM while
labelling and while teaching saves what is done and the same command goes on to a finished run,
and a run killed with SIGKILL while labelling leaves no worker process behind."""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectx_gym.worker_pool import worker_pool
from tests.support.child_signals import default_signal_dispositions
from tests.train.test_train_smoke import SMALL

pytest.importorskip("sb3_contrib")
psutil = pytest.importorskip("psutil")

#: a tiny run on 4x5 that labels 2,500 positions (10 chunks) of its own on 2 workers
BOARD = ["--rows", "4", "--columns", "5", "--inarow", "3", "--timesteps", "512"]
TEACHER = [
    "--teacher-positions",
    "2500",
    "--teacher-workers",
    "2",
    "--teacher-epochs",
    "2",
    "--no-scale-teacher",
]
#: runs the CLI with the labelling of each chunk and each supervised batch slowed down, so a
#: signal finds the run in the phase a test wants (the workers are forked: they are slowed too)
SLOWED = """
import sys, time
import connectx_baselines.teacher_labels as labels
import connectx_train.teacher as teacher
from connectx_gym.cli import main

real_label_chunk, real_batch_losses = labels.label_chunk, teacher.batch_losses

def slow_label_chunk(*args, **kwargs):  # module level: the pool pickles it by name
    time.sleep(float(sys.argv[1]))
    return real_label_chunk(*args, **kwargs)

def slow_batch_losses(*args, **kwargs):
    time.sleep(float(sys.argv[2]))
    return real_batch_losses(*args, **kwargs)

labels.label_chunk, teacher.batch_losses = slow_label_chunk, slow_batch_losses
sys.exit(main(sys.argv[3:]))
"""


def start(out: Path, label_pause: float, batch_pause: float, *extra: str) -> subprocess.Popen:
    argv = ["train", "--out", str(out), *SMALL, *BOARD, *TEACHER, *extra]
    return subprocess.Popen(
        [sys.executable, "-c", SLOWED, str(label_pause), str(batch_pause), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signal_dispositions,
    )


def wait_for(test: object, process: subprocess.Popen, what: str, seconds: float = 900) -> None:
    deadline = time.monotonic() + seconds
    while not test():  # type: ignore[operator]
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.1)


def chunk_files(out: Path) -> list[Path]:
    return sorted((out / "teacher").glob("chunk*.npz")) if (out / "teacher").is_dir() else []


def finish_again(out: Path) -> dict:
    """The same command, not slowed, to the end; returns the report."""
    process = start(out, 0, 0)
    _stdout, stderr = process.communicate(timeout=1800)
    assert process.returncode == 0, stderr
    return json.loads((out / "report.json").read_text())


def test_sigterm_while_labelling_keeps_the_chunks_and_the_same_command_finishes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    process = start(out, 1.0, 0)
    wait_for(lambda: chunk_files(out), process, "labelled a chunk")
    workers = psutil.Process(process.pid).children(recursive=True)
    assert workers, "no labelling workers"
    os.kill(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "while labelling" in stderr
    assert "run the same command again" in stderr
    assert "Traceback" not in stderr
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    kept = len(chunk_files(out))
    assert 1 <= kept < 10
    report = finish_again(out)
    assert report["timesteps"] >= 512
    assert len(chunk_files(out)) == 10


def test_sigterm_while_teaching_keeps_the_passes_and_the_same_command_finishes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    process = start(out, 0, 0.3)
    wait_for(lambda: (out / "teacher_progress.pt").is_file(), process, "saved a pass")
    os.kill(process.pid, signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "while teaching the policy" in stderr
    assert "Traceback" not in stderr
    assert not (out / "checkpoint.zip").exists()
    report = finish_again(out)
    assert report["timesteps"] >= 512


def test_sigkill_while_labelling_leaves_no_worker_behind(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = start(out, 5.0, 0)
    wait_for(
        lambda: len(psutil.Process(process.pid).children(recursive=True)) >= 2,
        process,
        "started its workers",
    )
    time.sleep(1.0)  # the workers are in their first chunk
    workers = psutil.Process(process.pid).children(recursive=True)
    process.kill()
    process.communicate(timeout=60)
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.fixture(params=["default", "ignored"])
def parent_sigterm(request: pytest.FixtureRequest) -> Iterator[None]:
    """SIGTERM in the test process as it is, or ignored by a Python handler, as a trainer's or
    Ray's handler may leave it: forked workers inherit it and must not keep it."""
    if request.param == "default":
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda number, frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("parent_sigterm")
def test_a_pool_left_by_an_exception_ends_its_workers_at_once() -> None:
    started = time.monotonic()
    seen: dict[str, list] = {}

    # children of this process that earlier tests left (Ray's, agents') are not the pool's
    earlier = {child.pid for child in psutil.Process().children()}

    def interrupted_pool() -> None:
        with worker_pool(2) as pool:
            seen["futures"] = [pool.submit(_sleep, 30) for _ in range(2)]
            time.sleep(0.5)
            children = psutil.Process().children()
            seen["workers"] = [child for child in children if child.pid not in earlier]
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted_pool()
    workers, futures = seen["workers"], seen["futures"]
    assert time.monotonic() - started < 25  # not the 30 s of the tasks
    assert workers
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
    # the executor's own thread fails the running tasks once it sees their workers gone: on a
    # loaded machine, a moment after they end
    concurrent.futures.wait(futures, timeout=10)
    assert all(future.cancelled() or future.done() for future in futures)


HOLDER = """
import sys, time
from pathlib import Path
from connectx_train.run_setup import run_lock

with run_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(3600)  # killed by the test; long enough for a loaded machine
"""


def test_a_second_run_into_the_same_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        for extra in ([], ["--resume"]):
            if extra:  # a folder with a run's settings, as --resume reads them first
                (out / "config.json").write_text(json.dumps({"seed": 3}))
            process = subprocess.run(
                [sys.executable, "-m", "connectx_gym.cli", "train", "--out", str(out), *extra],
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert process.returncode != 0
            error = process.stderr.strip().splitlines()[-1]
            assert f"in use by another run (process {holder.pid})" in error, process.stderr
            assert "Traceback" not in process.stderr
        assert not (out / "state.json").exists()
    finally:
        holder.kill()
        holder.wait()
    # the lock died with its holder: the folder is free again, no stale marker
    from connectx_train.run_setup import run_lock

    with run_lock(out):
        pass
