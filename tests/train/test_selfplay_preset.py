"""``connectx train --preset selfplay``: PPO with no exact solver anywhere. Its settings name no
teacher, book, replay or solver opponent, and a short run of it goes through with the solver and
every teacher-labelling entry point made unavailable (its mistake rates read shipped labels)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

import connectx_baselines.solver as solver
import connectx_baselines.teacher_book as teacher_book
import connectx_baselines.teacher_cache as teacher_cache
import connectx_baselines.teacher_labels as teacher_labels
import connectx_train.teacher as teacher
import connectx_train.trainer as trainer
from connectx_baselines.solver import SolverPolicy
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.env import quiet_opening_plies
from connectx_gym.registry import make_policy
from connectx_train.config import TrainConfig, parse_mixture, preset_config
from connectx_train.state import SELF_LABEL
from connectx_train.teaching import sized_teacher

#: every way a run reaches exact scores other than the shipped labelled positions: the solver
#: itself, the labelling of teacher positions, the shipped teacher chunks and books
TEACHER_ENTRY_POINTS = (
    (teacher_labels, "make_teacher_set"),
    (teacher_labels, "label_chunk"),
    (teacher_labels, "label_chunks"),
    (teacher_labels, "run_chunks"),
    (teacher_cache, "shipped_store"),
    (teacher_book, "load_book"),
    (teacher, "make_teacher_set"),
    (teacher, "load_book"),
    (teacher, "load_teacher"),
    (trainer, "load_teacher"),
)


class SolverUsedError(AssertionError):
    """Raised by anything the test made unavailable."""


def _unavailable(*args: object, **kwargs: object) -> None:
    raise SolverUsedError("the selfplay preset reached the exact solver or the teacher")


def _specs(config: TrainConfig) -> set[str]:
    mixtures = (*config.opponent, *config.curriculum)
    return {spec for mixture in mixtures for spec, _ in parse_mixture(mixture)} | set(config.panel)


def test_the_selfplay_preset_names_no_solver() -> None:
    config = preset_config("selfplay")
    config.validate()
    assert config.teacher_positions == 0
    assert config.teacher_book == "none"
    assert teacher.book_positions(config) == 0
    assert config.teacher_replay == 0
    assert sized_teacher(config) == (0.0, None)  # no teacher phase at all
    for spec in sorted(_specs(config)):
        assert not isinstance(make_policy(spec), SolverPolicy), spec


def test_the_selfplay_preset_plays_itself_more_than_the_default_within_two_hours() -> None:
    config, default = preset_config("selfplay"), TrainConfig()
    assert config.selfplay_weight > default.selfplay_weight
    assert config.curriculum == default.curriculum  # the search curriculum
    assert config.opponent == ()
    # games also from random play's middle and end positions, not only from short openings
    assert config.training_opening_plies() > quiet_opening_plies(config.geometry)
    assert config.max_minutes == 120
    assert config.out == "runs/selfplay"


@pytest.fixture
def no_solver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact solver and the teacher's labelling and books raise when used."""
    monkeypatch.setattr(solver.Solver, "__init__", _unavailable)
    monkeypatch.setattr(solver, "_solvers", type(solver._solvers)())  # no solver made before
    for module, name in TEACHER_ENTRY_POINTS:
        monkeypatch.setattr(module, name, _unavailable)


@pytest.mark.usefixtures("no_solver")
def test_the_solver_is_unavailable_under_the_fixture() -> None:
    geometry = Geometry(6, 7, 4)
    with pytest.raises(SolverUsedError):
        solver.get_solver(geometry)
    with pytest.raises(SolverUsedError):
        solver.Solver(geometry)
    with pytest.raises(SolverUsedError):
        solver.move_scores(Board.empty(6, 7, 4).play(3))
    with pytest.raises(SolverUsedError):
        teacher_labels.make_teacher_set(geometry, 10, seed=0)


@pytest.mark.usefixtures("no_solver")
def test_a_short_selfplay_run_needs_no_solver(tmp_path: Path) -> None:
    out = tmp_path / "selfplay"
    config = dataclasses.replace(
        preset_config("selfplay"),
        out=str(out),
        timesteps=1024,
        n_envs=4,
        n_steps=64,
        batch_size=128,
        n_epochs=1,
        max_minutes=0,
        progress_bar=False,
        advance_window=8,
        advance_threshold=0.2,
        snapshot_every=256,
        checkpoint_every=512,
        eval_every=512,
        eval_games=2,
        final_games=2,
        panel=("random", "onestep"),
    )
    lines: list[str] = []
    report = train_quietly(config, lines)
    assert report["timesteps"] >= 1024
    assert not (out / "teacher.npz").exists()
    assert not (out / "teacher").exists()
    assert not any("teacher set" in line for line in lines), lines
    # the measurement reads the shipped labels, with the solver unavailable
    assert report["perfect_play"]["split"] == "test"
    assert 0 <= report["perfect_play"]["overall"]["mistake_rate"] <= 1
    assert [e["timestep"] for e in report["evaluations"]] == [512, 1024]
    assert all("mistake_rate" in e for e in report["evaluations"])
    # snapshots were taken for the pool and played against
    assert sorted(p.name for p in (out / "snapshots").iterdir())[0] == "step_000000256.npz"
    assert SELF_LABEL in {label for point in report["train_curve"] for label in point}


def train_quietly(config: TrainConfig, lines: list[str]) -> dict:
    return trainer.train(config, log=lines.append)
