"""The run's SB3 callbacks, one job each, combined with SB3's ``CallbackList``.

All of them read and write one shared :class:`~connectx_train.state.RunState` (what ``state.json``
stores), so a checkpoint saves the whole run whichever callback changed it:

- :class:`CurriculumCallback`: hands out each rollout's opponents, records episode outcomes,
  moves the curriculum on and logs training win rates;
- :class:`SelfPlayCallback`: freezes the agent's weights into the self-play pool;
- :class:`PanelEvalCallback`: plays the evaluation panel every ``eval_every`` steps;
- :class:`PeriodicCheckpointCallback`: saves a checkpoint every ``checkpoint_every`` steps;
- :class:`TimeLimitCallback`: stops training at ``--max-minutes`` and logs steps per second;
- :class:`WallSplitCallback`: times rollouts and PPO updates for the report (added by the trainer,
  which reads it).

:func:`run_callbacks` builds them in the order the run uses (the order matters for
reproducibility: opponents are drawn from the state's generator).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from connectx_gym.bitboard import Geometry
from connectx_gym.files import save_weights
from connectx_gym.weights import WeightsFile
from connectx_train.budget import minutes
from connectx_train.config import TrainConfig
from connectx_train.curriculum import Curriculum
from connectx_train.device_snapshots import snapshot_device
from connectx_train.model import evaluate_panel, model_weights, perfect_play_rates
from connectx_train.opponents import queue_opponents
from connectx_train.state import RunState, SessionClock

__all__ = [
    "CurriculumCallback",
    "PanelEvalCallback",
    "PeriodicCheckpointCallback",
    "SelfPlayCallback",
    "TimeLimitCallback",
    "WallSplitCallback",
    "run_callbacks",
]


class CurriculumCallback(BaseCallback):
    """Draws every env's opponent at each rollout start from the curriculum's mixture, counts
    finished episodes, advances the stage and logs win rates (``win_rate/LABEL``)."""

    def __init__(
        self, curriculum: Curriculum, state: RunState, announce: Callable[[str], None] | None
    ) -> None:
        super().__init__()
        self.curriculum, self.state, self.announce = curriculum, state, announce
        self.outcomes: dict[str, deque[float]] = {}
        self.snapshot_weights: dict[str, WeightsFile] = {}  # read once, not at every rollout

    def _on_training_start(self) -> None:
        self.queue_opponents()

    def _on_rollout_start(self) -> None:
        self.queue_opponents()

    def queue_opponents(self) -> None:
        """Queue each env's opponent for the next rollout."""
        state = self.state
        mixture = self.curriculum.mixture(state.stage, selfplay_available=bool(state.snapshots))
        queue_opponents(
            self.training_env,
            mixture,
            state.snapshots,
            state.rng,
            self.snapshot_weights,
            snapshot_device(self.model.device),
        )

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done and "opponent" in info:
                label = info["opponent"]
                won = info.get("winner") == info.get("agent_mark")
                self.curriculum.record(self.state, label, won)
                self.outcomes.setdefault(label, deque(maxlen=200)).append(float(won))
        if self.curriculum.maybe_advance(self.state, self.num_timesteps) and self.announce:
            labels = self.curriculum.labels(self.state.stage)
            self.announce(f"step {self.num_timesteps}: curriculum -> {labels}")
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("curriculum/stage", self.state.stage)
        win_rate = self.curriculum.win_rate(self.state)
        if not math.isnan(win_rate):
            self.logger.record("curriculum/win_rate", win_rate)
        point: dict[str, float | int] = {
            "timestep": int(self.num_timesteps),
            "stage": self.state.stage,
        }
        for label, outcomes in self.outcomes.items():
            if outcomes:
                rate = sum(outcomes) / len(outcomes)
                self.logger.record(f"win_rate/{label}", rate)
                point[label] = rate
        self.state.train_curve.append(point)


class SelfPlayCallback(BaseCallback):
    """Every ``every`` steps, saves the agent's weights as ``snapshots/step_*.npz`` and keeps
    the newest ``pool_size`` of them in ``state.snapshots`` (the self-play pool)."""

    def __init__(
        self, state: RunState, out: Path, geometry: Geometry, every: int, pool_size: int
    ) -> None:
        super().__init__()
        self.state, self.out, self.geometry = state, out, geometry
        self.every, self.pool_size = every, pool_size

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.state.next_snapshot:
            self.state.next_snapshot += self.every
            self.add_snapshot()
        return True

    def add_snapshot(self) -> None:
        """Freeze the current weights into the self-play pool."""
        directory = self.out.resolve() / "snapshots"
        directory.mkdir(exist_ok=True)
        path = directory / f"step_{self.num_timesteps:09d}.npz"
        save_weights(model_weights(self.model, self.geometry), path)
        self.state.snapshots = [*self.state.snapshots, str(path)][-self.pool_size :]


class PanelEvalCallback(BaseCallback):
    """Every ``eval_every`` steps (never when 0), plays the panel deterministically and logs
    ``eval/SPEC`` scores and the mistake rate on the labelled positions' dev split
    (``eval/mistake_rate_dev``); results go to ``state.evaluations``."""

    def __init__(self, state: RunState, config: TrainConfig, geometry: Geometry) -> None:
        super().__init__()
        self.state, self.config, self.geometry = state, config, geometry

    def _on_step(self) -> bool:
        every = self.config.eval_every
        if every and self.num_timesteps >= self.state.next_eval:
            self.state.next_eval += every
            self.evaluate()
        return True

    def evaluate(self) -> None:
        """Play the panel with the current weights and record the scores."""
        started = time.perf_counter()
        games = self.config.eval_games
        weights = model_weights(self.model, self.geometry)
        results = evaluate_panel(weights, self.config.panel, games, self.config.seed + 1)
        for spec, result in results.items():
            self.logger.record(f"eval/{spec}", result["score"])
        entry = {
            "timestep": int(self.num_timesteps),
            "games": games,
            "scores": {spec: r["score"] for spec, r in results.items()},
        }
        rates = perfect_play_rates(weights, "dev")
        if rates is not None:
            entry["mistake_rate"] = rates["overall"]["mistake_rate"]
            self.logger.record("eval/mistake_rate_dev", entry["mistake_rate"])
        self.state.evaluations.append(entry)
        self.state.eval_seconds += time.perf_counter() - started


class PeriodicCheckpointCallback(BaseCallback):
    """Every ``every`` steps, calls ``save`` (the run's checkpoint: model and state)."""

    def __init__(self, state: RunState, every: int, save: Callable[[], None]) -> None:
        super().__init__()
        self.state, self.every, self.save = state, every, save

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.state.next_checkpoint:
            self.state.next_checkpoint += self.every
            self.save()
        return True


class TimeLimitCallback(BaseCallback):
    """Stops training once this session has run ``deadline`` seconds (``math.inf``: never; the
    run's :meth:`connectx_train.budget.Budget.ppo_deadline`, which leaves the final panel its time),
    setting ``state.stopped_by_time``; logs ``time/steps_per_second`` of the session and, with
    ``announce``, a progress line every ``every`` seconds with the time left."""

    def __init__(
        self,
        state: RunState,
        clock: SessionClock,
        deadline: float,
        announce: Callable[[str], None] | None = None,
        every: float = 60.0,
    ) -> None:
        super().__init__()
        self.state, self.clock, self.deadline = state, clock, deadline
        self.announce, self.every = announce, every
        self.started = self.last = 0.0
        self.total = self.first = 0

    def _on_training_start(self) -> None:
        self.started = self.last = self.clock.session_seconds()
        self.first = self.num_timesteps
        # SB3's learn() sets the target it goes to: the steps done and those asked for now
        self.total = int(self.locals.get("total_timesteps", self.model._total_timesteps))

    def _on_step(self) -> bool:
        now = self.clock.session_seconds()
        if now > self.deadline:
            self.state.stopped_by_time = True
            return False
        if self.announce is not None and now - self.last >= self.every:
            self.last = now
            self.announce(self.progress_line(now))
        return True

    def progress_line(self, now: float) -> str:
        """``PPO: step N/M, K steps/s, ~T min left`` (bounded by the deadline when sooner)."""
        rate = (self.num_timesteps - self.first) / max(now - self.started, 1e-9)
        steps_left = max(self.total - self.num_timesteps, 0)
        left = steps_left / rate if rate > 0 else math.inf
        capped = " (the time limit first)" if now + left > self.deadline else ""
        left = min(left, self.deadline - now)
        return (
            f"PPO: step {self.num_timesteps:,}/{self.total:,}, {rate:.0f} steps/s, "
            f"{minutes(left)} left{capped}"
        )

    def _on_rollout_end(self) -> None:
        steps = self.num_timesteps - self.clock.start_steps
        rate = steps / max(self.clock.session_seconds(), 1e-9)
        self.logger.record("time/steps_per_second", rate)


class WallSplitCallback(BaseCallback):
    """Times this session's rollouts (env steps, opponents, the policy's forward passes and the
    other callbacks' work) and PPO updates (from a rollout's end to the next one's start), for
    the report's split of wall time."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_seconds = self.update_seconds = 0.0
        self._mark: float | None = None

    def _on_step(self) -> bool:
        return True

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            self.update_seconds += now - self._mark
        self._mark = now

    def _on_rollout_end(self) -> None:
        now = time.perf_counter()
        if self._mark is not None:
            self.rollout_seconds += now - self._mark
        self._mark = now

    def _on_training_end(self) -> None:
        if self._mark is not None:
            self.update_seconds += time.perf_counter() - self._mark
            self._mark = None


def run_callbacks(
    config: TrainConfig,
    out: Path,
    curriculum: Curriculum,
    state: RunState,
    clock: SessionClock,
    save_checkpoint: Callable[[], None],
    announce: Callable[[str], None] | None,
    deadline: float = math.inf,
) -> CallbackList:
    """The callbacks of a run, in order, sharing ``state``; PPO stops at ``deadline`` session
    seconds."""
    geometry = config.geometry
    return CallbackList(
        [
            CurriculumCallback(curriculum, state, announce),
            SelfPlayCallback(state, out, geometry, config.snapshot_every, config.pool_size),
            PanelEvalCallback(state, config, geometry),
            PeriodicCheckpointCallback(state, config.checkpoint_every, save_checkpoint),
            TimeLimitCallback(state, clock, deadline, announce),
        ]
    )
