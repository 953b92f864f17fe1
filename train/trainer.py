"""The ``connectx train`` loop: MaskablePPO on ``ConnectX-v0`` with a curriculum and self-play.

One run lives in one output directory::

    config.json              the settings (``--resume`` reads them back)
    teacher.npz, teacher/    the labelled teacher positions (and their chunks while labelling)
    teacher_progress.pt      the supervised passes done, until the first checkpoint holds them
    checkpoint.zip, state.json   the last checkpoint: SB3 model + run state (train/state.py)
    checkpoint_extras.pt     and its random streams and teacher replay (train/resume_extras.py)
    snapshots/step_*.npz     frozen weights of the agent, the self-play pool
    tb/                      TensorBoard logs (one run, continued by ``--resume``)
    final.zip, final.npz     the trained model (SB3, and weights only: share the ``.npz``)
    report.md, report.json   panel results with 95% intervals, timings, curriculum history
    learning_curves.png      panel scores and training win rate against steps

Each env plays, for one rollout at a time, an opponent drawn from the current mixture (the stage's
specs, a review share of earlier stages and a self-play share of snapshots); the change takes effect
at the env's next reset, so every episode is played against one opponent, whose label the episode's
``info["opponent"]`` carries. Files are written atomically (a temporary file, then
``os.replace``), so a crash, Ctrl-C or SIGTERM never leaves half a checkpoint; both signals save
one before stopping, and ``--resume`` finishes any run that has a checkpoint, whatever point of
training or of the final phase it stopped at. A run stopped before its first checkpoint (while
labelling or teaching) goes on when the same command runs again, from the chunks labelled and the
passes done.

The parts: :mod:`train.config` (settings), :mod:`train.state` (run state), :mod:`train.curriculum`,
:mod:`train.opponents` (envs and opponents), :mod:`train.model` (learner, panel),
:mod:`train.callbacks` (one SB3 callback per job), :mod:`train.finish` (final phase).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.utils import set_random_seed
from threadpoolctl import threadpool_limits

from connectx_gym.registry import make_policy
from train.callbacks import WallSplitCallback, run_callbacks
from train.config import TrainConfig, parse_mixture
from train.curriculum import Curriculum
from train.devices import choose_precision, describe_device, resolve_device, use_bf16
from train.finish import finish
from train.model import load_model, new_model, save_model
from train.opponents import close_env, collect_timing, make_vec_env
from train.resume_extras import EXTRAS_FILE, env_seed, restore_extras, save_extras
from train.state import RunState, SessionClock
from train.teacher import (
    PRETRAIN_LEARNING_RATE,
    TEACHER_BATCH,
    TEACHER_PROGRESS_FILE,
    TeacherReplayCallback,
    load_teacher,
    pretrain_policy,
)

__all__ = ["RunInterruptedError", "prepare_out", "train"]

#: signals that make a run save a checkpoint and stop (SIGTERM: what schedulers send)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class RunInterruptedError(Exception):
    """Training stopped by Ctrl-C or SIGTERM after saving a checkpoint (``--resume`` goes on)."""

    def __init__(self, out: Path, timesteps: int, message: str | None = None) -> None:
        super().__init__(
            message
            or f"interrupted at step {timesteps}: checkpoint saved in {out}; "
            f"continue with: connectx train --resume --out {out}"
        )
        self.out = out
        self.timesteps = timesteps


def train(config: TrainConfig, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or, with ``config.resume``, continue or finish) a training run; returns the report.

    Raises :class:`RunInterruptedError` after saving a checkpoint when interrupted by Ctrl-C or
    SIGTERM.
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


def cpu_times() -> tuple[int, int]:
    """All CPU time since boot and its idle part (idle and I/O wait), in ticks, from the first
    line of Linux's ``/proc/stat`` (user nice system idle iowait irq softirq steal ...)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:9]]
    return sum(fields), fields[3] + fields[4]


def busy_cores(seconds: float = 0.25) -> float | None:
    """Cores that other work keeps busy now: the busy share of all CPU time over ``seconds``
    (:func:`cpu_times`; time taken by the hypervisor counts as busy) times the core count. None
    where ``/proc/stat`` cannot be read (not Linux)."""
    try:
        total_before, idle_before = cpu_times()
        time.sleep(seconds)
        total_after, idle_after = cpu_times()
    except (OSError, ValueError, IndexError):
        return None
    elapsed = total_after - total_before
    if elapsed <= 0:
        return None
    return (1 - (idle_after - idle_before) / elapsed) * (os.cpu_count() or 1)


def busy_machine_hint(torch_threads: int) -> str | None:
    """A line advising ``--torch-threads 1`` when other work already keeps the cores busy.

    Under load, torch's threads wait for each other at every operation: with two busy processes
    beside it, the default run's settings trained at 711 steps/s on 2 threads and 1,712 on one
    (quiet: 3,442 and 2,592). Measured over a quarter of a second (:func:`busy_cores`), not by
    the load average, which stays high for a minute after a run stops (an immediate
    ``--resume`` was told the machine was busy); the load average where that cannot be read.
    """
    cores = os.cpu_count() or 1
    torch_threads = torch_threads or torch.get_num_threads()  # 0: torch's default
    if torch_threads <= 1:
        return None
    busy = busy_cores()
    if busy is not None:
        what = f"{busy:.1f} of {cores} cores in use by other work"
    elif hasattr(os, "getloadavg"):
        busy = os.getloadavg()[0]
        what = f"load average {busy:.1f} on {cores} cores"
    else:
        return None
    if busy < cores - 0.5:
        return None
    return (
        f"note: the machine is busy ({what}); torch's {torch_threads} threads wait for each "
        "other under load, --torch-threads 1 is faster then"
    )


def _train(config: TrainConfig, log: Callable[[str], None]) -> dict[str, Any]:
    config.validate()
    device = resolve_device(config.device)  # --device cuda without a GPU: fails before any work
    precision = choose_precision(config.precision, device)
    log(
        f"device: {describe_device(device)}; network products in {precision.number_format} "
        f"({precision.reason})"
    )
    hint = busy_machine_hint(config.torch_threads)
    if hint:
        log(hint)
    for spec in {s for m in (*config.opponent, *config.curriculum) for s, _ in parse_mixture(m)}:
        make_policy(spec)  # unknown names and bad parameters fail here, not in a worker
    for spec in config.panel:
        make_policy(spec)
    out = prepare_out(config)
    curriculum = Curriculum.from_config(config)
    if config.resume:
        state = RunState.load(out / "state.json")
        curriculum.resume(state)
        state.snapshots = [s for s in state.snapshots if Path(s).is_file()]
    else:
        config.save(out / "config.json")
        state = RunState(
            next_snapshot=config.snapshot_every,
            next_eval=config.eval_every,
            next_checkpoint=config.checkpoint_every,
            rng=np.random.default_rng([config.seed, 7]),
        )
        curriculum.start(state)
    set_random_seed(config.seed)
    clock = SessionClock(state)  # labelling counts against --max-minutes too
    teacher_started = time.perf_counter()
    try:
        teacher = load_teacher(config, out, log) if config.teacher_positions else None
        labelled = time.perf_counter()
    except KeyboardInterrupt:
        raise RunInterruptedError(
            out,
            0,
            f"interrupted while labelling teacher positions; the chunks already labelled are "
            f"kept in {out / 'teacher'}: run the same command again to go on",
        ) from None
    env = make_vec_env(config)
    if config.resume:
        model = load_model(out / "checkpoint.zip", env, out, device)
        # the number format is this machine's (--precision auto may resolve otherwise here)
        model.policy.features_extractor.bf16 = use_bf16(config.precision, device)
        log(f"resuming {out} at step {model.num_timesteps} (stage {state.stage})")
    else:
        model = new_model(config, env, out)
    replay = None
    if teacher is not None and config.teacher_replay:
        replay = TeacherReplayCallback(teacher, config.teacher_replay, config.seed + 3)
    if config.resume:
        restore_extras(out / EXTRAS_FILE, int(model.num_timesteps), replay, log)
        env.seed(env_seed(config.seed, int(model.num_timesteps)))  # the games restart

    def save_checkpoint() -> None:
        state.timesteps = int(model.num_timesteps)
        clock.update()
        save_model(model, out / "checkpoint.zip")
        state.save(out / "state.json")
        save_extras(out / EXTRAS_FILE, state.timesteps, replay)

    if teacher is not None and not config.resume:
        log(f"teaching the policy {config.teacher_epochs} passes over {len(teacher)} positions")
        try:
            taught = pretrain_policy(
                model.policy,
                teacher,
                epochs=config.teacher_epochs,
                batch_size=TEACHER_BATCH,
                learning_rate=PRETRAIN_LEARNING_RATE,
                seed=config.seed,
                log=log,
                progress=out / TEACHER_PROGRESS_FILE,
                settings=teaching_settings(config),
            )
        except KeyboardInterrupt:
            close_env(env)
            raise RunInterruptedError(
                out,
                0,
                f"interrupted while teaching the policy; the labelled positions and the passes "
                f"done are kept in {out}: run the same command again to go on",
            ) from None
        # passes made by an earlier, interrupted command count in the run's wall time
        clock.earlier += taught["earlier_seconds"]
        state.teacher_seconds += taught["earlier_seconds"]
    taught_at = time.perf_counter()
    if teacher is not None:
        state.teacher_seconds += taught_at - teacher_started
        if not config.resume:
            save_checkpoint()  # --resume goes on from the taught network
            (out / TEACHER_PROGRESS_FILE).unlink(missing_ok=True)  # the checkpoint holds it now
    remaining = config.timesteps - model.num_timesteps
    announce = None if config.progress_bar else log
    callbacks = run_callbacks(config, out, curriculum, state, clock, save_checkpoint, announce)
    if replay is not None:
        callbacks.callbacks.append(replay)
    wall_split = WallSplitCallback()
    # first: a rollout ends before the teacher replay and the other callbacks' rollout-end work
    callbacks.callbacks.insert(0, wall_split)
    try:
        with _stop_signals_interrupt():
            try:
                if remaining > 0:
                    state.stopped_by_time, state.final_panel = False, None
                    model.learn(
                        remaining,
                        callback=callbacks,
                        reset_num_timesteps=not config.resume,
                        tb_log_name="ppo",
                        progress_bar=config.progress_bar,
                    )
                timing = collect_timing(env)
                timing["rollout_seconds"] = wall_split.rollout_seconds
                timing["update_seconds"] = wall_split.update_seconds
                timing["labelling_seconds"] = labelled - teacher_started
                timing["teaching_seconds"] = taught_at - labelled
            finally:
                close_env(env)
            save_checkpoint()
            return finish(config, out, model, state, clock, timing, log)
    except KeyboardInterrupt:
        with _stop_signals_held():
            save_checkpoint()
        raise RunInterruptedError(out, int(model.num_timesteps)) from None


def teaching_settings(config: TrainConfig) -> dict[str, Any]:
    """The settings that shape the taught network: all but those of one session (where the run
    goes, its time limit, threads and processes, progress display) and the averaging at its end,
    so a rerun with another ``--max-minutes`` still goes on from the saved supervised passes."""
    left_out = {"out", "resume", "max_minutes", "progress_bar", "torch_threads", "teacher_workers"}
    left_out.add("device")  # per session too: passes saved on a GPU go on on a CPU
    left_out.add("average_weights")  # applies after training, not to the taught network
    return {k: v for k, v in config.to_json().items() if k not in left_out}


def prepare_out(config: TrainConfig) -> Path:
    """Create (or, with ``resume``, check) the output directory."""
    out = Path(config.out)
    if config.resume:
        if not (out / "checkpoint.zip").is_file() or not (out / "state.json").is_file():
            raise FileNotFoundError(f"nothing to resume: {out} has no checkpoint")
    elif (out / "checkpoint.zip").exists() or (out / "final.zip").exists():
        raise FileExistsError(
            f"{out} already holds a run: continue it with --resume or choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


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
