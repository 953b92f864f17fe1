"""The state of a training run besides the model: one dataclass, exactly what ``state.json`` holds,
and the curriculum rules that move its stage.

The training loop (:mod:`connectx_train.trainer`) reads and writes the one :class:`RunState` of
the run; a checkpoint is the SB3 model (``checkpoint.zip``) plus :meth:`RunState.save`
(``state.json``), and ``--resume`` reads it back with :meth:`RunState.load`, which checks every
field and names the first bad one in a ``ValueError`` (a truncated or hand-edited file gives one
clear line, never a ``KeyError``). Paths in the state are relative to the run's folder, so a run
moved or copied elsewhere keeps its self-play pool (:func:`run_relative`).

The opponent curriculum: stages of opponent mixtures, easiest first, and when to move on.
:class:`Curriculum` holds the rules (stages, threshold, window, review and self-play shares); the
progress (stage, recent outcomes, history) lives in the :class:`RunState`, so that a checkpoint
saves it with everything else. The rules can be tested, replaced or extended (a league, deeper
stages) without a learner.

This module imports neither torch nor SB3.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np

from connectx_gym.logs import warn
from connectx_gym.outputs import write_text_atomically
from connectx_train.config import TrainConfig
from connectx_train.config_types import parse_mixture

__all__ = [
    "SELF_LABEL",
    "SNAPSHOT_DIRECTORY",
    "Curriculum",
    "RunState",
    "SessionClock",
    "pool_on_disk",
    "run_relative",
    "write_json",
]

#: the self-play pool's weights files, in the run's folder
SNAPSHOT_DIRECTORY = "snapshots"


@dataclass
class RunState:
    """Progress of a run: curriculum, self-play pool, evaluations, schedules, clocks, RNG."""

    #: environment steps trained so far (the model's ``num_timesteps`` at the last save)
    timesteps: int = 0
    #: curriculum stage (0-based) and the recent outcomes (1.0 win, 0.0 not) against it
    stage: int = 0
    recent: list[float] = field(default_factory=list)
    #: one entry per stage reached: ``{"stage", "timestep", "opponents"[, "win_rate_at_exit"]}``
    curriculum_history: list[dict[str, Any]] = field(default_factory=list)
    #: the self-play pool's weights files, oldest first, relative to the run's folder
    snapshots: list[str] = field(default_factory=list)
    #: periodic panel results: ``{"timestep", "games", "scores": {spec: score}}``
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    #: training win rates per opponent label at the end of each rollout
    train_curve: list[dict[str, Any]] = field(default_factory=list)
    #: step at which the next snapshot, panel evaluation and checkpoint are due
    next_snapshot: int = 0
    next_eval: int = 0
    next_checkpoint: int = 0
    #: wall seconds of the run over all sessions, and those spent in periodic evaluations
    wall_seconds: float = 0.0
    eval_seconds: float = 0.0
    #: wall seconds spent labelling the teacher positions and learning them before PPO
    teacher_seconds: float = 0.0
    #: whether the last session stopped at ``--max-minutes``
    stopped_by_time: bool = False
    #: the final panel once played (``{"games", "results", "seconds"}``): a resumed finish
    #: reuses it
    final_panel: dict[str, Any] | None = None
    #: draws the opponents of each rollout (its bit generator's state is saved)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))

    def to_json(self) -> dict[str, Any]:
        """The state as a JSON-ready dict (the generator as its bit generator's state)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["rng"] = self.rng.bit_generator.state
        return data

    @classmethod
    def from_json(cls, data: Any, source: str = "state") -> RunState:
        """A state from :meth:`to_json`'s dict; ``ValueError`` naming ``source`` and the first
        missing or malformed field."""
        if not isinstance(data, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(data).__name__}")
        data = {"teacher_seconds": 0.0, **_from_first_layout(data)}  # older runs had no teacher
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [name for name in names if name not in data]
        if missing:
            raise ValueError(f"{source}: missing {', '.join(missing)} (not a run's state file)")
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ValueError(f"{source}: unknown fields {', '.join(unknown)}")
        for name in ("timesteps", "stage", "next_snapshot", "next_eval", "next_checkpoint"):
            _check(source, name, data[name], int, lambda v: v >= 0)
        for name in ("wall_seconds", "eval_seconds", "teacher_seconds"):
            _check(source, name, data[name], (int, float), lambda v: math.isfinite(v) and v >= 0)
        _check(source, "stopped_by_time", data["stopped_by_time"], bool)
        _check(source, "recent", data["recent"], list, _all(lambda v: v in (0, 1)))
        _check(source, "snapshots", data["snapshots"], list, _all(lambda v: isinstance(v, str)))
        for name in ("curriculum_history", "evaluations", "train_curve"):
            _check(source, name, data[name], list, _all(lambda v: isinstance(v, dict)))
        _check(source, "curriculum_history", data["curriculum_history"], list, bool)
        if data["final_panel"] is not None:
            _check(source, "final_panel", data["final_panel"], dict, _final_panel_ok)
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = data["rng"]
        except (TypeError, ValueError, KeyError) as error:
            raise ValueError(f"{source}: field rng is not a generator state ({error})") from None
        values = {**data, "rng": rng, "recent": [float(v) for v in data["recent"]]}
        values["snapshots"] = [run_relative(path) for path in data["snapshots"]]
        return cls(**values)

    def save(self, path: Path) -> None:
        """Write :meth:`to_json` to ``path`` atomically."""
        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> RunState:
        """Read a state written by :meth:`save`; ``ValueError`` (naming ``path``) if it is not
        one."""
        try:
            data = json.loads(Path(path).read_text())
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
            raise ValueError(f"{path}: not a JSON state file ({error})") from None
        return cls.from_json(data, str(path))


#: the mixture label of games against a snapshot of the agent itself
SELF_LABEL = "self"


@dataclass(frozen=True)
class Curriculum:
    """Opponent stages, easiest first; moves on when the win rate over the last ``window``
    episodes against the current stage reaches ``threshold``."""

    stages: tuple[tuple[tuple[str, float], ...], ...]
    threshold: float
    window: int
    review_weight: float = 0.0
    selfplay_weight: float = 0.0
    selfplay_from_stage: int = 0

    def __post_init__(self) -> None:
        if not self.stages or not all(self.stages):
            raise ValueError("a curriculum needs at least one stage, each with an opponent")

    @classmethod
    def from_config(cls, config: TrainConfig) -> Curriculum:
        """The curriculum of ``config`` (one fixed stage when ``--opponent`` is given)."""
        if config.opponent:
            stages = [[item for m in config.opponent for item in parse_mixture(m)]]
        else:
            stages = [parse_mixture(m) for m in config.curriculum]
        return cls(
            tuple(tuple(stage) for stage in stages),
            config.advance_threshold,
            config.advance_window,
            config.review_weight,
            config.selfplay_weight,
            config.selfplay_from_stage,
        )

    def start(self, state: RunState) -> None:
        """Put a new run's ``state`` at stage 0."""
        state.stage, state.recent = 0, []
        state.curriculum_history = [{"stage": 0, "timestep": 0, "opponents": self.labels(0)}]

    def resume(self, state: RunState) -> None:
        """Fit a loaded ``state`` to these stages (a shorter curriculum ends at its last)."""
        state.stage = min(state.stage, len(self.stages) - 1)

    def labels(self, stage: int) -> list[str]:
        """Specs of ``stage``."""
        return [spec for spec, _ in self.stages[stage]]

    def mixture(self, stage: int, selfplay_available: bool) -> list[tuple[str, float]]:
        """``(label, probability)`` of each opponent for the next rollout at ``stage`` (label
        :data:`SELF_LABEL`: a snapshot of the agent)."""
        review = self.review_weight if stage > 0 else 0.0
        selfplay = (
            self.selfplay_weight
            if selfplay_available and stage >= self.selfplay_from_stage
            else 0.0
        )
        main = self.stages[stage]
        total = sum(w for _, w in main)
        items = [(spec, (1 - review - selfplay) * w / total) for spec, w in main]
        earlier = [spec for past in self.stages[:stage] for spec, _ in past]
        items += [(spec, review / len(earlier)) for spec in earlier] if review else []
        items += [(SELF_LABEL, selfplay)] if selfplay else []
        return items

    def record(self, state: RunState, label: str, won: bool) -> None:
        """Count one finished episode against ``label`` (only the current stage's count)."""
        if label in self.labels(state.stage):
            state.recent.append(1.0 if won else 0.0)
            del state.recent[: -self.window]

    @staticmethod
    def win_rate(state: RunState) -> float:
        """Win rate over the recent episodes against the current stage (NaN before any)."""
        return sum(state.recent) / len(state.recent) if state.recent else math.nan

    def maybe_advance(self, state: RunState, timestep: int) -> bool:
        """Move to the next stage if the window is full and its win rate passes the threshold."""
        if state.stage + 1 >= len(self.stages) or len(state.recent) < self.window:
            return False
        rate = self.win_rate(state)
        if rate < self.threshold:
            return False
        state.curriculum_history[-1]["win_rate_at_exit"] = rate
        state.stage += 1
        state.recent = []
        entry: dict[str, Any] = {
            "stage": state.stage,
            "timestep": timestep,
            "opponents": self.labels(state.stage),
        }
        state.curriculum_history.append(entry)
        return True


class SessionClock:
    """Wall time of this session (from its making), and, once :meth:`attach` gives it the run's
    state, of the whole run in ``state.wall_seconds`` (earlier sessions plus this one, brought up
    to date by :meth:`update`)."""

    def __init__(self, state: RunState | None = None) -> None:
        self.start = time.perf_counter()
        self.state = RunState() if state is None else state
        self.attach(self.state)

    def attach(self, state: RunState) -> None:
        """Count the run's wall time in ``state``, from the time and steps it holds."""
        self.state = state
        self.earlier = state.wall_seconds
        self.start_steps = state.timesteps

    def session_seconds(self) -> float:
        """Seconds since this session started."""
        return time.perf_counter() - self.start

    def update(self) -> None:
        """Set ``state.wall_seconds`` to the run's wall time so far."""
        self.state.wall_seconds = self.earlier + self.session_seconds()


def run_relative(path: str) -> str:
    """A self-play pool entry as the state keeps it: relative to the run's folder. An absolute
    path (as states of earlier versions kept them) inside a ``snapshots`` folder names the
    snapshot of that name in the current run's folder, wherever the run was when it was saved;
    other paths are kept as they are."""
    pure = PurePath(path)
    if pure.is_absolute() and pure.parent.name == SNAPSHOT_DIRECTORY:
        return f"{SNAPSHOT_DIRECTORY}/{pure.name}"
    return path


def pool_on_disk(out: Path, snapshots: list[str], log: Callable[[str], None]) -> list[str]:
    """The self-play pool's snapshots found in ``out``; the log names those missing."""
    missing = [path for path in snapshots if not (out / path).is_file()]
    if missing:
        warn(
            log,
            f"self-play pool: {len(missing)} of its {len(snapshots)} snapshots are missing "
            f"from {out} ({', '.join(missing)}); the pool goes on without them",
        )
    return [path for path in snapshots if path not in missing]


def _from_first_layout(data: dict[str, Any]) -> dict[str, Any]:
    """A ``state.json`` written before the split of the trainer (keys ``num_timesteps``,
    ``curriculum``, ``next``) in today's layout, so that older runs can still be resumed."""
    if "num_timesteps" not in data or not isinstance(data.get("curriculum"), dict):
        return data
    try:
        curriculum = data["curriculum"]
        next_eval, next_checkpoint, next_snapshot = data["next"]
        return {
            "timesteps": data["num_timesteps"],
            "stage": curriculum["stage"],
            "recent": curriculum["recent"],
            "curriculum_history": curriculum["history"],
            "snapshots": data["snapshots"],
            "evaluations": data["evaluations"],
            "train_curve": data["train_curve"],
            "next_snapshot": next_snapshot,
            "next_eval": next_eval,
            "next_checkpoint": next_checkpoint,
            "wall_seconds": data["wall_seconds"],
            "eval_seconds": data["eval_seconds"],
            "stopped_by_time": False,
            "final_panel": None,
            "rng": data["rng"],
        }
    except (KeyError, TypeError, ValueError):
        return data  # reported field by field by from_json


def _check(source: str, name: str, value: Any, kind: Any, ok: Any = None) -> None:
    if isinstance(value, bool) and kind in (int, (int, float)):
        kind_ok = False
    else:
        kind_ok = isinstance(value, kind)
    if not kind_ok or (ok is not None and not ok(value)):
        raise ValueError(f"{source}: field {name} has a bad value {_short(value)}")


def _all(test: Any) -> Any:
    return lambda values: all(test(v) for v in values)


def _final_panel_ok(panel: dict[str, Any]) -> bool:
    return (
        isinstance(panel.get("results"), dict)
        and isinstance(panel.get("games"), int)
        and isinstance(panel.get("seconds"), int | float)
        and isinstance(panel.get("averaged_snapshots", []), list)
        and all(isinstance(step, int) for step in panel.get("averaged_snapshots", []))
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (:func:`connectx_gym.outputs.write_text_atomically`)."""
    write_text_atomically(path, json.dumps(data, indent=2, default=float))
