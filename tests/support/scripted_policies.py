"""Scripted policies whose games are known in advance, shared by the env, match and tournament
tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from connectx_gym import Board, Policy


class Column(Policy):
    """Always plays one column (the next legal one to its right when it is full)."""

    def __init__(self, column: int) -> None:
        super().__init__()
        self.column = column
        self.name = f"column{column}"

    def act(self, board: Board, rng: np.random.Generator) -> int:
        legal = board.legal_moves()
        return min(legal, key=lambda c: (c - self.column) % board.geometry.columns)


class Illegal(Policy):
    """Answers a column that is off the board."""

    name = "illegal"

    def act(self, board: Board, rng: np.random.Generator) -> int:
        return 99


class Script(Policy):
    """Plays the given columns in turn (cycling), whether legal or not; counts its resets."""

    name = "scripted"

    def __init__(self, columns: list[Any]) -> None:
        super().__init__()
        self.columns = list(columns)
        self.calls = 0
        self.resets = 0

    def act(self, board: Board, rng: np.random.Generator) -> Any:
        column = self.columns[self.calls % len(self.columns)]
        self.calls += 1
        return column

    def reset(self) -> None:
        self.resets += 1
