"""Tiny training runs in this process: ``--seed`` gives identical weights, and ``--resume``
finishes a run whatever point it stopped at — a checkpoint already at its target steps, or an
interruption anywhere in the final phase (final models, final panel, report)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

import connectx_train.finish as final_phase
from connectx_gym.cli import main
from connectx_train.config import TrainConfig
from connectx_train.trainer import RunInterruptedError, train

FINAL_FILES = ("final.zip", "final.npz", "report.md", "report.json", "learning_curves.png")


def tiny(out: Path, **changes: object) -> TrainConfig:
    """A run of a few seconds that still walks a curriculum stage and plays self-play."""
    config = TrainConfig(
        timesteps=384,
        seed=5,
        out=str(out),
        max_minutes=0,
        progress_bar=False,
        n_envs=2,
        n_steps=64,
        batch_size=64,
        n_epochs=1,
        channels=4,
        features_dim=16,
        vf_layers=(8,),
        curriculum=("random", "onestep~0.5"),
        advance_window=4,
        advance_threshold=0.1,
        selfplay_from_stage=0,
        snapshot_every=128,
        panel=("random",),
        eval_every=256,
        eval_games=2,
        final_games=2,
        checkpoint_every=128,
        teacher_positions=0,
        scale_teacher=False,  # a tiny run's teacher is the one asked for, not one sized to it
    )
    return dataclasses.replace(config, **changes)


def quiet(_: str) -> None:
    pass


def arrays(path: Path) -> dict[str, tuple[str, bytes]]:
    with np.load(path, allow_pickle=False) as archive:
        return {name: (archive[name].dtype.str, archive[name].tobytes()) for name in archive}


def outcomes(report: dict) -> dict:
    """The panel results without the timings."""
    return {
        spec: {k: v for k, v in result.items() if not k.startswith("ms_per_move")}
        for spec, result in report["panel"].items()
    }


def test_same_seed_gives_identical_weights(tmp_path: Path) -> None:
    first = train(tiny(tmp_path / "a"), log=quiet)
    second = train(tiny(tmp_path / "b"), log=quiet)
    assert arrays(tmp_path / "a" / "final.npz") == arrays(tmp_path / "b" / "final.npz")
    assert outcomes(first) == outcomes(second)
    assert first["curriculum"] == second["curriculum"]
    assert first["evaluations"] == second["evaluations"]
    other = train(tiny(tmp_path / "c", seed=6), log=quiet)
    assert arrays(tmp_path / "c" / "final.npz") != arrays(tmp_path / "a" / "final.npz")
    assert other["timesteps"] == first["timesteps"]


@pytest.fixture
def finished(tmp_path: Path) -> tuple[Path, dict]:
    out = tmp_path / "run"
    report = train(tiny(out), log=quiet)
    return out, report


def test_resume_at_the_target_writes_the_final_files(finished: tuple[Path, dict]) -> None:
    """The checkpoint reached its target steps but the run stopped before its report (the old
    trainer failed here: 'TrainingCallback' object has no attribute 'model')."""
    out, report = finished
    npz = arrays(out / "final.npz")
    for name in FINAL_FILES:
        (out / name).unlink()
    lines: list[str] = []
    resumed = train(dataclasses.replace(tiny(out), resume=True), log=lines.append)
    for name in FINAL_FILES:
        assert (out / name).is_file(), name
    assert arrays(out / "final.npz") == npz
    assert resumed["timesteps"] == report["timesteps"]
    assert outcomes(resumed) == outcomes(report)
    assert resumed["curriculum"] == report["curriculum"]
    assert any("resuming" in line for line in lines)
    assert [p.name for p in (out / "tb").iterdir()] == ["ppo_1"]


@pytest.mark.parametrize("stop_in", ["save_weights", "evaluate_panel", "write_report"])
def test_an_interruption_in_the_final_phase_is_finished_by_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop_in: str
) -> None:
    out = tmp_path / "run"
    # no periodic evaluation (it plays its panel through evaluate_panel too): the stop falls in
    # the final phase
    config = tiny(out, eval_every=4096)
    real = getattr(final_phase, stop_in)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(final_phase, stop_in, interrupted)
    with pytest.raises(RunInterruptedError, match="--resume") as stop:
        train(config, log=quiet)
    assert stop.value.timesteps >= 384
    assert not (out / "report.json").exists()
    state = json.loads((out / "state.json").read_text())
    assert state["timesteps"] == stop.value.timesteps
    assert (state["final_panel"] is not None) == (stop_in == "write_report")
    monkeypatch.setattr(final_phase, stop_in, real)

    lines: list[str] = []
    report = train(dataclasses.replace(config, resume=True), log=lines.append)
    assert report["timesteps"] == stop.value.timesteps
    for name in FINAL_FILES:
        assert (out / name).is_file(), name
    assert not list(out.glob("*.tmp*"))
    assert (stop_in == "write_report") == any("reusing" in line for line in lines)
    # Finishing again is harmless: the same panel, the same files.
    again = train(dataclasses.replace(config, resume=True), log=quiet)
    assert outcomes(again) == outcomes(report)


def test_resume_goes_past_a_finished_target_when_asked(finished: tuple[Path, dict]) -> None:
    out, report = finished
    longer = train(dataclasses.replace(tiny(out), resume=True, timesteps=640), log=quiet)
    assert longer["timesteps"] >= 640 > report["timesteps"]
    state = json.loads((out / "state.json").read_text())
    assert state["final_panel"]["games"] == 2
    assert state["timesteps"] == longer["timesteps"]


def test_resume_with_averaging_replays_the_panel_with_the_averaged_weights(
    finished: tuple[Path, dict],
) -> None:
    out, report = finished
    last = arrays(out / "final.npz")
    assert report["averaged_snapshots"] == []
    lines: list[str] = []
    averaged = train(dataclasses.replace(tiny(out), resume=True, average_weights=3), lines.append)
    # snapshots at 128, 256 and 384 steps; the one at the end (384) is the last weights
    assert averaged["averaged_snapshots"] == [256, 128]
    assert arrays(out / "final.npz") != last
    assert not any("reusing" in line for line in lines)
    state = json.loads((out / "state.json").read_text())
    assert state["final_panel"]["averaged_snapshots"] == [256, 128]
    lines.clear()
    train(dataclasses.replace(tiny(out), resume=True, average_weights=3), lines.append)
    assert any("reusing" in line for line in lines)


@pytest.mark.parametrize(
    ("state_text", "checkpoint", "message"),
    [
        ("{}", None, "state.json: missing timesteps"),
        ("\x00garbage", None, "state.json: not a JSON state file"),
        (None, b"not a zip", "checkpoint.zip: not a loadable checkpoint"),
    ],
)
def test_resume_of_a_broken_run_is_one_line(
    finished: tuple[Path, dict],
    capsys: pytest.CaptureFixture[str],
    state_text: str | None,
    checkpoint: bytes | None,
    message: str,
) -> None:
    out, _ = finished
    if state_text is not None:
        (out / "state.json").write_text(state_text)
    if checkpoint is not None:
        (out / "checkpoint.zip").write_bytes(checkpoint)
    status = main(["train", "--quiet", "--resume", "--out", str(out)])  # no progress lines
    error = capsys.readouterr().err
    assert status != 0
    assert message in error
    assert error.count("\n") == 1, error
    assert "Traceback" not in error
