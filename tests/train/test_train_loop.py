"""The training loop's edges: the first games are against the opponents drawn for them (nothing
else reaches TensorBoard), a moved or copied run keeps its self-play pool, subprocess env workers
print no gym banner, and a stop signal inside the end-of-run report ends with the saved state and
the resume hint."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

import connectx_train.finish as final_phase
from connectx_train.state import RunState, run_relative
from connectx_train.trainer import RunInterruptedError, train
from tests.train.test_train_resume import FINAL_FILES, quiet, tiny

ROOT = Path(__file__).resolve().parents[2]


def tensorboard_tags(out: Path) -> set[str]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags: set[str] = set()
    for events in (out / "tb").rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    return tags


def test_a_fixed_opponent_is_the_only_one_played_from_the_first_game(tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = train(tiny(out, opponent=("onestep",), selfplay_weight=0.0), log=quiet)
    win_rates = {tag for tag in tensorboard_tags(out) if tag.startswith("win_rate/")}
    assert win_rates == {"win_rate/onestep"}  # no first game against the env's "random"
    labels = {label for point in report["train_curve"] for label in point}
    assert labels == {"timestep", "stage", "onestep"}
    assert set(report["timing"]["opponents"]) == {"onestep"}


def test_a_curriculum_run_logs_only_the_opponents_it_played(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = tiny(out, curriculum=("onestep",), selfplay_weight=0.0)
    train(config, log=quiet)
    assert {t for t in tensorboard_tags(out) if t.startswith("win_rate/")} == {"win_rate/onestep"}


def test_the_periodic_panel_goes_to_tensorboard_and_the_report(tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = train(tiny(out, eval_every=256, panel=("random", "onestep")), log=quiet)
    (entry,) = report["evaluations"]  # 384 steps: one panel, due at step 256
    assert entry["timestep"] == 256
    assert entry["games"] == 2
    assert set(entry["scores"]) == {"random", "onestep"}
    assert all(0.0 <= score <= 1.0 for score in entry["scores"].values())
    assert 0.0 <= entry["mistake_ci95"][0] <= entry["mistake_rate"] <= entry["mistake_ci95"][1]
    evals = {tag for tag in tensorboard_tags(out) if tag.startswith("eval/")}
    assert evals == {"eval/random", "eval/onestep", "eval/mistake_rate_dev"}


def test_a_copied_run_resumes_with_its_own_snapshots(tmp_path: Path) -> None:
    original = tmp_path / "original"
    train(tiny(original, timesteps=256), log=quiet)
    state = json.loads((original / "state.json").read_text())
    assert state["snapshots"], "the run took no snapshot"
    assert all(path.startswith("snapshots/step_") for path in state["snapshots"])
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    shutil.rmtree(original)  # moved: the old folder is gone
    lines: list[str] = []
    report = train(tiny(copy, timesteps=512, resume=True), log=lines.append)
    assert report["timesteps"] >= 512
    assert not any("are missing from" in line for line in lines), lines
    resumed = RunState.load(copy / "state.json")
    assert len(resumed.snapshots) > len(state["snapshots"]) or resumed.snapshots
    assert all((copy / path).is_file() for path in resumed.snapshots)


def test_a_missing_snapshot_is_named_not_dropped_silently(tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(tiny(out, timesteps=256), log=quiet)
    snapshots = RunState.load(out / "state.json").snapshots
    (out / snapshots[0]).unlink()
    lines: list[str] = []
    train(tiny(out, timesteps=384, resume=True), log=lines.append)
    missing = [line for line in lines if "are missing from" in line]
    assert len(missing) == 1, lines
    assert snapshots[0] in missing[0]


def test_absolute_snapshot_paths_of_earlier_states_map_into_the_run() -> None:
    assert run_relative("/old/place/run/snapshots/step_000000128.npz") == (
        "snapshots/step_000000128.npz"
    )
    assert run_relative("snapshots/step_000000128.npz") == "snapshots/step_000000128.npz"
    assert run_relative("/elsewhere/weights.npz") == "/elsewhere/weights.npz"
    history = [{"stage": 0, "timestep": 0, "opponents": ["random"]}]
    data = RunState(curriculum_history=history).to_json()
    data["snapshots"] = ["/gone/run/snapshots/step_000000256.npz"]
    assert RunState.from_json(data).snapshots == ["snapshots/step_000000256.npz"]


@pytest.mark.skipif(importlib.util.find_spec("gym") is None, reason="needs gym (the banner)")
def test_subprocess_env_workers_print_no_gym_banner(tmp_path: Path) -> None:
    code = (
        "from connectx_train.config import TrainConfig\n"
        "from connectx_train.opponents import close_env, make_vec_env\n"
        "env = make_vec_env(TrainConfig(n_envs=2, vec_env='subproc'))\n"
        "env.reset()\n"
        "print(type(env).__name__)\n"
        "close_env(env)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SubprocVecEnv"]
    assert "unmaintained" not in done.stderr, done.stderr


def test_sigterm_inside_the_report_saves_and_gives_the_resume_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal arrives while the report imports an extension module, which turns any
    exception raised in its initialisation into ``ImportError: initialization failed``."""
    real_plot = final_phase.plot_learning_curves

    def plot_importing_an_extension(report: dict, path: Path) -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            real_plot(report, path)
        except BaseException as error:  # what an extension module's initialisation does
            raise ImportError("initialization failed") from error

    monkeypatch.setattr(final_phase, "plot_learning_curves", plot_importing_an_extension)
    out = tmp_path / "run"
    with pytest.raises(RunInterruptedError, match="continue with: connectx train --resume"):
        train(tiny(out), log=quiet)
    assert (out / "checkpoint.zip").is_file()
    assert RunState.load(out / "state.json").final_panel is not None  # played, kept
    monkeypatch.undo()
    lines: list[str] = []
    report = train(tiny(out, resume=True), log=lines.append)
    assert "final panel already played: reusing it" in lines
    assert report["timesteps"] >= 384
    for name in FINAL_FILES:
        assert (out / name).is_file(), name
