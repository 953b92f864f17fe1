"""The benchmarks' children (``benchmarks/_child.py``) end with their script and may save first:
a script killed outright, a SIGTERM passed on, a Ctrl-C waited out."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.test_benchmarks import BENCHMARKS, script_env

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's"
)

#: A child that says it is ready, then on SIGTERM or SIGINT takes a moment to "save" and exits 3.
CHILD = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    folder = pathlib.Path(sys.argv[1])
    def save(signum, frame):
        time.sleep(0.5)
        (folder / "saved").write_text(signal.Signals(signum).name)
        sys.exit(3)
    signal.signal(signal.SIGTERM, save)
    signal.signal(signal.SIGINT, save)
    (folder / "ready").write_text(str(__import__("os").getpid()))
    time.sleep(60)
    """
)
#: A script that runs CHILD through ``_child.run`` and says how it ended.
SCRIPT = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal
    sys.path.insert(0, sys.argv[2])
    import _child
    try:
        done = _child.run([sys.executable, "-c", sys.argv[3], sys.argv[1]])
    except KeyboardInterrupt:
        saved = (__import__("pathlib").Path(sys.argv[1]) / "saved").exists()
        print(f"interrupted, saved before: {saved}", flush=True)
        sys.exit(130)
    print(f"child status {done.returncode}", flush=True)
    """
)


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """The child's folder; a child that never saved (a failed test) is killed at the end."""
    yield tmp_path
    if (tmp_path / "ready").exists() and not (tmp_path / "saved").exists():
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "ready").read_text()), signal.SIGKILL)


def start(folder: Path) -> subprocess.Popen[str]:
    """The script, in a session of its own, once its child is ready."""
    script = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(folder), str(BENCHMARKS), CHILD],
        env=script_env(), stdout=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    wait_for(folder / "ready")
    return script


def wait_for(path: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.05)


def test_a_script_killed_outright_still_stops_its_child(folder: Path) -> None:
    script = start(folder)
    script.kill()
    script.wait(timeout=30)
    wait_for(folder / "saved")
    assert (folder / "saved").read_text() == "SIGTERM"


def test_a_sigterm_is_passed_on_and_the_child_is_waited_for(folder: Path) -> None:
    script = start(folder)
    script.send_signal(signal.SIGTERM)
    output, _ = script.communicate(timeout=30)
    assert script.returncode == 0
    assert output.strip() == "child status 3"
    assert (folder / "saved").read_text() == "SIGTERM"


def test_ctrl_c_waits_for_the_child_to_save_then_interrupts(folder: Path) -> None:
    script = start(folder)
    os.killpg(script.pid, signal.SIGINT)  # as the terminal does: the script and its child
    output, _ = script.communicate(timeout=30)
    assert script.returncode == 130
    assert output.strip() == "interrupted, saved before: True"
    assert (folder / "saved").read_text() == "SIGINT"
