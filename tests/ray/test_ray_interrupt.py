"""Ctrl-C during `connectx evaluate --ray` cancels the Ray tasks and exits at once, in one line.

A subprocess of its own (its own local Ray instance); timeouts are generous because the test
machine may be a loaded 2-core one.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.child_signals import default_signal_dispositions

pytest.importorskip("ray", reason="Ray is not installed (pip install -e '.[ray]')")

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_sigint_cancels_and_exits_promptly(tmp_path: Path) -> None:
    err_path = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "connectx_gym.cli", "evaluate", "minimax:depth=6", "onestep"]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with err_path.open("w") as err:
        process = subprocess.Popen(
            [*command, "--games", "400", "--ray"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env=env,
            preexec_fn=default_signal_dispositions,  # our Ctrl-C, even from a background job
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 300  # Ray's start and a first game on a busy machine
            while not re.search(r"\b[1-9]\d*/400\b", err_path.read_text(errors="replace")):
                assert process.poll() is None, err_path.read_text(errors="replace")
                if time.monotonic() > deadline:
                    pytest.skip("machine too loaded: no game finished within 300 s")
                time.sleep(0.2)
            process.send_signal(signal.SIGINT)
            sent = time.monotonic()
            status = process.wait(timeout=120)  # a hang fails here; 1.6 s on a quiet machine
            waited = time.monotonic() - sent
        finally:
            if process.poll() is None:  # let it stop its Ray instance; kill only as a last resort
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    text = err_path.read_text(errors="replace")
    lines = [line.strip() for line in re.split(r"[\r\n]", text) if line.strip()]
    assert status == 130, text
    assert waited < 120, f"took {waited:.1f} s to stop"
    assert "Traceback" not in text
    assert lines[-1] == "connectx: interrupted"
    assert [line for line in lines if "interrupted" in line or "rror" in line] == [lines[-1]]
