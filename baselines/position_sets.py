"""The position sets a policy is judged on against perfect play
(:mod:`connectx_baselines.perfect_play`).

* :func:`load_positions`: the shipped labelled positions, ``baselines/data/positions.npz`` (see
  the README next to it), each with the exact score of every legal move, in a ``dev`` and a
  ``test`` split;
* :func:`load_pons`: Pascal Pons' benchmark files (6x7 positions with their exact score);
* :func:`positions_from_games`: the positions a policy meets in games.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy

__all__ = [
    "DEFAULT_POSITIONS",
    "ILLEGAL",
    "SPLITS",
    "LabelledPositions",
    "PonsPosition",
    "load_pons",
    "load_positions",
    "positions_from_games",
]

DEFAULT_POSITIONS = Path(__file__).parent / "data" / "positions.npz"
#: Split names in the file's order (``split`` array values 0 and 1), and "all".
SPLITS = ("dev", "test", "all")
#: Score stored for a full column.
ILLEGAL = -128


@dataclass(frozen=True)
class LabelledPositions:
    """Positions with the exact score of every column (NaN for full columns).

    ``moves[i]`` are the 0-based columns that reach position ``i``; ``phase[i]`` indexes
    ``phases``; ``split[i]`` is 0 for dev, 1 for test.
    """

    geometry: Geometry
    moves: tuple[tuple[int, ...], ...]
    scores: np.ndarray
    phase: np.ndarray
    split: np.ndarray
    phases: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __len__(self) -> int:
        return len(self.moves)

    def boards(self) -> list[Board]:
        """The positions as boards."""
        return [Board.from_moves(self.geometry, moves) for moves in self.moves]

    def subset(self, keep: np.ndarray) -> LabelledPositions:
        """The positions where the boolean array ``keep`` is true."""
        keep = np.asarray(keep, dtype=bool)
        return LabelledPositions(
            self.geometry,
            tuple(m for m, k in zip(self.moves, keep, strict=True) if k),
            self.scores[keep],
            self.phase[keep],
            self.split[keep],
            self.phases,
            self.meta,
        )


def load_positions(path: str | Path | None = None, split: str = "test") -> LabelledPositions:
    """The labelled positions of ``path`` (default: the shipped set), of one ``split``
    (``"test"``, ``"dev"`` or ``"all"``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    path = Path(path) if path is not None else DEFAULT_POSITIONS
    if not path.is_file():
        raise FileNotFoundError(f"no labelled positions at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            plies = data["plies"].astype(np.int64)
            moves = tuple(
                tuple(int(c) for c in row[:n]) for row, n in zip(data["moves"], plies, strict=True)
            )
            raw_scores = data["scores"]
            scores = np.where(raw_scores == ILLEGAL, np.nan, raw_scores.astype(np.float64))
            phase = data["phase"].astype(np.int64)
            split_index = data["split"].astype(np.int64)
    except (KeyError, ValueError, OSError) as error:
        raise ValueError(f"{path} is not a labelled-positions file: {error}") from None
    g = meta["geometry"]
    positions = LabelledPositions(
        Geometry(g["rows"], g["columns"], g["inarow"]),
        moves,
        scores,
        phase,
        split_index,
        tuple(meta["phases"]),
        meta,
    )
    if split == "all":
        return positions
    return positions.subset(split_index == SPLITS.index(split))


@dataclass(frozen=True)
class PonsPosition:
    """A line of Pascal Pons' benchmark files: moves (1-indexed columns), the board, its score."""

    moves: str
    board: Board
    score: int


def load_pons(path: str | Path, limit: int | None = None) -> list[PonsPosition]:
    """Positions of a Pons benchmark file (lines ``"<1-indexed columns> <score>"``, 6x7 board)."""
    geometry = Geometry(6, 7, 4)
    positions = []
    with open(path, encoding="ascii") as lines:
        for number, line in enumerate(lines, 1):
            if limit is not None and len(positions) >= limit:
                break
            if not line.strip():
                continue
            try:
                moves, score = line.split()
                board = Board.from_moves(geometry, [int(c) - 1 for c in moves])
                positions.append(PonsPosition(moves, board, int(score)))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not a Pons position: {line!r}") from error
    return positions


def positions_from_games(
    policy: str | Policy,
    games: int,
    *,
    geometry: Geometry | None = None,
    opponent: str | Policy = "random",
    seed: int | None = 0,
    openings: Sequence[Sequence[int]] = (),
) -> list[Board]:
    """The positions where ``policy`` was to move in ``games`` games against ``opponent``.

    Seats alternate (the policy moves first in even-numbered games). ``openings``, if given, are
    move sequences played before the policies take over, cycled over the games.
    """
    geometry = geometry or Geometry()
    policy, opponent = make_policy(policy), make_policy(opponent)
    rng = np.random.default_rng(seed)
    positions: list[Board] = []
    for game in range(games):
        board = Board.from_moves(geometry, openings[game % len(openings)] if openings else ())
        policy.reset()
        opponent.reset()
        ours = (board.moves + game) % 2
        while not board.is_terminal():
            if board.moves % 2 == ours:
                positions.append(board)
                board = board.play(int(policy.act(board, rng)))
            else:
                board = board.play(int(opponent.act(board, rng)))
    return positions
