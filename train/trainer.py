"""``connectx train``: MaskablePPO on ``ConnectX-v0`` with a curriculum and self-play, read top
to bottom.

:func:`train` is the whole run: the setup resolved once (:func:`connectx_train.run_setup.
resolve_setup`: device, number format, threads, time budget), the teacher phase (labelled
positions and supervised passes, :mod:`connectx_train.teaching`), then PPO's loop in plain code
(:func:`ppo`: draw each env's opponent, collect a rollout, snapshots, evaluation and checkpoints,
teacher replay, PPO's update), then the final phase (:func:`connectx_train.finish.finish`: final
weights, final panel, report). sb3-contrib's MaskablePPO is the algorithm: the loop calls its
``collect_rollouts`` and ``train``.

One run lives in one output directory::

    config.json              the settings (``--resume`` reads them back)
    run.lock                 the lock one run at a time holds (connectx_train.run_setup)
    teacher.npz, teacher/    the labelled teacher positions (and their chunks while labelling)
    teacher_progress.pt      the supervised passes done, until the first checkpoint holds them
    teacher_plan.json        the passes planned for the session's budget (connectx_train.teaching)
    checkpoint.zip           the last checkpoint: the SB3 model (connectx_train.model),
    state.json               the run's state (connectx_train.state),
    checkpoint_extras.pt     its random streams and teacher replay (connectx_train.model)
    snapshots/step_*.npz     frozen weights of the agent, the self-play pool
    tb/                      TensorBoard logs (one run, continued by ``--resume``)
    final.zip, final.npz     the trained model (SB3, and weights only: share the ``.npz``)
    report.md, report.json   panel results with 95% intervals, timings, curriculum history, and
                             the digest of final.npz's weights (connectx_train.finish)
    learning_curves.png      panel scores and training win rate against steps
    train.log                what the sessions logged, appended by each (connectx_gym.logs)

Each env plays, for one rollout at a time, an opponent drawn from the current mixture (the stage's
specs, a review share of earlier stages and a self-play share of snapshots); the change takes effect
at the env's next reset, so every episode is played against one opponent, whose label the
episode's ``info["opponent"]`` carries; the first opponents are drawn before the envs' first reset.
Files are written atomically (a temporary file, then ``os.replace``), so a crash, Ctrl-C or
SIGTERM never leaves half a checkpoint; both signals save what is done in any phase before
stopping (:class:`connectx_train.run_setup.StopSignals`), and ``--resume`` finishes any run that
has a checkpoint, whatever point of training or of the final phase it stopped at. A run stopped
before its first checkpoint (while labelling or teaching, by a signal or by ``--max-minutes``)
goes on when the same command (or ``--resume``) runs again, from the chunks labelled and the
passes done. ``--max-minutes`` bounds the whole session and is shared between its phases
(:mod:`connectx_train.budget`).
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecEnv

from connectx_baselines.teacher_labels import LabellingStoppedError
from connectx_gym.files import save_weights
from connectx_gym.logs import log_file
from connectx_gym.registry import make_policy
from connectx_gym.weights import WeightsFile
from connectx_train.budget import (
    PPOProgress,
    RolloutBound,
    TimeLimitReachedError,
)
from connectx_train.config import TrainConfig, parse_mixture
from connectx_train.finish import check_report, final_panel_seconds, finish, periodic_evaluation
from connectx_train.model import (
    CHECKPOINT_FILE,
    EXTRAS_FILE,
    LastUpdate,
    env_seed,
    load_model,
    model_weights,
    new_model,
    policy_kwargs,
    read_init_weights,
    restore_extras,
    save_extras,
    save_model,
    start_from_weights,
)
from connectx_train.opponents import (
    close_env,
    collect_timing,
    queue_opponents,
    snapshot_device,
)
from connectx_train.ray_rollouts import RolloutsLostError, run_ray, train_env
from connectx_train.run_setup import (
    EXIT_INTERRUPTED,
    EXIT_TIME_LIMIT,
    RunInterruptedError,
    RunSetup,
    StopSignals,
    busy_machine_hint,
    interrupted,
    prepare_out,
    resolve_setup,
    run_lock,
    thread_pools,
    time_stop,
)
from connectx_train.state import SNAPSHOT_DIRECTORY, Curriculum, RunState, pool_on_disk
from connectx_train.teacher import TEACHER_PROGRESS_FILE, TeacherTensors, load_teacher
from connectx_train.teaching import (
    TEACHER_PLAN_FILE,
    TeacherReplay,
    labelling_note,
    sized_teacher,
    teach,
)

__all__ = ["EXIT_INTERRUPTED", "EXIT_TIME_LIMIT", "RunInterruptedError", "prepare_out", "train"]

#: the run's log in its output directory
LOG_FILE = "train.log"

logger = logging.getLogger(__name__)


@dataclass
class Run:
    """What the steps of one session share: the setup, the run's state, its envs and learner."""

    setup: RunSetup
    state: RunState
    curriculum: Curriculum
    env: VecEnv
    model: MaskablePPO
    replay: TeacherReplay | None = None
    #: this session's training outcomes per opponent label (1.0 won), the win rates logged
    outcomes: dict[str, deque[float]] = field(default_factory=dict)
    #: self-play snapshots read so far (path -> weights), kept between rollouts
    snapshot_weights: dict[str, WeightsFile] = field(default_factory=dict)
    #: this session's phase times (the report's split of wall time)
    timing: dict[str, float] = field(
        default_factory=lambda: dict.fromkeys(
            ("labelling_seconds", "teaching_seconds", "rollout_seconds", "update_seconds"), 0.0
        )
    )

    def save_checkpoint(self) -> None:
        """The model, the run state and the extras, atomically, at the model's step."""
        out = self.setup.out
        self.state.timesteps = int(self.model.num_timesteps)
        self.setup.clock.update()
        save_model(self.model, out / CHECKPOINT_FILE)
        self.state.save(out / "state.json")
        save_extras(out / EXTRAS_FILE, self.state.timesteps, self.replay)


def train(config: TrainConfig, log: Callable[[str], None] = logger.info) -> dict[str, Any]:
    """Run (or, with ``config.resume``, continue or finish) a training run; returns the report.

    ``log`` gets the progress lines (by default this module's logger's ``info``; a warning goes
    to its ``warning``, :func:`connectx_gym.logs.warn`); what goes through :mod:`logging` is also
    appended to ``train.log`` in the run's directory.

    Raises :class:`RunInterruptedError` after saving what was done when interrupted by Ctrl-C
    or SIGTERM, or stopped by ``--max-minutes`` before its first checkpoint; ``OSError``
    (:class:`connectx_train.run_setup.RunLockedError`) when another process runs in
    ``config.out``; ``ValueError`` (one line) for bad settings, before any work.
    """
    config.validate()
    for spec in {s for m in (*config.opponent, *config.curriculum) for s, _ in parse_mixture(m)}:
        make_policy(spec)  # unknown names and bad parameters fail here, not in a worker
    for spec in config.panel:
        make_policy(spec)
    setup = resolve_setup(config)  # the session's clock starts here
    out, threads = setup.out, config.torch_threads
    with run_lock(out), log_file(out / LOG_FILE), thread_pools(threads), StopSignals() as stops:
        resuming = prepare_out(config)  # before the first line: a refused run logs none there
        log(setup.describe())
        with run_ray(config):  # one Ray start for the labelling and the rollouts
            run = resume_run(setup, log) if resuming else start_run(setup, log)
        stops.defer()  # from here on a signal stops the run at the loop's next safe point
        try:
            ppo(run, stops, log)
            run.save_checkpoint()
            timing = {**collect_timing(run.env), **run.timing}
            close_env(run.env)
            return finish(setup, run.model, run.state, timing, log, stops.check)
        except (KeyboardInterrupt, RolloutsLostError) as stop:
            close_env(run.env)
            with stops.ignored():
                run.save_checkpoint()
            steps = int(run.model.num_timesteps)
            if isinstance(stop, RolloutsLostError):  # a Ray actor that could not be restarted
                raise stop.stopped(setup.out, steps) from None
            raise RunInterruptedError(setup.out, steps) from None


def start_run(setup: RunSetup, log: Callable[[str], None]) -> Run:
    """A new run (or one stopped before its first checkpoint): the settings saved, the teacher
    positions labelled or read, the policy taught within the budget, the first checkpoint."""
    config, out = setup.config, setup.out
    fraction, size_note = sized_teacher(config)
    for line in (
        labelling_note(config, out, fraction),
        size_note,
        busy_machine_hint(setup.torch_threads),
    ):
        if line:
            log(line)
    if config.resume:
        log(f"{out} has no checkpoint yet: going on from what its last session saved")
    start_weights = (
        read_init_weights(config.init_weights, config.geometry) if config.init_weights else None
    )
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
    setup.clock.attach(state)
    teacher = None
    if fraction > 0:
        kept = f"the chunks already labelled are kept in {out / 'teacher'}"
        try:
            teacher = load_teacher(config, out, log, fraction=fraction, stop=setup.budget.over)
        except LabellingStoppedError as stop:
            where = f"while labelling ({stop.done} of {stop.total} chunks done)"
            raise time_stop(setup, where, kept) from None
        except KeyboardInterrupt:
            raise interrupted(out, "while labelling teacher positions", kept) from None
    labelling_seconds = setup.clock.session_seconds()
    env = train_env(config)
    model = new_model(config, env, out, setup.device, setup.precision.bf16)
    if start_weights is not None:
        log(start_from_weights(model.policy, start_weights, config.init_weights))
    run = Run(setup, state, curriculum, env, model)
    run.timing["labelling_seconds"] = labelling_seconds
    if teacher is not None and config.teacher_replay:
        run.replay = TeacherReplay(teacher, config.teacher_replay, config.seed + 3)
    estimate_panel(run)
    if teacher is None:
        log(setup.budget.describe("none", "none"))
    else:
        teach_policy(run, teacher, labelling_seconds, log)
    run.save_checkpoint()  # --resume goes on from the taught network
    for name in (TEACHER_PROGRESS_FILE, TEACHER_PLAN_FILE):
        (out / name).unlink(missing_ok=True)  # the checkpoint holds them now
    return run


def teach_policy(
    run: Run, teacher: TeacherTensors, labelling_seconds: float, log: Callable[[str], None]
) -> None:
    """The supervised passes before PPO (:func:`connectx_train.teaching.teach`); a stop by the
    budget or a signal keeps the passes done and says how to go on."""
    setup, clock = run.setup, run.setup.clock
    started = clock.session_seconds()
    try:
        earlier_seconds = teach(setup, run.model.policy, teacher, labelling_seconds, log)
    except (TimeLimitReachedError, KeyboardInterrupt) as stop:
        close_env(run.env)
        kept = f"the labelled positions and the passes done are kept in {setup.out}"
        if isinstance(stop, TimeLimitReachedError):
            raise time_stop(setup, f"while teaching ({stop})", kept) from None
        raise interrupted(setup.out, "while teaching the policy", kept) from None
    run.timing["teaching_seconds"] = clock.session_seconds() - started
    # passes made by an earlier, interrupted command count in the run's wall time
    clock.earlier += earlier_seconds
    run.state.teacher_seconds += earlier_seconds + clock.session_seconds()


def resume_run(setup: RunSetup, log: Callable[[str], None]) -> Run:
    """The run saved in ``setup.out`` at its last checkpoint (its teacher positions read back for
    the replay, its random streams restored, its self-play pool checked)."""
    config, out = setup.config, setup.out
    log_line = busy_machine_hint(setup.torch_threads)
    if log_line:
        log(log_line)
    state = RunState.load(out / "state.json")
    curriculum = Curriculum.from_config(config)
    curriculum.resume(state)
    state.snapshots = pool_on_disk(out, state.snapshots, log)  # named when missing
    set_random_seed(config.seed)
    setup.clock.attach(state)
    check_report(out, log)
    teacher = None
    if config.teacher_positions and config.teacher_replay:
        fraction, _ = sized_teacher(config)
        if fraction > 0:
            teacher = load_teacher(config, out, log, fraction=fraction, stop=setup.budget.over)
    env = train_env(config)
    # built with this session's device and number format (a run may go on on another machine)
    kwargs = policy_kwargs(config, setup.precision.bf16)
    model = load_model(out / CHECKPOINT_FILE, env, out, setup.device, kwargs)
    log(f"resuming {out} at step {model.num_timesteps} (stage {state.stage})")
    run = Run(setup, state, curriculum, env, model)
    if teacher is not None:
        run.replay = TeacherReplay(teacher, config.teacher_replay, config.seed + 3)
    restore_extras(out / EXTRAS_FILE, int(model.num_timesteps), run.replay, log)
    env.seed(env_seed(config.seed, int(model.num_timesteps)))  # the games restart
    estimate_panel(run)
    log(setup.budget.describe(None, None))
    return run


def ppo(run: Run, stops: StopSignals, log: Callable[[str], None]) -> None:
    """PPO until the steps asked for, the budget's PPO deadline or a stop signal."""
    setup, model, state = run.setup, run.model, run.state
    config, clock, deadline = setup.config, setup.clock, setup.budget.ppo_deadline()
    remaining = config.timesteps - model.num_timesteps
    if remaining <= 0:
        return
    state.stopped_by_time, state.final_panel = False, None
    # a progress bar only where someone watches it: into a file or a pipe it would write nothing
    # until the end, so there the run logs a progress line a minute instead
    bar = config.progress_bar and sys.stderr.isatty()
    steps = EnvSteps(run, stops, PPOProgress(log, clock.session_seconds, deadline, bar))
    last = LastUpdate.take(model, state)  # what a rollout cut by a stop goes back to
    # the first opponents, in place before SB3 resets the envs (in _setup_learn)
    draw_opponents(run)
    total, callback = model._setup_learn(remaining, steps, not config.resume, tb_log_name="ppo")
    callback.on_training_start({"total_timesteps": total}, {})
    env = model.get_env()
    if env is None:  # the model is always made or loaded with the run's envs
        raise ValueError("the PPO model has no environments to collect rollouts from")
    iteration, size = 0, model.n_steps * env.num_envs
    while model.num_timesteps < total:
        draw_opponents(run)
        steps.bound.start(config.eval_every > 0 and model.num_timesteps + size >= state.next_eval)
        started = time.perf_counter()
        collected = model.collect_rollouts(
            env, callback, model.rollout_buffer, model.n_steps, use_masking=True
        )
        run.timing["rollout_seconds"] += time.perf_counter() - started
        if not collected:  # the deadline, or a stop signal, mid-rollout: not trained on, so
            log(last.cut(model, state, size, state.stopped_by_time))  # it stops at its last update
            break
        iteration, collected_at = iteration + 1, time.perf_counter()
        model._update_current_progress_remaining(model.num_timesteps, total)
        log_rollout(run)
        periodic_jobs(run)  # with the weights that played this rollout
        started = time.perf_counter()
        if run.replay is not None:
            model.logger.record("teacher/actor_loss", run.replay.replay(model.policy))
        model.dump_logs(iteration)
        model.train()
        run.timing["update_seconds"] += time.perf_counter() - started
        logger.debug("rollout %d: step %d, stage %d", iteration, model.num_timesteps, state.stage)
        steps.progress.announce(model.num_timesteps)
        steps.bound.ended(time.perf_counter() - collected_at)
        stops.check()
        last = LastUpdate.take(model, state)
    callback.on_training_end()
    stops.check()


class EnvSteps(BaseCallback):
    """What the loop does at every env step of a rollout (SB3 calls it from
    ``collect_rollouts``): count finished episodes, move the curriculum on, and end the rollout
    early at the budget's PPO deadline or on a stop signal; the progress bar or lines."""

    def __init__(self, run: Run, stops: StopSignals, progress: PPOProgress) -> None:
        super().__init__()
        self.run, self.stops, self.progress = run, stops, progress
        self.bound = RolloutBound(run.setup.clock.session_seconds, progress.deadline)

    def _on_training_start(self) -> None:
        self.progress.start(self.num_timesteps, int(self.locals["total_timesteps"]))

    def _on_training_end(self) -> None:
        self.progress.close()

    def _on_step(self) -> bool:
        run, state = self.run, self.run.state
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done and "opponent" in info:
                label = info["opponent"]
                won = info.get("winner") == info.get("agent_mark")
                run.curriculum.record(state, label, won)
                run.outcomes.setdefault(label, deque(maxlen=200)).append(float(won))
        if run.curriculum.maybe_advance(state, self.num_timesteps):  # logged above any bar
            labels = run.curriculum.labels(state.stage)
            self.progress.log(f"step {self.num_timesteps}: curriculum -> {labels}")
        self.progress.update(self.num_timesteps)
        if self.bound.passed():
            state.stopped_by_time = True
            return False
        return not self.stops.requested


def draw_opponents(run: Run) -> None:
    """Each env's opponent for its next games, drawn from the curriculum's mixture."""
    state, out = run.state, run.setup.out
    mixture = run.curriculum.mixture(state.stage, selfplay_available=bool(state.snapshots))
    queue_opponents(
        run.env,
        mixture,
        [out / path for path in state.snapshots],
        state.rng,
        run.snapshot_weights,
        snapshot_device(run.setup.device),
    )


def log_rollout(run: Run) -> None:
    """The rollout's curriculum stage, win rates and speed, to TensorBoard and the train curve."""
    model, state, clock = run.model, run.state, run.setup.clock
    model.logger.record("curriculum/stage", state.stage)
    win_rate = run.curriculum.win_rate(state)
    if not math.isnan(win_rate):
        model.logger.record("curriculum/win_rate", win_rate)
    point: dict[str, float | int] = {"timestep": int(model.num_timesteps), "stage": state.stage}
    for label, outcomes in run.outcomes.items():
        if outcomes:
            rate = sum(outcomes) / len(outcomes)
            model.logger.record(f"win_rate/{label}", rate)
            point[label] = rate
    state.train_curve.append(point)
    session_steps = model.num_timesteps - clock.start_steps
    model.logger.record("time/steps_per_second", session_steps / max(clock.session_seconds(), 1e-9))


def periodic_jobs(run: Run) -> None:
    """What falls due at this step: a snapshot into the self-play pool, a panel evaluation, a
    checkpoint (each every so many steps)."""
    config, state, steps = run.setup.config, run.state, int(run.model.num_timesteps)
    if steps >= state.next_snapshot:
        state.next_snapshot = _next_due(state.next_snapshot, config.snapshot_every, steps)
        add_snapshot(run)
    if config.eval_every and steps >= state.next_eval:
        state.next_eval = _next_due(state.next_eval, config.eval_every, steps)
        evaluate(run)
    if steps >= state.next_checkpoint:
        state.next_checkpoint = _next_due(state.next_checkpoint, config.checkpoint_every, steps)
        run.save_checkpoint()


def _next_due(due: int, every: int, steps: int) -> int:
    """The first step after ``steps`` at which a job due at ``due`` every ``every`` steps falls."""
    return due + every * ((steps - due) // every + 1)


def add_snapshot(run: Run) -> None:
    """Freeze the current weights into the self-play pool (``snapshots/step_*.npz``), which
    keeps the newest ``pool_size``."""
    config, state = run.setup.config, run.state
    name = f"{SNAPSHOT_DIRECTORY}/step_{run.model.num_timesteps:09d}.npz"
    (run.setup.out / SNAPSHOT_DIRECTORY).mkdir(exist_ok=True)
    save_weights(model_weights(run.model, config.geometry), run.setup.out / name)
    state.snapshots = [*state.snapshots, name][-config.pool_size :]


def evaluate(run: Run) -> None:
    """Play the panel deterministically with the current weights: ``eval/SPEC`` scores and the
    mistake rate on the labelled positions' dev split, to TensorBoard and ``state.evaluations``."""
    config, model = run.setup.config, run.model
    weights = model_weights(model, config.geometry)
    entry = periodic_evaluation(config, weights, int(model.num_timesteps), run.state)
    for spec, score in entry["scores"].items():
        model.logger.record(f"eval/{spec}", score)
    if "mistake_rate" in entry:
        model.logger.record("eval/mistake_rate_dev", entry["mistake_rate"])


def estimate_panel(run: Run) -> None:
    """Keep the final panel's time aside in a bounded budget: a few games per opponent with the
    current weights (:func:`connectx_train.finish.final_panel_seconds`)."""
    budget, config = run.setup.budget, run.setup.config
    if budget.bounded:
        weights = model_weights(run.model, config.geometry)
        budget.panel_seconds = final_panel_seconds(config, weights)
