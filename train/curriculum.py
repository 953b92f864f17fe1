"""The opponent curriculum: stages of opponent mixtures, easiest first, and when to move on.

:class:`Curriculum` holds the rules (stages, threshold, window, review and self-play shares); the
progress (stage, recent outcomes, history) lives in the run's
:class:`~connectx_train.state.RunState`, so that a checkpoint saves it with everything else. No SB3
or torch import: the rules can be tested, replaced or extended (a league, deeper stages) without a
learner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from connectx_train.config import TrainConfig, parse_mixture
from connectx_train.state import RunState

__all__ = ["SELF_LABEL", "Curriculum"]

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
