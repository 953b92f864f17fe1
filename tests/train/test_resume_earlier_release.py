"""A run folder written by the release before the training loop was rewritten and the packages
renamed (``train`` and ``baselines`` then, ``connectx_train`` and ``connectx_baselines`` now)
resumes with today's code: its settings, checkpoint (SB3 ``.zip`` pickling the earlier import
names), extras, state and self-play snapshots are read, and the run goes on to a longer target.

``data/run_of_fd685ee`` was made at commit fd685ee by ``train.trainer.train`` with the settings of
``test_train_resume.tiny`` at 256 steps (seed 5, 2 boards, a 4-channel network, self-play from the
first stage, snapshots every 128 steps), and is kept without its TensorBoard folder and figures.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from connectx_gym.cli import main
from connectx_train.state import RunState

EARLIER_RUN = Path(__file__).parent / "data" / "run_of_fd685ee"


def test_a_run_of_the_earlier_release_resumes_to_a_longer_target(tmp_path: Path) -> None:
    out = tmp_path / "run"
    shutil.copytree(EARLIER_RUN, out)
    before = json.loads((out / "state.json").read_text())
    assert before["timesteps"] == 256
    assert all(path.startswith("/tmp/relrun/run/") for path in before["snapshots"])  # absolute
    status = main(["train", "--quiet", "--resume", "--out", str(out), "--timesteps", "384"])
    assert status == 0
    report = json.loads((out / "report.json").read_text())
    assert report["timesteps"] >= 384
    state = RunState.load(out / "state.json")
    assert state.timesteps == report["timesteps"]
    assert state.snapshots, "the earlier run's self-play pool was dropped"
    assert all((out / path).is_file() for path in state.snapshots)
    assert (out / "final.npz").is_file()
    assert (out / "final.zip").is_file()
