"""The teacher phase of a run, as the trainer plans it: how much teacher a run of its size gets,
what it must label itself (said first, with the time it takes), and the supervised passes that
fit the session's budget (:mod:`connectx_train.budget`), kept in ``out/teacher_plan.json`` so that
the same command goes on with the same passes after a stop."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    TEACHER_FILE,
    TeacherTensors,
    book_positions,
    own_positions,
    seconds_per_batch,
    teacher_seed,
)

__all__ = [
    "TEACHER_PLAN_FILE",
    "describe_teaching",
    "labelling_note",
    "sized_teacher",
    "teaching_plan",
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
    policy: torch.nn.Module,
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
