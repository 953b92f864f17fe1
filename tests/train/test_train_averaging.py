"""connectx_train.averaging: which snapshots a run averages into its play weights, and their
mean."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from connectx_gym.bitboard import Geometry
from connectx_gym.files import load_weights, save_weights
from connectx_gym.weights import WeightsFile
from connectx_train.config import PRESETS, TrainConfig
from connectx_train.finish import (
    averaged_weights,
    markdown_report,
    snapshot_step,
    snapshots_to_average,
)

GEOMETRY = Geometry(4, 5, 3)
LINEAR = [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}]


def linear_weights(seed: int, planes: int = 2) -> WeightsFile:
    """One linear layer from ``planes`` planes (3: with a plane of ones) to the 5 columns."""
    rng = np.random.default_rng(seed)
    params = {
        "w": rng.normal(size=(5, planes * 4 * 5)).astype(np.float32),
        "b": rng.normal(size=5).astype(np.float32),
    }
    layers = LINEAR if planes == 2 else [{"op": "ones_plane"}, *LINEAR]
    return WeightsFile(GEOMETRY, layers, params)


def snapshot_dir(tmp_path: Path, steps: list[int]) -> Path:
    directory = tmp_path / "snapshots"
    directory.mkdir()
    for step in steps:
        save_weights(linear_weights(step), directory / f"step_{step:09d}.npz")
    return directory


def test_newest_snapshots_at_least_half_an_interval_before_the_end(tmp_path: Path) -> None:
    directory = snapshot_dir(tmp_path, [100, 200, 300, 400])
    (directory / "notes.npz").write_bytes(b"")  # not a snapshot: ignored
    names = [p.name for p in snapshots_to_average(directory, end=410, every=100, count=2)]
    # 400 is 10 steps before the end (the last weights, give or take an update): left out
    assert names == ["step_000000300.npz", "step_000000200.npz"]
    assert [snapshot_step(p) for p in snapshots_to_average(directory, 450, 100, 9)] == [
        400,
        300,
        200,
        100,
    ]
    assert snapshots_to_average(directory, 410, 100, 0) == []
    assert snapshots_to_average(tmp_path / "absent", 410, 100, 3) == []


def test_snapshot_step_refuses_other_names() -> None:
    assert snapshot_step(Path("step_000050016.npz")) == 50016
    with pytest.raises(ValueError, match="not a snapshot file"):
        snapshot_step(Path("final.npz"))


def test_the_mean_of_the_last_weights_and_the_snapshots(tmp_path: Path) -> None:
    directory = snapshot_dir(tmp_path, [100, 200])
    last = linear_weights(7)
    averaged = averaged_weights(last, sorted(directory.iterdir()))
    for name in ("w", "b"):
        expected = (
            last.params[name].astype(np.float64)
            + linear_weights(100).params[name]
            + linear_weights(200).params[name]
        ) / 3
        np.testing.assert_allclose(averaged.params[name], expected, rtol=1e-6)
        assert averaged.params[name].dtype == np.float32
    assert averaged.layers == last.layers
    # no snapshots: the last weights themselves
    alone = averaged_weights(last, [])
    assert all(np.array_equal(alone.params[n], last.params[n]) for n in last.params)
    # what a run writes reads back equal
    save_weights(averaged, tmp_path / "final.npz")
    back = load_weights(tmp_path / "final.npz")
    assert all(np.array_equal(back.params[n], averaged.params[n]) for n in averaged.params)


def test_another_network_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "step_000000100.npz"
    save_weights(linear_weights(1, planes=3), other)
    with pytest.raises(ValueError, match="not the run's network"):
        averaged_weights(linear_weights(2), [other])


def test_setting_is_validated_and_the_strong_preset_averages_two() -> None:
    with pytest.raises(ValueError, match="average_weights must be >= 1"):
        TrainConfig(average_weights=0).validate()
    assert TrainConfig().average_weights == 1
    assert PRESETS["strong-v1"][1]["average_weights"] == 2
    # a run saved before the setting existed resumes with the last weights alone
    saved = TrainConfig().to_json()
    del saved["average_weights"]
    assert TrainConfig.from_json(saved).average_weights == 1


def test_report_names_the_averaged_snapshots() -> None:
    report = {
        "config": TrainConfig(average_weights=3).to_json(),
        "timesteps": 1000,
        "wall_seconds": 60.0,
        "training_seconds": 50.0,
        "steps_per_second": 20.0,
        "periodic_eval_seconds": 1.0,
        "final_eval_seconds": 1.0,
        "curriculum": [{"opponents": ["random"], "timestep": 0}],
        "final_stage": 0,
        "panel": {},
        "averaged_snapshots": [900, 800],
        "timing": {
            "opponent_share_of_wall": 0.1,
            "opponent_seconds": 5,
            "env_seconds": 10,
            "opponents": {},
        },
    }
    text = markdown_report(report)
    assert "the mean of the last weights and the snapshots of steps 900, 800" in text
    assert "no snapshot to average" in markdown_report({**report, "averaged_snapshots": []})
    one = {**report, "config": TrainConfig().to_json()}
    assert "play weights" not in markdown_report(one)
