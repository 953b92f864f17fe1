"""``connectx train --ray``: the setting (the flag alone starts a local instance, a wrong address is
a one-line error, free on ``--resume``), and a run stopped by Ctrl-C or SIGTERM while its teacher
chunks are Ray tasks, or while its rollouts run on Ray actors, exits as a stopped run and leaves no
Ray process behind.

The runs are subprocesses with a mark in their environment that every process Ray starts for
them inherits, so that only their own processes are counted (other Ray work may run on the
machine); timeouts are generous for a loaded 2-core machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")
pytest.importorskip("sb3_contrib")
psutil = pytest.importorskip("psutil")

from connectx_baselines.teacher_labels import make_teacher_set  # noqa: E402
from connectx_gym.bitboard import Geometry  # noqa: E402
from connectx_gym.cli import main  # noqa: E402
from connectx_train.config import TrainConfig, settings_on_resume  # noqa: E402
from connectx_train.config_types import OnResume  # noqa: E402
from tests.ray.conftest import running, train_config  # noqa: E402
from tests.support.child_signals import default_signal_dispositions  # noqa: E402
from tests.train.test_train_smoke import SMALL  # noqa: E402

ROOT = Path(__file__).parents[2]
MARK = "CONNECTX_TEST_RAY_RUN"
#: a tiny run on 5x6 whose own 5,000 teacher positions (20 chunks, about a second each) are
#: labelled, none read from the shipped labels
RUN = [
    *SMALL,
    *("--rows", "5", "--columns", "6", "--inarow", "4", "--timesteps", "512"),
    *("--teacher-positions", "5000", "--teacher-labels", "label", "--teacher-epochs", "1"),
    "--no-scale-teacher",
]


def test_the_flag_alone_starts_a_local_instance_and_an_address_joins_a_cluster():
    assert TrainConfig().ray == ""
    assert train_config().ray == ""
    assert train_config("--ray").ray == "local"
    assert train_config("--ray", "head:6379").ray == "head:6379"
    assert train_config("--ray", "ray://head:10001").ray == "ray://head:10001"
    assert train_config("--ray", "auto").ray == "auto"


def test_a_malformed_address_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--ray", "head"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2
    assert err.splitlines()[-1].startswith("connectx train: error: argument --ray: expected a Ray")
    with pytest.raises(ValueError, match="expected a Ray address"):
        TrainConfig(ray="head").validate()


def test_ray_is_free_on_resume_and_shapes_nothing_learned():
    assert "ray" in settings_on_resume(OnResume.FREE)
    assert "ray" not in TrainConfig(ray="local").learning_settings()
    assert TrainConfig.from_json({}).ray == ""  # a run saved before the setting labelled locally


def test_no_cluster_at_the_address_is_a_one_line_error():
    with pytest.raises(ConnectionError, match=r"^no Ray cluster at 127\.0\.0\.1:1: [^\n]*$"):
        make_teacher_set(Geometry(4, 5, 3), 10, 0, exclude=(), shipped=False, ray="127.0.0.1:1")


def run_train(out: Path, mark: str, *extra: str) -> tuple[subprocess.Popen, Path]:
    err_path = out.parent / f"{out.name}.stderr"
    path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = {**os.environ, MARK: mark, "PYTHONPATH": path}
    with err_path.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "connectx_gym.cli", "train", "--out", str(out), *RUN, *extra],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env=env,
            preexec_fn=default_signal_dispositions,  # our signals, even from a background job
        )  # fmt: skip
    return process, err_path


def marked(mark: str) -> list[Any]:
    """The live processes whose environment carries ``mark``."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARK) == mark and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            continue
    return found


def stop_when(
    process: subprocess.Popen,
    err_path: Path,
    mark: str,
    ready: Callable[[], bool],
    number: int,
    settle: float = 0.0,
) -> tuple[int, list[Any], str]:
    """Once ``ready()`` (and ``settle`` seconds on), send the run signal ``number``: its exit
    status, the processes of its mark alive at the signal, its stderr. The run is killed if it
    ends first, is not ready in 300 s or does not stop in 120 s."""
    try:
        deadline = time.monotonic() + 300  # Ray's start and the workers' imports when loaded
        while not ready():
            assert process.poll() is None, err_path.read_text(errors="replace")
            assert time.monotonic() < deadline, "the run on Ray not ready within 300 s"
            time.sleep(0.1)
        time.sleep(settle)
        started = marked(mark)
        process.send_signal(number)
        status = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return status, started, err_path.read_text(errors="replace")


def assert_none_left(started: list[Any], mark: str) -> None:
    """The processes ``started`` end within a minute, and none of the mark is left."""
    _, alive = psutil.wait_procs(started, timeout=60)
    left = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, [" ".join(p.cmdline()) for p in left]
    assert not marked(mark)


def test_no_cluster_at_the_address_stops_the_run_in_one_line(tmp_path):
    process, err_path = run_train(tmp_path / "run", uuid.uuid4().hex, "--ray", "127.0.0.1:1")
    status = process.wait(timeout=600)
    lines = err_path.read_text(errors="replace").strip().splitlines()
    assert status == 1, lines
    assert lines[-1].startswith("connectx train: error: no Ray cluster at 127.0.0.1:1:")
    assert not any("Traceback" in line for line in lines)


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_signal_while_labelling_on_ray_leaves_no_ray_process(tmp_path, number):
    mark = uuid.uuid4().hex
    process, err_path = run_train(tmp_path / "run", mark, "--ray")

    def labelling() -> bool:
        return bool(running(marked(mark), "ray::label_chunk"))

    status, started, text = stop_when(process, err_path, mark, labelling, number)
    assert status == 130, text
    assert "while labelling" in text
    assert "Traceback" not in text
    assert len(started) >= 3  # the raylet, the object store's and control processes, workers
    assert_none_left(started, mark)


def test_sigterm_while_rollouts_run_on_ray_leaves_no_ray_process(tmp_path):
    """SIGTERM (what schedulers send; Ctrl-C takes the same path, tested while labelling)."""
    mark, out = uuid.uuid4().hex, tmp_path / "run"
    extra = ("--teacher-positions", "0", "--timesteps", "100000", "--env-slices", "2", "--ray")
    process, err_path = run_train(out, mark, *extra)

    def rolling_out() -> bool:  # both env slices' actors up, past the first checkpoint
        actors = running(marked(mark), "ray::EnvSlice")  # connectx_train.ray_rollouts
        return len(actors) >= 2 and (out / "checkpoint.zip").is_file()

    # a second on: into PPO's rollouts
    status, started, text = stop_when(process, err_path, mark, rolling_out, signal.SIGTERM, 1.0)
    assert status == 130, text
    assert "continue with: connectx train --resume" in text
    assert "Traceback" not in text
    assert_none_left(started, mark)
