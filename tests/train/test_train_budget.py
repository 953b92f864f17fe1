"""connectx_train.budget: one bound for the whole run. The plan of the supervised passes, a teacher
sized to the run's steps, progress lines with the time left, and ``--max-minutes`` stopping a tiny
run in each phase, then the same command (or ``--resume``) going on to a finished run."""

from __future__ import annotations

import dataclasses
import json
import math
import signal
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from connectx_train.budget import (
    PANEL_SAFETY,
    PPO_OVER_UPDATES,
    TEACHER_SHARE,
    TEACHING_GIVES_WAY,
    Budget,
    EtaLog,
    RolloutBound,
    panel_seconds,
    plan_teaching,
    ppo_seconds,
    sized_teacher_fraction,
)
from connectx_train.config import TrainConfig, preset_config
from connectx_train.finish import DIGEST_KEY, check_report, weights_digest, write_report
from connectx_train.run_setup import StopSignals
from connectx_train.state import RunState, SessionClock
from connectx_train.teaching import _teaching_allowed, sized_teacher
from connectx_train.trainer import EXIT_TIME_LIMIT, RunInterruptedError, train
from tests.train.test_train_resume import FINAL_FILES, arrays, quiet, tiny


def test_all_passes_are_planned_when_they_fit() -> None:
    plan = plan_teaching(10, 2560, 256, 0.1, allowed=60)
    assert (plan.epochs, plan.positions, plan.note) == (10, 2560, None)
    assert plan.seconds == pytest.approx(10.0)


def test_passes_are_cut_before_positions() -> None:
    plan = plan_teaching(10, 2560, 256, 0.1, allowed=4.5)  # one pass: 1 s
    assert (plan.epochs, plan.positions) == (4, 2560)
    assert plan.note is not None
    assert "4 of 10 passes" in plan.note
    plan = plan_teaching(10, 2560, 256, 0.1, allowed=0.35)  # not one whole pass
    assert (plan.epochs, plan.positions) == (1, 3 * 256)
    assert plan.note is not None
    assert "one pass over 768 of 2,560 positions" in plan.note
    assert plan_teaching(10, 2560, 256, 0.1, allowed=0).positions == 256  # one batch at least


def test_ppo_is_estimated_from_its_updates() -> None:
    # the default run: 147 rollouts of 2,048 steps, each passed 4 times and 8 replay batches
    seconds = ppo_seconds(300_000, 2048, 4, 8 * 256, seconds_per_position=0.140 / 256)
    assert seconds == pytest.approx(PPO_OVER_UPDATES * 147 * (4 * 2048 + 2048) * 0.140 / 256)
    assert 950 < seconds < 1000  # the default runs on 2 CPU cores: PPO 890 to 1,030 s


def bounded(minutes: float, panel: float, elapsed: float) -> Budget:
    clock = SessionClock(RunState())
    clock.start -= elapsed
    budget = Budget.from_minutes(clock, minutes)
    budget.panel_seconds = panel
    return budget


def test_teaching_gives_way_to_ppo_down_to_half_its_passes() -> None:
    budget = bounded(30, panel=60, elapsed=40)  # PPO's deadline at 1,740 s, 1,700 s to go
    assert budget.teaching_for_ppo(ppo_seconds=1000, teaching_seconds=500) is None  # both fit
    left = budget.teaching_for_ppo(ppo_seconds=1400, teaching_seconds=500)
    assert left == pytest.approx(300, abs=1)  # PPO fits after 300 s of the 500 planned
    assert left > TEACHING_GIVES_WAY * 500
    # PPO would not fit after half the passes: a run that takes several sessions keeps them
    assert budget.teaching_for_ppo(ppo_seconds=1500, teaching_seconds=500) is None
    # the teacher's share (1/3 of 1,740 s, less the 40 s spent) binds before PPO's need
    assert budget.teaching_for_ppo(ppo_seconds=1100, teaching_seconds=800) is None


def test_the_default_run_on_a_slower_cpu_cuts_passes_so_that_ppo_finishes() -> None:
    config = TrainConfig()
    positions, per_batch = 80_000, 0.140  # the default's teacher; a batch on 2 EPYC cores
    budget = bounded(config.max_minutes, panel=25, elapsed=30)
    allowed, reason = _teaching_allowed(config, budget, positions, 256, per_batch)
    assert allowed == pytest.approx(budget.teaching_allowed())  # nothing given up here
    assert plan_teaching(10, positions, 256, per_batch, allowed, reason).epochs == 10
    slower = 1.25 * per_batch  # a CPU a quarter slower: 10 passes and PPO do not both fit
    allowed, reason = _teaching_allowed(config, budget, positions, 256, slower)
    plan = plan_teaching(10, positions, 256, slower, allowed, reason)
    assert 5 <= plan.epochs < 10
    assert plan.note is not None
    assert "so that all of PPO's 300,000 steps" in plan.note
    need = ppo_seconds(300_000, 2048, 4, 8 * 256, slower / 256)
    assert 30 + plan.seconds + need <= budget.ppo_deadline()
    unbounded = bounded(0, panel=0, elapsed=0)
    assert _teaching_allowed(config, unbounded, positions, 256, slower)[0] == math.inf


def test_the_teacher_is_sized_to_the_steps() -> None:
    assert sized_teacher_fraction(1_000_000, 4, 10, 80_000) == 1.0
    assert sized_teacher_fraction(4096, 4, 10, 80_000) == pytest.approx(4096 * 4 / 800_000)


def test_the_default_run_and_the_presets_keep_their_whole_teacher() -> None:
    assert sized_teacher(TrainConfig()) == (1.0, None)
    for name in ("default", "strong"):
        assert sized_teacher(preset_config(name)) == (1.0, None)


def test_a_short_run_gets_a_share_of_the_teacher_and_says_how_to_get_all() -> None:
    fraction, note = sized_teacher(TrainConfig(timesteps=40_000))
    # the default teacher: 30,000 positions of its own and 71,551 of the books
    assert fraction == pytest.approx(40_000 * 4 / (10 * 101_551), rel=0.01)
    assert note is not None
    assert "--no-scale-teacher" in note
    fraction, note = sized_teacher(TrainConfig(timesteps=4096))  # 1,638 positions: skipped
    assert fraction == 0
    assert note is not None
    assert note.startswith("teacher skipped:")
    assert "\n" not in note
    assert "--no-scale-teacher" in note
    assert sized_teacher(TrainConfig(timesteps=4096, scale_teacher=False)) == (1.0, None)
    assert sized_teacher(TrainConfig(teacher_positions=0)) == (0.0, None)


def test_the_budget_keeps_the_panel_and_ppo_shares() -> None:
    clock = SessionClock(RunState())
    budget = Budget.from_minutes(clock, 30)
    budget.panel_seconds = 60
    assert budget.ppo_deadline() == 30 * 60 - 60
    assert budget.teacher_share() == pytest.approx(TEACHER_SHARE * (30 * 60 - 60))
    assert "budget 30.0 min" in budget.describe("~9 min", "~0")
    clock.start -= 10_000  # far past its share: teaching still gets a floor
    assert budget.over()
    assert budget.teaching_allowed() > 0
    unbounded = Budget.from_minutes(SessionClock(RunState()), 0)
    assert not unbounded.bounded
    assert unbounded.ppo_deadline() == math.inf
    assert not unbounded.over()


def test_the_panel_is_timed_after_its_kernels_are_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    # On a fresh install the first games against each opponent compile its kernels (about half
    # a minute): timed, they made a first run's panel 28 minutes and left PPO none of its bound.
    now = [0.0]
    played: list[int] = []

    def play(games: int) -> None:
        now[0] += (30.0 if not played else 0.0) + 0.05 * games  # the first call compiles
        played.append(games)

    monkeypatch.setattr("connectx_train.budget.time.perf_counter", lambda: now[0])
    seconds = panel_seconds(play, final_games=100, sample_games=2)
    assert played == [1, 2]
    assert seconds == pytest.approx(PANEL_SAFETY * 0.05 * 100)


def test_progress_lines_carry_the_time_left() -> None:
    now = [0.0]
    lines: list[str] = []
    eta = EtaLog(lines.append, total=100, clock=lambda: now[0], every=30)
    for done in range(1, 101):
        now[0] = done * 0.5  # 2 units a second
        eta.update(done, lambda left, d=done: f"{d}/100, {left}")
    assert len(lines) == 10  # one each tenth
    assert lines[0] == "10/100, ~45 s left"
    assert lines[-1] == "100/100, done"
    slow: list[str] = []
    eta = EtaLog(slow.append, total=1000, clock=lambda: now[0], every=30)
    now[0] += 31
    eta.update(1, lambda left: left)  # no tenth yet, but 30 s passed
    assert slow == ["~516.1 min left"]  # 999 units at one per 31 s


def small_board(out: Path, **changes: object) -> TrainConfig:
    """A tiny run on 4x5 that labels 500 positions of its own (two chunks) in one process."""
    board = {"rows": 4, "columns": 5, "inarow": 3, "teacher_workers": 1}
    teacher = {"teacher_positions": 500, "teacher_epochs": 2, "teacher_replay": 1}
    return tiny(out, **board, **teacher, **changes)


def over_after(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    """The budget reports its bound reached from its ``calls``-th look on."""
    seen = [0]

    def over(self: Budget) -> bool:
        seen[0] += 1
        return seen[0] >= calls

    monkeypatch.setattr(Budget, "over", over)


def test_the_time_limit_in_labelling_keeps_the_chunks_and_the_same_command_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    config = small_board(out)
    over_after(monkeypatch, 2)  # before the second chunk
    with pytest.raises(RunInterruptedError, match=r"time limit.*while labelling") as stop:
        train(config, log=quiet)
    assert stop.value.exit_status == EXIT_TIME_LIMIT
    assert len(list((out / "teacher").glob("chunk*.npz"))) == 1
    assert not (out / "teacher.npz").exists()
    monkeypatch.undo()
    lines: list[str] = []
    report = train(dataclasses.replace(config, resume=True), log=lines.append)
    assert any("no checkpoint yet" in line for line in lines)
    assert lines[0].startswith("device: cpu")  # the device and number format, then the note
    assert lines[1].startswith("this run labels 250 teacher positions itself")  # before work
    assert report["timesteps"] >= config.timesteps
    for name in FINAL_FILES:
        assert (out / name).is_file(), name


def test_the_time_limit_in_teaching_keeps_the_passes_and_the_same_command_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    config = small_board(out)
    train(dataclasses.replace(config, out=str(tmp_path / "whole")), log=quiet)
    out.mkdir()
    (out / "teacher.npz").write_bytes((tmp_path / "whole" / "teacher.npz").read_bytes())
    stopped = [False]

    def log(line: str) -> None:
        stopped[0] = stopped[0] or line.startswith("teacher epoch 1/")

    monkeypatch.setattr(Budget, "over", lambda self: stopped[0])
    with pytest.raises(RunInterruptedError, match=r"time limit.*while teaching") as stop:
        train(config, log=log)
    assert stop.value.exit_status == EXIT_TIME_LIMIT
    assert (out / "teacher_progress.pt").is_file()
    monkeypatch.undo()
    lines: list[str] = []
    train(config, log=lines.append)
    assert any(line.startswith("going on from teacher epoch 1/2") for line in lines)
    assert (out / "final.npz").is_file()
    assert not (out / "teacher_progress.pt").exists()


def test_the_time_limit_in_ppo_leaves_the_panel_its_time_and_resume_finishes(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    lines: list[str] = []
    report = train(tiny(out, max_minutes=0.001), log=lines.append)
    assert any(line.startswith("budget 0.0 min:") for line in lines)
    assert report["stopped_by_time_limit"]
    assert report["timesteps"] == 0  # the first rollout cut: none of its steps counted
    for name in FINAL_FILES:  # the final panel was played in spite of the bound
        assert (out / name).is_file(), name
    finished = train(tiny(out, resume=True, max_minutes=0), log=quiet)
    assert finished["timesteps"] >= 384
    assert not finished["stopped_by_time_limit"]


def test_the_report_carries_the_digest_of_final_npz(tmp_path: Path) -> None:
    out = tmp_path / "run"
    report = train(tiny(out), log=quiet)
    assert report[DIGEST_KEY] == weights_digest(out / "final.npz")
    assert json.loads((out / "report.json").read_text())[DIGEST_KEY] == report[DIGEST_KEY]
    assert check_report(out, quiet)
    # other weights beside the report: found, and a report is never written for them
    with np.load(out / "final.npz") as archive:
        arrays = {name: archive[name] for name in archive.files}
    first = next(name for name, array in arrays.items() if array.dtype.kind == "f")
    arrays[first] = arrays[first] + 1
    np.savez(out / "final.npz", **arrays)
    lines: list[str] = []
    assert not check_report(out, lines.append)
    assert "does not describe the weights" in lines[0]
    with pytest.raises(ValueError, match="does not describe the weights"):
        write_report(report, out)
    resumed = train(tiny(out, resume=True), log=quiet)  # --resume writes a report that does
    assert resumed[DIGEST_KEY] == weights_digest(out / "final.npz")


def test_a_rollout_stops_early_enough_for_its_update() -> None:
    now = [0.0]
    bound = RolloutBound(lambda: now[0], deadline=100)
    now[0] = 99
    assert not bound.passed()  # no update timed yet: the deadline itself
    bound.start(evaluating=False)
    bound.ended(10)  # an update of 10 s
    now[0] = 89
    assert not bound.passed()
    now[0] = 91
    assert bound.passed()  # its update would end past the deadline
    bound.start(evaluating=True)  # an evaluation due at the rollout's end: at least as long
    assert bound.passed()
    bound.ended(30)
    now[0] = 71
    assert bound.passed()
    bound.start(evaluating=False)  # a rollout without one keeps aside the update alone
    assert not bound.passed()


def cut_after(monkeypatch: pytest.MonkeyPatch, env_steps: int) -> list[bool]:
    """The time bound passed after ``env_steps`` env steps of the run's PPO (each a step of
    every env); the answers it gave, one per env step."""
    answers: list[bool] = []

    def passed(self: RolloutBound) -> bool:
        answers.append(len(answers) >= env_steps)
        return answers[-1]

    monkeypatch.setattr(RolloutBound, "passed", passed)
    return answers


def test_the_time_limit_inside_a_rollout_stops_there_keeps_the_last_update_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tiny runs: rollouts of 2 envs x 64 steps (128 steps); the deadline passes after the
    # first rollout and ``into_second`` env steps of the second
    saved, weights = [], []
    for into_second in (0, 10):
        out = tmp_path / f"cut_{into_second}"
        answers = cut_after(monkeypatch, 64 + into_second)
        lines: list[str] = []
        report = train(tiny(out), log=lines.append)
        assert answers.count(True) == 1  # not one env step after the deadline
        assert len(answers) == 64 + into_second + 1
        assert report["stopped_by_time_limit"]
        assert report["timesteps"] == 128  # the last complete update; the cut rollout not counted
        state = json.loads((out / "state.json").read_text())
        assert state["timesteps"] == 128
        cut = f"the time limit cut the rollout from step 128 after {2 * (into_second + 1)} of"
        assert any(line.startswith(f"PPO: {cut} its 128 steps") for line in lines), lines
        for name in FINAL_FILES:
            assert (out / name).is_file(), name
        monkeypatch.undo()
        finished = train(tiny(out, resume=True), log=quiet)
        assert finished["timesteps"] == 384
        assert not finished["stopped_by_time_limit"]
        timed = ("wall_seconds", "eval_seconds", "final_panel")
        saved.append({key: value for key, value in state.items() if key not in timed})
        weights.append(arrays(out / "final.npz"))
    # wherever the rollout was cut, the run saved the same update and --resume trains the same
    assert saved[0] == saved[1]
    assert weights[0] == weights[1]


def test_a_stop_signal_inside_a_rollout_keeps_the_last_update_and_resume_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The steps a stop signal cut short are neither trained on nor counted, as the time limit's:
    # the checkpoint is the last update's, and --resume trains what a time-limited run does.
    calls: list[None] = []

    def passed(self: RolloutBound) -> bool:
        calls.append(None)
        if len(calls) == 64 + 10:  # ten env steps into the second rollout
            handler = signal.getsignal(signal.SIGTERM)
            assert isinstance(getattr(handler, "__self__", None), StopSignals)
            signal.raise_signal(signal.SIGTERM)
        return False

    monkeypatch.setattr(RolloutBound, "passed", passed)
    out, lines = tmp_path / "signalled", []
    with pytest.raises(RunInterruptedError):
        train(tiny(out), log=lines.append)
    assert json.loads((out / "state.json").read_text())["timesteps"] == 128
    cut = "a stop signal cut the rollout from step 128 after 20 of its 128 steps"
    assert any(line.startswith(f"PPO: {cut}") for line in lines), lines
    monkeypatch.undo()
    assert train(tiny(out, resume=True), log=quiet)["timesteps"] == 384
    timed = tmp_path / "timed"
    cut_after(monkeypatch, 64 + 10)
    train(tiny(timed), log=quiet)
    monkeypatch.undo()
    train(tiny(timed, resume=True), log=quiet)
    assert arrays(out / "final.npz") == arrays(timed / "final.npz")
