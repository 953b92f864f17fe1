"""The teacher phase of a run: how much teacher a run of its size gets, what it must label itself
(said first, with the time it takes), the supervised passes that fit the session's budget
(:mod:`connectx_train.budget`, planned once and kept in ``out/teacher_plan.json`` so that the same
command goes on with the same passes after a stop), and the teacher replay that keeps what was
taught during PPO (:class:`TeacherReplay`). The positions and the passes themselves are
:mod:`connectx_train.teacher`'s."""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from connectx_baselines.teacher_labels import (
    CHUNK,
    KEEP,
    MIN_PLY,
    NODE_LIMIT,
    ChunkSettings,
    chunks_to_label,
)
from connectx_train.budget import (
    LABEL_SECONDS_PER_CHUNK,
    MIN_TEACHER_POSITIONS,
    Budget,
    TeachingPlan,
    minutes,
    passes_seconds,
    plan_teaching,
    ppo_seconds,
    sized_teacher_fraction,
)
from connectx_train.config import TrainConfig
from connectx_train.state import write_json
from connectx_train.teacher import (
    TEACHER_BATCH,
    TEACHER_FILE,
    TEACHER_PROGRESS_FILE,
    TeacherTensors,
    batch_losses,
    book_positions,
    own_positions,
    pretrain_policy,
    seconds_per_batch,
    subset,
    teacher_seed,
)

if TYPE_CHECKING:
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    from connectx_train.run_setup import RunSetup

__all__ = [
    "TEACHER_PLAN_FILE",
    "TeacherReplay",
    "describe_teaching",
    "labelling_note",
    "sized_teacher",
    "teach",
    "teaching_plan",
    "teaching_settings",
]

#: the supervised passes planned for the run, in its output directory until the first checkpoint
TEACHER_PLAN_FILE = "teacher_plan.json"
#: batches timed before the passes are planned
TIMED_BATCHES = 3


def sized_teacher(config: TrainConfig) -> tuple[float, str | None]:
    """(share of the teacher positions the run keeps, the note that says so or ``None``); a
    share of 0 skips the teacher (:func:`connectx_train.budget.sized_teacher_fraction`)."""
    if not config.teacher_positions:
        return 0.0, None
    total = config.teacher_positions + book_positions(config)
    if not config.scale_teacher:
        return 1.0, None
    fraction = sized_teacher_fraction(
        config.timesteps, config.n_epochs, config.teacher_epochs, total
    )
    if fraction >= 1:
        return 1.0, None
    kept = fraction * total
    full = math.ceil(config.teacher_epochs * total / config.n_epochs)
    how = f"--no-scale-teacher teaches all of them, as do runs of {full:,} steps or more"
    if kept < MIN_TEACHER_POSITIONS:
        return 0.0, (
            f"teacher skipped: a run of {config.timesteps:,} steps affords {kept:,.0f} of its "
            f"{total:,} positions ({config.teacher_epochs} passes); {how}"
        )
    return fraction, (
        f"teacher sized to the run: {fraction:.1%} of its {total:,} positions "
        f"({config.teacher_epochs} passes see as many positions as PPO's updates); {how}"
    )


def labelling_note(config: TrainConfig, out: Path, fraction: float) -> str | None:
    """The line that says, before anything else, that the run labels positions itself and how
    long that takes; ``None`` when it has nothing to label."""
    if fraction <= 0 or (out / TEACHER_FILE).is_file():
        return None
    count = own_positions(config.teacher_positions, fraction)
    settings = ChunkSettings(config.geometry.key, MIN_PLY, KEEP, NODE_LIMIT)
    seed = teacher_seed(config)
    shipped = config.teacher_labels == "shipped"
    todo, total = chunks_to_label(settings, count, seed, cache=out / "teacher", shipped=shipped)
    if not todo:
        return None
    workers = max(1, min(config.labelling_workers(), os.cpu_count() or 1, todo))
    seconds = math.ceil(todo / workers) * LABEL_SECONDS_PER_CHUNK
    why = "" if total == todo else f" ({total - todo} of its {total} chunks are held already)"
    hint = (
        "only seed 0 on 6x7 has shipped labels (--teacher-seed 0 reads them in seconds)"
        if shipped
        else "--teacher-labels shipped reads the shipped ones instead where they hold them"
    )
    return (
        f"this run labels {todo * CHUNK:,} teacher positions itself with the exact solver"
        f"{why}: {minutes(seconds)} on {workers} worker(s) (estimated at "
        f"{LABEL_SECONDS_PER_CHUNK:.0f} s a chunk of 250); {hint}"
    )


def teaching_plan(
    config: TrainConfig,
    out: Path,
    policy: MaskableActorCriticPolicy,
    data: TeacherTensors,
    batch_size: int,
    budget: Budget,
    settings: dict[str, Any],
    log: Callable[[str], None],
) -> TeachingPlan:
    """The supervised passes of this run: the ones planned by an earlier session of it (the
    passes it saved belong to them), else the ones that fit ``budget`` at the speed of
    :data:`TIMED_BATCHES` timed batches (all of them without a bound), saved for the next."""
    path = out / TEACHER_PLAN_FILE
    key = json.dumps([settings, len(data)], sort_keys=True)
    saved = _read_plan(path, key)
    if saved is not None:
        log(f"teaching as planned before ({path.name}): {_describe(saved)}")
        return saved
    per_batch = seconds_per_batch(policy, data, batch_size, TIMED_BATCHES)
    allowed, reason = _teaching_allowed(config, budget, len(data), batch_size, per_batch)
    plan = plan_teaching(config.teacher_epochs, len(data), batch_size, per_batch, allowed, reason)
    fields = {"epochs": plan.epochs, "positions": plan.positions, "seconds": plan.seconds}
    write_json(path, {"key": key, **fields, "note": plan.note})
    if plan.note:
        log(plan.note + "; --max-minutes 0 teaches all of them")
    return plan


def _teaching_allowed(
    config: TrainConfig, budget: Budget, positions: int, batch_size: int, per_batch: float
) -> tuple[float, str]:
    """The seconds the passes may take, and the reason given where that cuts them: the
    teacher's share of the budget, or less where only so do PPO's steps, estimated at the timed
    ``per_batch``, fit after them (:meth:`connectx_train.budget.Budget.teaching_for_ppo`)."""
    if not budget.bounded:
        return math.inf, ""
    ppo = ppo_seconds(
        config.timesteps,
        config.n_envs * config.n_steps,
        config.n_epochs,
        config.teacher_replay * batch_size,
        per_batch / batch_size,
    )
    whole = passes_seconds(config.teacher_epochs, positions, batch_size, per_batch)
    for_ppo = budget.teaching_for_ppo(ppo, whole)
    if for_ppo is None:
        return budget.teaching_allowed(), "to keep PPO's share of --max-minutes"
    steps = f"{config.timesteps:,} steps (est. {minutes(ppo)})"
    return for_ppo, f"so that all of PPO's {steps} fit in --max-minutes"


def describe_teaching(plan: TeachingPlan) -> str:
    """The teaching part of the budget line."""
    return f"{minutes(plan.seconds)} ({_describe(plan)}, est. from {TIMED_BATCHES} timed batches)"


def _describe(plan: TeachingPlan) -> str:
    return f"{plan.epochs} passes over {plan.positions:,} positions"


def _read_plan(path: Path, key: str) -> TeachingPlan | None:
    try:
        saved = json.loads(path.read_text())
        if saved.get("key") != key:
            return None
        return TeachingPlan(
            int(saved["epochs"]), int(saved["positions"]), float(saved["seconds"]), saved["note"]
        )
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None  # none, or not one of ours: planned anew


def teach(
    setup: RunSetup,
    policy: MaskableActorCriticPolicy,
    teacher: TeacherTensors,
    labelling_seconds: float,
    log: Callable[[str], None],
) -> float:
    """The supervised passes over ``teacher`` that fit the budget (planned once per run,
    announced); returns the wall seconds of passes made by earlier, interrupted sessions.
    Raises :class:`connectx_train.budget.TimeLimitReachedError` at the bound and
    ``KeyboardInterrupt`` on a signal, the passes done kept in ``out/teacher_progress.pt``."""
    config, out, budget = setup.config, setup.out, setup.budget
    settings = teaching_settings(config)
    plan = teaching_plan(config, out, policy, teacher, TEACHER_BATCH, budget, settings, log)
    labelled = f"{minutes(labelling_seconds)} (done)"
    log(budget.describe(describe_teaching(plan), labelled, plan.seconds))
    log(f"teaching the policy {plan.epochs} passes over {plan.positions} positions")
    taught = pretrain_policy(
        policy,
        subset(teacher, plan.positions, config.seed + 4),
        epochs=plan.epochs,
        batch_size=TEACHER_BATCH,
        learning_rate=config.teacher_learning_rate,
        seed=config.seed,
        log=log,
        progress=out / TEACHER_PROGRESS_FILE,
        settings=settings,
        stop=budget.over,
    )
    return taught["earlier_seconds"]


def teaching_settings(config: TrainConfig) -> dict[str, Any]:
    """The settings that shape the taught network: all but those of one session (where the run
    goes, its time limit, threads and processes, device, progress display) and the averaging at
    its end, so a rerun with another ``--max-minutes`` or on another device still goes on from
    the saved supervised passes."""
    return config.learning_settings()  # all but the settings declared OnResume.FREE


class TeacherReplay:
    """After each rollout, ``batches`` supervised minibatches of teacher positions (their own
    Adam, at PPO's current learning rate), so PPO's updates do not wash out what was taught.

    :meth:`state_dict` is what a checkpoint keeps of it (:func:`connectx_train.model.save_extras`):
    Adam's moments and where the index generator stands, so that a resumed run goes on with them
    rather than with a fresh Adam, whose first steps move every weight by about the learning rate
    at once."""

    def __init__(self, data: TeacherTensors, batches: int, seed: int) -> None:
        self.data, self.batches = data, batches
        self.generator = torch.Generator().manual_seed(seed)
        self.optimizer: torch.optim.Optimizer | None = None
        self._saved_optimizer: dict[str, Any] | None = None  # loaded once the optimizer exists

    def state_dict(self) -> dict[str, Any]:
        """The generator's state and the optimizer's (``None`` before the first replay)."""
        optimizer = self._saved_optimizer if self.optimizer is None else self.optimizer.state_dict()
        return {"generator": self.generator.get_state(), "optimizer": optimizer}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        """Go on from :meth:`state_dict`'s ``saved`` (before the first replay; a copy is kept,
        since an optimizer's state dict holds its live tensors)."""
        optimizer = copy.deepcopy(saved["optimizer"])  # both read before either is set
        self.generator.set_state(saved["generator"])
        self._saved_optimizer = optimizer

    def replay(self, policy: Any) -> float:
        """The minibatches on ``policy`` (a MaskablePPO policy, whose optimizer's rate they
        take); returns their mean actor loss."""
        self.data = self.data.to(policy.device)  # once: the positions stay there
        if self.optimizer is None:
            self.optimizer = torch.optim.Adam(policy.parameters())
            if self._saved_optimizer is not None:
                self.optimizer.load_state_dict(self._saved_optimizer)
        for group in self.optimizer.param_groups:
            group["lr"] = policy.optimizer.param_groups[0]["lr"]
        policy.set_training_mode(True)
        total = 0.0
        for _ in range(self.batches):
            index = torch.randint(len(self.data), (TEACHER_BATCH,), generator=self.generator)
            mirror = bool(torch.rand(1, generator=self.generator) < 0.5)
            actor, critic = batch_losses(policy, self.data, index, mirror)
            self.optimizer.zero_grad()
            (actor + 0.5 * critic).backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            self.optimizer.step()
            total += actor.item()
        policy.set_training_mode(False)
        return total / max(self.batches, 1)
