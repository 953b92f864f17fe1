"""The ``connectx train`` loop: MaskablePPO on ``ConnectX-v0`` with a curriculum and self-play.

One run lives in one output directory::

    config.json              the settings (``--resume`` reads them back)
    teacher.npz, teacher/    the labelled teacher positions (and their chunks while labelling)
    teacher_progress.pt      the supervised passes done, until the first checkpoint holds them
    teacher_plan.json        the passes planned for the session's budget
    (connectx_train.teacher_phase) run.lock                 the lock that one run at a time holds
    (connectx_train.run_lock) checkpoint.zip, state.json   the last checkpoint: SB3 model + run
    state (train/state.py) checkpoint_extras.pt     and its random streams and teacher replay
    (train/resume_extras.py) snapshots/step_*.npz     frozen weights of the agent, the self-play
    pool tb/                      TensorBoard logs (one run, continued by ``--resume``)
    final.zip, final.npz     the trained model (SB3, and weights only: share the ``.npz``)
    report.md, report.json   panel results with 95% intervals, timings, curriculum history, and
                             the digest of final.npz's weights
    (connectx_train.report.weights_digest) learning_curves.png      panel scores and training win
    rate against steps

Each env plays, for one rollout at a time, an opponent drawn from the current mixture (the stage's
specs, a review share of earlier stages and a self-play share of snapshots); the change takes effect
at the env's next reset, so every episode is played against one opponent, whose label the episode's
``info["opponent"]`` carries. Files are written atomically (a temporary file, then
``os.replace``), so a crash, Ctrl-C or SIGTERM never leaves half a checkpoint; both signals save
what is done in any phase before stopping, and ``--resume`` finishes any run that has a
checkpoint, whatever point of training or of the final phase it stopped at. A run stopped before
its first checkpoint (while labelling or teaching, by a signal or by ``--max-minutes``) goes on
when the same command (or ``--resume``) runs again, from the chunks labelled and the passes done.
``--max-minutes`` bounds the whole session and is shared between its phases
(:mod:`connectx_train.budget`); only one process at a time runs in an output folder
(:mod:`connectx_train.run_lock`).

The parts: :mod:`connectx_train.config` (settings), :mod:`connectx_train.state` (run state),
:mod:`connectx_train.curriculum`, :mod:`connectx_train.opponents` (envs and opponents),
:mod:`connectx_train.model` (learner, panel), :mod:`connectx_train.callbacks` (one SB3 callback per
job), :mod:`connectx_train.finish` (final phase).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecEnv
from threadpoolctl import threadpool_limits

from connectx_baselines.teacher_labels import LabellingStoppedError
from connectx_gym.registry import make_policy
from connectx_train.budget import Budget, TimeLimitReachedError, minutes, panel_seconds
from connectx_train.callbacks import WallSplitCallback, run_callbacks
from connectx_train.config import TrainConfig, parse_mixture
from connectx_train.curriculum import Curriculum
from connectx_train.devices import choose_precision, describe_device, resolve_device, use_bf16
from connectx_train.finish import finish
from connectx_train.machine_load import busy_machine_hint
from connectx_train.model import evaluate_panel, load_model, model_weights, new_model, save_model
from connectx_train.opponents import close_env, collect_timing, make_vec_env
from connectx_train.report import check_report
from connectx_train.resume_extras import EXTRAS_FILE, env_seed, restore_extras, save_extras
from connectx_train.run_lock import run_lock
from connectx_train.state import RunState, SessionClock
from connectx_train.teacher import (
    PRETRAIN_LEARNING_RATE,
    TEACHER_BATCH,
    TEACHER_PROGRESS_FILE,
    TeacherTensors,
    load_teacher,
    pretrain_policy,
    subset,
)
from connectx_train.teacher_phase import (
    TEACHER_PLAN_FILE,
    describe_teaching,
    labelling_note,
    sized_teacher,
    teaching_plan,
)
from connectx_train.teacher_replay import TeacherReplayCallback

__all__ = ["RunInterruptedError", "prepare_out", "train"]

#: signals that make a run save a checkpoint and stop (SIGTERM: what schedulers send)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: exit status of a run stopped by a signal (as a shell reports Ctrl-C) and by --max-minutes
#: before its first checkpoint (EX_TEMPFAIL: run it again to go on)
EXIT_INTERRUPTED, EXIT_TIME_LIMIT = 130, 75
#: games per panel opponent timed to estimate the final panel
PANEL_SAMPLE_GAMES = 2


class RunInterruptedError(Exception):
    """Training stopped by Ctrl-C, SIGTERM or the time limit after saving what was done
    (``--resume`` or the same command goes on); ``exit_status`` is the command's."""

    def __init__(
        self,
        out: Path,
        timesteps: int,
        message: str | None = None,
        exit_status: int = EXIT_INTERRUPTED,
    ) -> None:
        super().__init__(
            message
            or f"interrupted at step {timesteps}: checkpoint saved in {out}; "
            f"continue with: connectx train --resume --out {out}"
        )
        self.out = out
        self.timesteps = timesteps
        self.exit_status = exit_status


@dataclass
class Run:
    """What the phases of one session share."""

    config: TrainConfig
    out: Path
    state: RunState
    clock: SessionClock
    budget: Budget
    curriculum: Curriculum
    env: VecEnv
    model: MaskablePPO
    replay: TeacherReplayCallback | None = None
    #: this session's labelling and teaching seconds (the report's phase times)
    labelling_seconds: float = 0.0
    teaching_seconds: float = 0.0

    def save_checkpoint(self) -> None:
        """The model, the run state and the extras, atomically, at the model's step."""
        self.state.timesteps = int(self.model.num_timesteps)
        self.clock.update()
        save_model(self.model, self.out / "checkpoint.zip")
        self.state.save(self.out / "state.json")
        save_extras(self.out / EXTRAS_FILE, self.state.timesteps, self.replay)


def print_line(text: str) -> None:
    """Print one log line at once, also when the output is a file or a pipe (``nohup connectx
    train > log &``, where Python would hold it in a buffer until the run ends)."""
    print(text, flush=True)


def train(config: TrainConfig, log: Callable[[str], None] = print_line) -> dict[str, Any]:
    """Run (or, with ``config.resume``, continue or finish) a training run; returns the report.

    Raises :class:`RunInterruptedError` after saving what was done when interrupted by Ctrl-C
    or SIGTERM, or stopped by ``--max-minutes`` before its first checkpoint; ``OSError``
    (:class:`connectx_train.run_lock.RunLockedError`) when another process runs in ``config.out``.
    """
    with _thread_pools(config.torch_threads):
        return _train(config, log)


@contextlib.contextmanager
def _thread_pools(torch_threads: int) -> Iterator[None]:
    """Within the block, torch uses ``torch_threads`` threads (0: unchanged) and numpy's BLAS one.

    Self-play snapshots and the panel run numpy matrix products on small batches: with BLAS
    threads of their own they fought torch's idle OpenMP threads for the two cores (a snapshot
    move took 5x longer with two torch threads).
    """
    before = torch.get_num_threads()
    if torch_threads:
        torch.set_num_threads(torch_threads)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        torch.set_num_threads(before)


def _train(config: TrainConfig, log: Callable[[str], None]) -> dict[str, Any]:
    config.validate()
    device = resolve_device(config.device)  # --device cuda without a GPU: fails before any work
    precision = choose_precision(config.precision, device)
    log(
        f"device: {describe_device(device)}; network products in {precision.number_format} "
        f"({precision.reason})"
    )
    for spec in {s for m in (*config.opponent, *config.curriculum) for s, _ in parse_mixture(m)}:
        make_policy(spec)  # unknown names and bad parameters fail here, not in a worker
    for spec in config.panel:
        make_policy(spec)
    out = Path(config.out)
    with run_lock(out), _stop_signals_interrupt():
        started = time.perf_counter()  # the session's clock starts here
        resuming = prepare_out(config)
        fraction, size_note = sized_teacher(config) if not resuming else (1.0, None)
        note = labelling_note(config, out, fraction) if not resuming else None
        for line in (note, size_note, busy_machine_hint(config.torch_threads)):
            if line:
                log(line)
        if resuming:
            run = _resume_run(config, out, started, log)
        else:
            if config.resume:
                log(f"{out} has no checkpoint yet: going on from what its last session saved")
            run = _start_run(config, out, fraction, started, log)
        return _learn(run, log)


def _session(config: TrainConfig, state: RunState, started: float) -> tuple[SessionClock, Budget]:
    """The session's clock (started at ``started``) and its budget of ``--max-minutes``."""
    clock = SessionClock(state)
    clock.start = started
    return clock, Budget.from_minutes(clock, config.max_minutes)


def _start_run(
    config: TrainConfig, out: Path, fraction: float, started: float, log: Callable[[str], None]
) -> Run:
    """A new run (or one stopped before its first checkpoint): the settings saved, the teacher
    positions labelled or read, the policy taught within the budget, the first checkpoint."""
    config.save(out / "config.json")
    state = RunState(
        next_snapshot=config.snapshot_every,
        next_eval=config.eval_every,
        next_checkpoint=config.checkpoint_every,
        rng=np.random.default_rng([config.seed, 7]),
    )
    curriculum = Curriculum.from_config(config)
    curriculum.start(state)
    set_random_seed(config.seed)
    clock, budget = _session(config, state, started)
    teacher = None
    if fraction > 0:
        kept = f"the chunks already labelled are kept in {out / 'teacher'}"
        try:
            teacher = load_teacher(config, out, log, fraction=fraction, stop=budget.over)
        except LabellingStoppedError as stop:
            where = f"while labelling ({stop.done} of {stop.total} chunks done)"
            raise _time_stop(out, config, where, kept) from None
        except KeyboardInterrupt:
            raise _interrupted(out, "while labelling teacher positions", kept) from None
    labelling_seconds = clock.session_seconds()
    env = make_vec_env(config)
    model = new_model(config, env, out)
    run = Run(config, out, state, clock, budget, curriculum, env, model)
    run.labelling_seconds = labelling_seconds
    if teacher is not None and config.teacher_replay:
        run.replay = TeacherReplayCallback(teacher, config.teacher_replay, config.seed + 3)
    _estimate_panel(run)
    if teacher is not None:
        teaching_started = clock.session_seconds()
        _teach(run, teacher, labelling_seconds, log)
        run.teaching_seconds = clock.session_seconds() - teaching_started
    else:
        log(budget.describe("none", "none"))
    run.save_checkpoint()  # --resume goes on from the taught network
    for name in (TEACHER_PROGRESS_FILE, TEACHER_PLAN_FILE):
        (out / name).unlink(missing_ok=True)  # the checkpoint holds them now
    return run


def _teach(
    run: Run, teacher: TeacherTensors, labelling_seconds: float, log: Callable[[str], None]
) -> None:
    """The supervised passes that fit the budget (planned once per run, announced)."""
    config, out, budget = run.config, run.out, run.budget
    settings = teaching_settings(config)
    plan = teaching_plan(
        config, out, run.model.policy, teacher, TEACHER_BATCH, budget, settings, log
    )
    labelled = f"{minutes(labelling_seconds)} (done)"
    log(budget.describe(describe_teaching(plan), labelled, plan.seconds))
    log(f"teaching the policy {plan.epochs} passes over {plan.positions} positions")
    data = subset(teacher, plan.positions, config.seed + 4)
    try:
        taught = pretrain_policy(
            run.model.policy,
            data,
            epochs=plan.epochs,
            batch_size=TEACHER_BATCH,
            learning_rate=PRETRAIN_LEARNING_RATE,
            seed=config.seed,
            log=log,
            progress=out / TEACHER_PROGRESS_FILE,
            settings=settings,
            stop=budget.over,
        )
    except (TimeLimitReachedError, KeyboardInterrupt) as stop:
        close_env(run.env)
        kept = f"the labelled positions and the passes done are kept in {out}"
        if isinstance(stop, TimeLimitReachedError):
            raise _time_stop(out, config, f"while teaching ({stop})", kept) from None
        raise _interrupted(out, "while teaching the policy", kept) from None
    # passes made by an earlier, interrupted command count in the run's wall time
    run.clock.earlier += taught["earlier_seconds"]
    run.state.teacher_seconds += taught["earlier_seconds"]
    run.state.teacher_seconds += run.clock.session_seconds()


def _resume_run(config: TrainConfig, out: Path, started: float, log: Callable[[str], None]) -> Run:
    """The run saved in ``out`` at its last checkpoint (its teacher positions read back for the
    replay, its random streams restored)."""
    state = RunState.load(out / "state.json")
    curriculum = Curriculum.from_config(config)
    curriculum.resume(state)
    state.snapshots = [s for s in state.snapshots if Path(s).is_file()]
    set_random_seed(config.seed)
    clock, budget = _session(config, state, started)
    check_report(out, log)
    teacher = None
    if config.teacher_positions and config.teacher_replay:
        fraction, _ = sized_teacher(config)
        if fraction > 0:
            teacher = load_teacher(config, out, log, fraction=fraction, stop=budget.over)
    env = make_vec_env(config)
    device = resolve_device(config.device)  # this session's: a run may go on on another device
    model = load_model(out / "checkpoint.zip", env, out, device)
    # the number format is this machine's (--precision auto may resolve otherwise here)
    model.policy.features_extractor.bf16 = use_bf16(config.precision, device)
    log(f"resuming {out} at step {model.num_timesteps} (stage {state.stage})")
    run = Run(config, out, state, clock, budget, curriculum, env, model)
    if teacher is not None:
        run.replay = TeacherReplayCallback(teacher, config.teacher_replay, config.seed + 3)
    restore_extras(out / EXTRAS_FILE, int(model.num_timesteps), run.replay, log)
    env.seed(env_seed(config.seed, int(model.num_timesteps)))  # the games restart
    _estimate_panel(run)
    log(budget.describe(None, None))
    return run


def _learn(run: Run, log: Callable[[str], None]) -> dict[str, Any]:
    """PPO until the steps asked for or the budget's PPO deadline, then the final phase."""
    config, model, state = run.config, run.model, run.state
    remaining = config.timesteps - model.num_timesteps
    # a progress bar only where someone watches it: into a file or a pipe it would write nothing
    # until the end, so there the run logs a progress line a minute instead
    bar = config.progress_bar and sys.stdout.isatty()
    announce = None if bar else log
    deadline = run.budget.ppo_deadline()
    callbacks = run_callbacks(
        config, run.out, run.curriculum, state, run.clock, run.save_checkpoint, announce, deadline
    )
    if run.replay is not None:
        callbacks.callbacks.append(run.replay)
    wall_split = WallSplitCallback()
    # first: a rollout ends before the teacher replay and the other callbacks' rollout-end work
    callbacks.callbacks.insert(0, wall_split)
    try:
        try:
            if remaining > 0:
                state.stopped_by_time, state.final_panel = False, None
                model.learn(
                    remaining,
                    callback=callbacks,
                    reset_num_timesteps=not config.resume,
                    tb_log_name="ppo",
                    progress_bar=bar,
                )
            timing = collect_timing(run.env)
            timing["rollout_seconds"] = wall_split.rollout_seconds
            timing["update_seconds"] = wall_split.update_seconds
            timing["labelling_seconds"] = run.labelling_seconds
            timing["teaching_seconds"] = run.teaching_seconds
        finally:
            close_env(run.env)
        run.save_checkpoint()
        return finish(config, run.out, model, state, run.clock, timing, log)
    except KeyboardInterrupt:
        with _stop_signals_held():
            run.save_checkpoint()
        raise RunInterruptedError(run.out, int(model.num_timesteps)) from None


def _estimate_panel(run: Run) -> None:
    """Keep the final panel's time aside in a bounded budget: a few games per opponent with the
    current weights (:func:`connectx_train.budget.panel_seconds`)."""
    if not run.budget.bounded:
        return
    config = run.config
    weights = model_weights(run.model, config.geometry)

    def play(games: int) -> None:
        evaluate_panel(weights, config.panel, games, config.seed + 2)

    run.budget.panel_seconds = panel_seconds(play, config.final_games, PANEL_SAMPLE_GAMES)


def teaching_settings(config: TrainConfig) -> dict[str, Any]:
    """The settings that shape the taught network: all but those of one session (where the run
    goes, its time limit, threads and processes, progress display) and the averaging at its end,
    so a rerun with another ``--max-minutes`` still goes on from the saved supervised passes."""
    left_out = {"out", "resume", "max_minutes", "progress_bar", "torch_threads", "teacher_workers"}
    left_out.add("device")  # per session too: passes saved on a GPU go on on a CPU
    left_out.add("average_weights")  # applies after training, not to the taught network
    left_out.add("teacher_labels")  # read or labelled, the positions and values are the same
    return {k: v for k, v in config.to_json().items() if k not in left_out}


def prepare_out(config: TrainConfig) -> bool:
    """Check the output directory (the caller holds its lock): whether the run goes on from a
    checkpoint. ``--resume`` of a folder without one goes on from what its last session saved
    (labelled chunks, teacher passes) when it holds the run's settings."""
    out = Path(config.out)
    has_checkpoint = (out / "checkpoint.zip").is_file() and (out / "state.json").is_file()
    if config.resume:
        if not has_checkpoint and not (out / "config.json").is_file():
            raise FileNotFoundError(f"nothing to resume: {out} has no checkpoint")
        return has_checkpoint
    if (out / "checkpoint.zip").exists() or (out / "final.zip").exists():
        raise FileExistsError(
            f"{out} already holds a run: continue it with --resume or choose another --out"
        )
    return False


def _interrupted(out: Path, where: str, kept: str) -> RunInterruptedError:
    return RunInterruptedError(
        out,
        0,
        f"interrupted {where}; {kept}: run the same command again (or connectx train --resume "
        f"--out {out}) to go on",
    )


def _time_stop(out: Path, config: TrainConfig, where: str, kept: str) -> RunInterruptedError:
    return RunInterruptedError(
        out,
        0,
        f"stopped by the time limit (--max-minutes {config.max_minutes:g}) {where}; {kept}: "
        f"run the same command again (or connectx train --resume --out {out}) to go on",
        exit_status=EXIT_TIME_LIMIT,
    )


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises ``KeyboardInterrupt`` like Ctrl-C (main thread only;
    a SIGINT that the process ignores, as in a shell's background job, stays ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(number: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Within the block (the last checkpoint), Ctrl-C and SIGTERM are ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, signal.SIG_IGN) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
