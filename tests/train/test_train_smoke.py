"""`connectx train` end to end: a short run through the CLI, Ctrl-C or SIGTERM and --resume, the
model as an opponent spec everywhere."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from tests.support.child_signals import default_signal_dispositions

pytest.importorskip("sb3_contrib")

from connectx_gym.files import load_weights
from connectx_gym.match import play_match
from connectx_gym.tournament import run_tournament

SMALL = [
    "--n-envs",
    "2",
    "--n-steps",
    "128",
    "--batch-size",
    "128",
    "--n-epochs",
    "2",
    "--channels",
    "8",
    "--features-dim",
    "32",
    "--curriculum",
    "random",
    "onestep~0.5",
    "--advance-window",
    "20",
    "--advance-threshold",
    "0.3",
    "--panel",
    "random",
    "onestep",
    "--eval-every",
    "1024",
    "--eval-games",
    "4",
    "--final-games",
    "6",
    "--checkpoint-every",
    "512",
    "--snapshot-every",
    "512",
    "--no-progress-bar",
    "--seed",
    "3",
    "--teacher-positions",
    "0",
]


def connectx(*argv: str, **kwargs: object) -> subprocess.Popen:
    code = "import sys; from connectx_gym.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_signal_dispositions,
        **kwargs,
    )


def _checkpoint_step(state: Path) -> int:
    """The step of the checkpoint at ``state`` (0 while there is none, or while it is written)."""
    try:
        return int(json.loads(state.read_text())["timesteps"])
    except (OSError, ValueError, KeyError):
        return 0


def interrupt_run(out: Path, number: signal.Signals) -> int:
    """Start a long run, send it ``number`` once a PPO checkpoint exists (not only the one
    written before PPO's first step); returns the saved step."""
    process = connectx("train", "--timesteps", "200000", "--out", str(out), *SMALL)
    deadline = time.monotonic() + 180
    while not _checkpoint_step(out / "state.json"):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.2)
    os.kill(process.pid, number)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "--resume" in stderr
    assert "Traceback" not in stderr
    interrupted = json.loads((out / "state.json").read_text())["timesteps"]
    assert 0 < interrupted < 200000
    assert not (out / "final.zip").exists()
    return interrupted


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "ppo"
    process = connectx(
        "train", "--timesteps", "3000", "--out", str(out), "--average-weights", "3", *SMALL
    )
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "score" in stdout
    return out


def test_log_lines_reach_a_pipe_while_the_run_goes_on(tmp_path: Path) -> None:
    """Into a pipe or a file (``nohup connectx train 2> log &``) each log line arrives on stderr
    as it is written, not when the run ends; the progress bar is asked for and left out there."""
    with_bar = [flag for flag in SMALL if flag != "--no-progress-bar"]
    process = connectx("train", "--timesteps", "200000", "--out", str(tmp_path / "run"), *with_bar)
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("device: "), first
        assert process.poll() is None  # still running: the line was not held until the end
    finally:
        process.kill()
        process.communicate(timeout=60)


def test_run_writes_everything(finished_run: Path) -> None:
    out = finished_run
    for name in (
        "config.json",
        "checkpoint.zip",
        "state.json",
        "final.zip",
        "final.npz",
        "report.md",
        "report.json",
        "learning_curves.png",
    ):
        assert (out / name).is_file(), name
    assert not list(out.glob("*.tmp*"))
    report = json.loads((out / "report.json").read_text())
    assert report["timesteps"] >= 3000
    assert set(report["panel"]) == {"random", "onestep"}
    for result in report["panel"].values():
        assert result["games"] == 6
        assert result["ci95"][0] <= result["score"] <= result["ci95"][1] + 1e-12
    assert report["curriculum"][0]["opponents"] == ["random"]
    assert 0 <= report["timing"]["opponent_share_of_wall"] < 1
    assert report["evaluations"]
    assert report["train_curve"]
    assert list(out.glob("snapshots/step_*.npz"))
    assert [p.name for p in (out / "tb").iterdir()] == ["ppo_1"]
    assert "| random |" in (out / "report.md").read_text()


@pytest.mark.filterwarnings("ignore:loading an SB3 .zip model")  # our own run's model
def test_play_weights_are_the_mean_of_the_last_weights_and_two_snapshots(
    finished_run: Path,
) -> None:
    from connectx_train.finish import averaged_weights
    from connectx_train.sb3_files import weights_from_sb3

    report = json.loads((finished_run / "report.json").read_text())
    # 3,072 steps (12 rollouts of 256), a snapshot every 512: the last one, 3,072, is the last
    # weights themselves; the two before it are averaged with them
    assert report["timesteps"] == 3072
    assert report["averaged_snapshots"] == [2560, 2048]
    snapshots = [finished_run / f"snapshots/step_{step:09d}.npz" for step in (2560, 2048)]
    last = weights_from_sb3(finished_run / "final.zip")
    expected = averaged_weights(last, snapshots)
    played = load_weights(finished_run / "final.npz")
    assert all(np.array_equal(played.params[n], expected.params[n]) for n in expected.params)
    assert not np.array_equal(played.params["stem.weight"], last.params["stem.weight"])
    assert "snapshots of steps 2,560, 2,048" in (finished_run / "report.md").read_text()


def test_model_is_an_opponent_spec_everywhere(finished_run: Path) -> None:
    npz = str(finished_run / "final.npz")
    env = gym.make("connectx_gym:ConnectX-v0", opponent=npz)
    _, info = env.reset(seed=0)
    done = False
    while not done:
        action = int(np.flatnonzero(info["action_mask"])[0])
        _, _, done, _, info = env.step(action)
    result = play_match(npz, "random", games=4, seed=0)
    assert result.games == 4
    assert result.illegal_a == 0
    with pytest.warns(UserWarning, match="unpickles"):
        zipped = play_match(str(finished_run / "final.zip"), npz, games=2, seed=0)
    assert zipped.illegal_a == zipped.illegal_b == 0
    assert run_tournament([npz, "random"], games=2, bootstrap=10).players == [npz, "random"]


def test_existing_run_is_not_overwritten(finished_run: Path) -> None:
    process = connectx("train", "--timesteps", "1000", "--out", str(finished_run), *SMALL)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0
    assert "already holds a run" in stderr
    assert "Traceback" not in stderr


def test_ctrl_c_saves_and_resume_continues_the_run(tmp_path: Path) -> None:
    out = tmp_path / "ppo"
    interrupted = interrupt_run(out, signal.SIGINT)

    process = connectx(
        "train",
        "--resume",
        "--out",
        str(out),
        "--timesteps",
        str(interrupted + 1500),
        "--no-progress-bar",
    )
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr
    assert f"resuming {out} at step" in stderr  # a log line
    assert "score" in stdout  # the final panel, the command's result
    report = json.loads((out / "report.json").read_text())
    assert interrupted + 1500 <= report["timesteps"] < interrupted + 1500 + 2 * 128 * 2
    assert report["config"]["channels"] == 8  # the saved settings, not the defaults
    assert [p.name for p in (out / "tb").iterdir()] == ["ppo_1"]  # one TensorBoard run


def test_sigterm_saves_like_ctrl_c(tmp_path: Path) -> None:
    """What schedulers and containers send before a kill."""
    out = tmp_path / "ppo"
    interrupted = interrupt_run(out, signal.SIGTERM)
    state = json.loads((out / "state.json").read_text())
    assert state["timesteps"] == interrupted
    assert (out / "checkpoint.zip").is_file()
    assert not list(out.glob("*.tmp*"))


def test_the_report_links_learning_curves_with_the_mistake_rate(finished_run: Path) -> None:
    """The run's figure draws the periodic mistake rate against perfect play (with its 95%
    interval) beside the panel scores, and report.md shows it and names TensorBoard's folder."""
    from connectx_train.learning_curves import MISTAKE_LABEL, learning_curves_figure

    report = json.loads((finished_run / "report.json").read_text())
    assert all(len(e["mistake_ci95"]) == 2 for e in report["evaluations"])
    figure = learning_curves_figure(report)
    labels = [axis.get_legend_handles_labels()[1] for axis in figure.axes]
    assert {"random", "onestep"} <= set(labels[0])
    assert MISTAKE_LABEL in labels[-1]
    lines = figure.axes[-1].get_lines()
    (mistakes,) = [line for line in lines if line.get_label() == MISTAKE_LABEL]
    assert list(mistakes.get_ydata()) == [e["mistake_rate"] for e in report["evaluations"]]
    assert (finished_run / "learning_curves.png").read_bytes().startswith(b"\x89PNG")
    markdown = (finished_run / "report.md").read_text()
    assert "![learning curves](learning_curves.png)" in markdown
    assert f"tensorboard --logdir {finished_run / 'tb'}" in markdown
