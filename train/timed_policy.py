"""An opponent that keeps count of its thinking time: shared by the env paths of training
(:mod:`connectx_train.opponents`, :mod:`connectx_train.batched`), in a module of its own so that the
batched env needs nothing of the other path (an import circle otherwise)."""

from __future__ import annotations

import time

import numpy as np

from connectx_gym.bitboard import Board
from connectx_gym.policy import Policy

__all__ = ["TimedPolicy"]


class TimedPolicy(Policy):
    """Delegates to ``policy`` and adds its thinking time and move count to ``ledger[label]``."""

    def __init__(self, policy: Policy, label: str, ledger: dict[str, list[float]]) -> None:
        super().__init__()
        self.policy, self.label, self.ledger = policy, label, ledger
        self.name = getattr(policy, "name", label)

    def act(self, board: Board, rng: np.random.Generator) -> int:
        started = time.perf_counter()
        column = self.policy.act(board, rng)
        entry = self.ledger.setdefault(self.label, [0.0, 0])
        entry[0] += time.perf_counter() - started
        entry[1] += 1
        return column

    def reset(self) -> None:
        self.policy.reset()
