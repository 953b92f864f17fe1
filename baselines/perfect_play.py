"""Play measured against perfect play: mistake rates on the shipped labelled positions.

``baselines/data/positions.npz`` (made by :mod:`baselines.make_positions`; see the README next
to it) holds positions from games between policies of mixed strength, at every phase of the game,
each with the exact score of every legal move. A move is

- a **mistake** when it loses game value: it turns a won position into a draw or a loss, or a
  drawn one into a loss (the sign of its exact score is below the sign of the best score);
- **perfect** when its exact score is the best score (it also keeps the fastest win or the
  slowest loss).

An illegal answer counts as a mistake. Rates come with 95% Wilson intervals, per phase and
overall. Use the ``test`` split for reports and the ``dev`` split for tuning (never tune on what
you report)::

    from baselines.perfect_play import evaluate_policy

    result = evaluate_policy("minimax:depth=4")          # test split, seed 0
    result.overall.mistake_rate, result.overall.mistake_ci95
    result.phases["opening"].perfect_rate
    print(result.table())                                # or result.to_dict() for JSON

Evaluation is deterministic for a seed: the policy is reset before each position, and position
``i`` of the evaluated set draws from its own generator, ``default_rng(SeedSequence(seed).spawn(n)
[i])``, so each answer depends on its position only and ``evaluate_policy(...,
executor=RayExecutor())`` (:mod:`connectx_gym.ray_executor`) gives the same result as the local run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.match import wilson_interval
from connectx_gym.policy import Policy, PositionExecutor, PositionJob, answer_position
from connectx_gym.registry import make_policy

__all__ = [
    "DEFAULT_POSITIONS",
    "SPLITS",
    "LabelledPositions",
    "PerfectPlayResult",
    "PhaseResult",
    "evaluate_policy",
    "judge_moves",
    "load_positions",
]

DEFAULT_POSITIONS = Path(__file__).parent / "data" / "positions.npz"
#: Split names in the file's order (``split`` array values 0 and 1), and "all".
SPLITS = ("dev", "test", "all")
_ILLEGAL = -128


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
            scores = np.where(raw_scores == _ILLEGAL, np.nan, raw_scores.astype(np.float64))
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


def judge_moves(scores: np.ndarray, columns: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(mistake, perfect)`` boolean arrays for playing ``columns[i]`` in position ``i``.

    ``scores`` is ``[n, columns]`` exact scores, NaN for illegal columns; an illegal or
    out-of-range column is a mistake and not perfect.
    """
    scores = np.asarray(scores, dtype=np.float64)
    columns = np.asarray(columns, dtype=np.int64)
    n, width = scores.shape
    legal = (columns >= 0) & (columns < width)
    played = np.full(n, np.nan)
    played[legal] = scores[np.arange(n)[legal], columns[legal]]
    best = np.nanmax(scores, axis=1)
    valid = ~np.isnan(played)
    mistake = ~valid | (np.sign(np.where(valid, played, 0)) < np.sign(best))
    perfect = valid & (np.where(valid, played, -np.inf) == best)
    return mistake, perfect


@dataclass(frozen=True)
class PhaseResult:
    """Mistakes and perfect moves over ``positions`` positions, with 95% Wilson intervals.

    ``critical`` counts the positions where a mistake was possible at all (some legal move
    loses value); in the others every move keeps the value.
    """

    positions: int
    mistakes: int
    perfect: int
    critical: int
    illegal: int = 0

    @property
    def mistake_rate(self) -> float:
        return self.mistakes / self.positions if self.positions else float("nan")

    @property
    def perfect_rate(self) -> float:
        return self.perfect / self.positions if self.positions else float("nan")

    @property
    def mistake_ci95(self) -> tuple[float, float]:
        return wilson_interval(self.mistake_rate if self.positions else 0.0, self.positions)

    @property
    def perfect_ci95(self) -> tuple[float, float]:
        return wilson_interval(self.perfect_rate if self.positions else 0.0, self.positions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "positions": self.positions,
            "mistakes": self.mistakes,
            "mistake_rate": self.mistake_rate,
            "mistake_ci95": list(self.mistake_ci95),
            "perfect": self.perfect,
            "perfect_rate": self.perfect_rate,
            "perfect_ci95": list(self.perfect_ci95),
            "critical": self.critical,
            "illegal": self.illegal,
        }


@dataclass(frozen=True)
class PerfectPlayResult:
    """A policy's mistake and perfect-move rates, per phase (file order) and ``overall``."""

    policy: str
    split: str
    seed: int | None
    phases: dict[str, PhaseResult]
    overall: PhaseResult

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "policy": self.policy,
            "split": self.split,
            "seed": self.seed,
            "overall": self.overall.to_dict(),
            "phases": {name: result.to_dict() for name, result in self.phases.items()},
        }

    def table(self) -> str:
        """A Markdown table: one row per phase, then all positions."""
        lines = [
            f"{self.policy} against perfect play ({self.split} split, seed {self.seed})",
            "",
            "| phase | positions | mistakes | 95% CI | perfect moves | 95% CI |",
            "|---|---:|---:|---|---:|---|",
        ]
        for name, result in [*self.phases.items(), ("all", self.overall)]:
            (ml, mh), (pl, ph) = result.mistake_ci95, result.perfect_ci95
            lines.append(
                f"| {name} | {result.positions} | {result.mistake_rate:.1%} | {ml:.1%}-{mh:.1%} "
                f"| {result.perfect_rate:.1%} | {pl:.1%}-{ph:.1%} |"
            )
        return "\n".join(lines)


def _summarise(
    mistake: np.ndarray, perfect: np.ndarray, critical: np.ndarray, illegal: np.ndarray
) -> PhaseResult:
    return PhaseResult(
        int(mistake.size), int(mistake.sum()), int(perfect.sum()), int(critical.sum()),
        int(illegal.sum()),
    )  # fmt: skip


def evaluate_policy(
    policy: str | Policy,
    positions: LabelledPositions | None = None,
    *,
    split: str = "test",
    seed: int | None = 0,
    path: str | Path | None = None,
    executor: PositionExecutor | None = None,
) -> PerfectPlayResult:
    """``policy``'s mistake and perfect-move rates on labelled ``positions``.

    ``positions`` default to ``load_positions(path, split)`` (the shipped set's test split).
    The policy (a spec or a :class:`~connectx_gym.policy.Policy`) is reset before each position;
    position ``i`` draws from the ``i``-th child of ``numpy.random.SeedSequence(seed)``.
    ``executor`` (e.g. ``connectx_gym.ray_executor.RayExecutor()``) answers the positions
    elsewhere, with the same result as the local run.
    """
    label = policy if isinstance(policy, str) else getattr(policy, "name", repr(policy))
    player = make_policy(policy)
    if positions is None:
        positions = load_positions(path, split)
    else:
        split = "given"
    if len(positions) == 0:
        raise ValueError("no positions to evaluate")
    children = np.random.SeedSequence(seed).spawn(len(positions))
    jobs = [
        PositionJob(index, moves, child)
        for index, (moves, child) in enumerate(zip(positions.moves, children, strict=True))
    ]
    geometry = positions.geometry
    if executor is None:
        answers = (answer_position(player, geometry, job, label) for job in jobs)
    else:
        answers = executor.map_positions(policy, geometry, jobs, label)
    columns = np.array([-1 if a is None else a for a in answers], dtype=np.int64)
    illegal = columns < 0
    mistake, perfect = judge_moves(positions.scores, columns)
    critical = _critical(positions.scores)
    phases = {}
    for number, name in enumerate(positions.phases):
        keep = positions.phase == number
        if keep.any():
            phases[name] = _summarise(mistake[keep], perfect[keep], critical[keep], illegal[keep])
    overall = _summarise(mistake, perfect, critical, illegal)
    return PerfectPlayResult(label, split, seed, phases, overall)


def _critical(scores: np.ndarray) -> np.ndarray:
    """Positions where some legal move has a lower value class than the best one."""
    signs = np.sign(scores)
    return np.nanmin(signs, axis=1) < np.nanmax(signs, axis=1)
