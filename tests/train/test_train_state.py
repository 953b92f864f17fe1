"""The run state (``state.json``) and the curriculum rules, without a learner: round trips,
clear one-line errors for files that are not a run's state, stage changes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from connectx_train.config import TrainConfig
from connectx_train.state import SELF_LABEL, Curriculum, RunState


def test_state_round_trips_through_json(tmp_path: Path) -> None:
    state = RunState(
        timesteps=1024,
        stage=2,
        recent=[1.0, 0.0, 1.0],
        curriculum_history=[{"stage": 0, "timestep": 0, "opponents": ["random"]}],
        snapshots=["a.npz"],
        evaluations=[{"timestep": 512, "games": 4, "scores": {"random": 0.75}}],
        train_curve=[{"timestep": 256, "stage": 0, "random": 0.5}],
        next_snapshot=1536,
        next_eval=2048,
        next_checkpoint=1536,
        wall_seconds=12.5,
        eval_seconds=1.25,
        stopped_by_time=True,
        final_panel={"games": 4, "results": {"random": {"score": 1.0}}, "seconds": 0.5},
        rng=np.random.default_rng([3, 7]),
    )
    state.rng.random(5)  # a generator part-way through its stream
    path = tmp_path / "state.json"
    state.save(path)
    loaded = RunState.load(path)
    assert loaded.to_json() == state.to_json()
    assert loaded.rng.random() == state.rng.random()
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{}", "missing timesteps"),
        ("[]", "expected a JSON object"),
        ("not json at all", "not a JSON state file"),
        ("\x00\xff garbage", "not a JSON state file"),
        ('{"timesteps": 1}', "missing stage"),
    ],
)
def test_a_file_that_is_not_a_state_gives_one_clear_line(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "state.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        RunState.load(path)
    assert str(path) in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("timesteps", -1),
        ("timesteps", "12"),
        ("timesteps", True),
        ("wall_seconds", math.inf),
        ("recent", [0.5]),
        ("snapshots", [3]),
        ("evaluations", "x"),
        ("final_panel", {"results": {}}),
        ("rng", {"bit_generator": "nonsense"}),
    ],
)
def test_a_malformed_field_is_named(tmp_path: Path, field: str, value: object) -> None:
    data = RunState(curriculum_history=[{"stage": 0}]).to_json()
    data[field] = value
    path = tmp_path / "state.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"field {field} "):
        RunState.load(path)


def test_unknown_fields_are_refused(tmp_path: Path) -> None:
    data = {**RunState(curriculum_history=[{"stage": 0}]).to_json(), "extra": 1}
    with pytest.raises(ValueError, match="unknown fields extra"):
        RunState.from_json(data)


def test_a_state_of_the_first_layout_still_loads() -> None:
    """``state.json`` as written before the trainer was split (runs saved by older versions)."""
    rng = np.random.default_rng(5)
    old = {
        "num_timesteps": 4096,
        "curriculum": {"stage": 1, "recent": [1.0], "history": [{"stage": 0, "timestep": 0}]},
        "snapshots": [],
        "evaluations": [],
        "train_curve": [],
        "next": [8192, 5120, 6144],
        "wall_seconds": 3.0,
        "eval_seconds": 1.0,
        "rng": rng.bit_generator.state,
    }
    state = RunState.from_json(old)
    assert (state.timesteps, state.stage, state.recent) == (4096, 1, [1.0])
    assert (state.next_eval, state.next_checkpoint, state.next_snapshot) == (8192, 5120, 6144)
    assert state.final_panel is None


def small_curriculum(**kwargs: object) -> Curriculum:
    config = TrainConfig(
        curriculum=("random", "onestep~0.5@3+minimax:depth=1"),
        advance_window=4,
        advance_threshold=0.75,
        **kwargs,
    )
    return Curriculum.from_config(config)


def test_curriculum_advances_when_the_window_passes_the_threshold() -> None:
    curriculum = small_curriculum(review_weight=0.0, selfplay_weight=0.0)
    state = RunState()
    curriculum.start(state)
    for won in (True, True, False):
        curriculum.record(state, "random", won)
    curriculum.record(state, "onestep", False)  # not the current stage: not counted
    assert len(state.recent) == 3
    assert not curriculum.maybe_advance(state, 100)  # window not full
    curriculum.record(state, "random", True)
    assert curriculum.win_rate(state) == 0.75
    assert curriculum.maybe_advance(state, 200)
    assert state.stage == 1
    assert state.recent == []
    assert state.curriculum_history[-1] == {
        "stage": 1,
        "timestep": 200,
        "opponents": ["onestep~0.5", "minimax:depth=1"],
    }
    assert state.curriculum_history[0]["win_rate_at_exit"] == 0.75
    for _ in range(10):
        curriculum.record(state, "minimax:depth=1", True)
    assert len(state.recent) == 4  # the window
    assert not curriculum.maybe_advance(state, 300)  # the last stage


def test_curriculum_mixture_shares() -> None:
    curriculum = small_curriculum(review_weight=0.2, selfplay_weight=0.3, selfplay_from_stage=1)
    assert curriculum.mixture(0, selfplay_available=True) == [("random", 1.0)]
    mixture = dict(curriculum.mixture(1, selfplay_available=True))
    assert mixture == pytest.approx(
        {"onestep~0.5": 0.375, "minimax:depth=1": 0.125, "random": 0.2, SELF_LABEL: 0.3}
    )
    assert SELF_LABEL not in dict(curriculum.mixture(1, selfplay_available=False))


def test_fixed_opponents_make_one_stage_and_resume_clamps_the_stage() -> None:
    curriculum = Curriculum.from_config(TrainConfig(opponent=("random", "onestep@2")))
    assert curriculum.stages == ((("random", 1.0), ("onestep", 2.0)),)
    state = RunState(stage=5)
    curriculum.resume(state)
    assert state.stage == 0
