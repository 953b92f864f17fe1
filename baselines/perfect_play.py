"""Play measured against perfect play: the one judge of a policy's moves, for every position set.

A move is

- a **mistake** when it loses game value: it turns a won position into a draw or a loss, or a
  drawn one into a loss (the sign of its exact score is below the sign of the best score);
- **perfect** when its exact score is the best score (it also keeps the fastest win or the
  slowest loss).

An illegal answer counts as a mistake. :func:`evaluate_policy` judges a policy on any set of
:mod:`connectx_baselines.position_sets` and returns one :class:`PerfectPlayResult`: rates with 95%
Wilson intervals, per phase and overall. On the shipped labelled positions (the default; made by
``tools/make_positions.py``) the exact score of every move is in the file; on Pons' files (the
position's score is known) and on any boards, the solver judges the move played, and a position
it cannot settle within ``node_limit`` / ``time_limit`` is counted as unsolved and left out. Use
the ``test`` split for reports and the ``dev`` split for tuning (never tune on what you report)::

    from connectx_baselines.perfect_play import evaluate_policy, load_pons

    result = evaluate_policy("minimax:depth=4")          # test split, seed 0
    result.overall.mistake_rate, result.overall.mistake_ci95
    result.phases["opening"].perfect_rate
    print(result.table())                                # or result.to_dict() for JSON
    evaluate_policy("minimax:depth=4", load_pons("Test_L2_R1", limit=200), time_limit=5)

Evaluation is deterministic for a seed: the policy is reset before each position, and position
``i`` of the evaluated set draws from its own generator, ``default_rng(SeedSequence(seed).spawn(n)
[i])``, so each answer depends on its position only and ``evaluate_policy(...,
executor=RayExecutor())`` (:mod:`connectx_gym.ray_executor`) gives the same result as the local run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectx_baselines.position_sets import (
    DEFAULT_POSITIONS,
    POSITION_SETS,
    RANDOM_POSITIONS,
    SPLITS,
    LabelledPositions,
    PonsPosition,
    load_pons,
    load_positions,
    pons_files,
    positions_from_games,
)
from connectx_baselines.solver import SearchLimitError, get_solver
from connectx_gym.bitboard import Board
from connectx_gym.match import wilson_interval
from connectx_gym.policy import (
    IllegalMoveError,
    Policy,
    PositionExecutor,
    PositionJob,
    answer_position,
    validate_answer,
)
from connectx_gym.registry import make_policy

__all__ = [
    "DEFAULT_POSITIONS",
    "POSITION_SETS",
    "RANDOM_POSITIONS",
    "SPLITS",
    "LabelledPositions",
    "PerfectPlayResult",
    "PhaseResult",
    "PonsPosition",
    "SetResults",
    "evaluate_policy",
    "evaluate_pons_sets",
    "evaluate_sets",
    "judge_moves",
    "load_pons",
    "load_positions",
    "positions_from_games",
]


def judge_moves(
    scores: np.ndarray, columns: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(mistake, perfect)`` boolean arrays for playing ``columns[i]`` in position ``i``.

    ``scores`` is ``[n, columns]`` exact scores, NaN for illegal columns; an illegal or
    out-of-range column is a mistake and not perfect.
    """
    scores = np.asarray(scores, dtype=np.float64)
    chosen = np.asarray(columns, dtype=np.int64)
    n, width = scores.shape
    legal = (chosen >= 0) & (chosen < width)
    played = np.full(n, np.nan)
    played[legal] = scores[np.arange(n)[legal], chosen[legal]]
    best = np.nanmax(scores, axis=1)
    valid = ~np.isnan(played)
    mistake = ~valid | (np.sign(np.where(valid, played, 0)) < np.sign(best))
    perfect = valid & (np.where(valid, played, -np.inf) == best)
    return mistake, perfect


@dataclass(frozen=True)
class PhaseResult:
    """Mistakes and perfect moves over ``positions`` judged positions, with 95% Wilson intervals.

    ``critical`` counts the positions where a mistake was possible at all (some legal move
    loses value; None where the set does not score every move, as Pons' files); in the others
    every move keeps the value. ``unsolved`` positions, which the solver could not settle within
    its limits, are left out of the rest.
    """

    positions: int
    mistakes: int
    perfect: int
    critical: int | None
    illegal: int = 0
    unsolved: int = 0

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
            "unsolved": self.unsolved,
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
        if self.overall.unsolved:
            lines += ["", f"{self.overall.unsolved} positions unsolved within the limits, left out"]
        return "\n".join(lines)


@dataclass(frozen=True)
class SetResults:
    """One policy's results on several position sets (by set name), side by side."""

    policy: str
    seed: int | None
    results: dict[str, PerfectPlayResult]
    #: what the sets are, for the table's heading (a split, a limit)
    about: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: ``sets`` holds each set's :meth:`PerfectPlayResult.to_dict`."""
        return {
            "policy": self.policy,
            "seed": self.seed,
            "about": self.about,
            "sets": {name: result.to_dict() for name, result in self.results.items()},
        }

    def table(self) -> str:
        """A Markdown table: sets with phases (the labelled sets) side by side, a row per phase
        and all positions; sets without phases (Pons' files), a row per set."""
        heading = f"{self.policy} against perfect play ({self.about}, seed {self.seed})"
        if all(result.phases for result in self.results.values()):
            return "\n".join([heading, "", *self._phase_rows()])
        lines = [
            heading,
            "",
            "| set | positions | mistakes (95% CI) | perfect moves (95% CI) | unsolved |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, result in self.results.items():
            lines.append(f"| {name} | {result.overall.positions} | {_rates(result.overall)} "
                         f"| {result.overall.unsolved} |")  # fmt: skip
        return "\n".join(lines)

    def _phase_rows(self) -> list[str]:
        names = list(self.results)
        head = "| phase | " + " | ".join(
            f"{name}: positions | mistakes (95% CI) | perfect moves (95% CI)" for name in names
        )
        lines = [head + " |", "|---|" + "---:|---:|---:|" * len(names)]
        phases = list(dict.fromkeys(p for result in self.results.values() for p in result.phases))
        for phase in [*phases, "all"]:
            cells = []
            for result in self.results.values():
                found = result.overall if phase == "all" else result.phases.get(phase)
                cells.append(f"{found.positions} | {_rates(found)}" if found else "- | |")
            lines.append(f"| {phase} | " + " | ".join(cells) + " |")
        return lines


def _rates(result: PhaseResult) -> str:
    """``mistakes (95% CI) | perfect (95% CI)`` cells."""
    (ml, mh), (pl, ph) = result.mistake_ci95, result.perfect_ci95
    return (
        f"{result.mistake_rate:.1%} ({ml:.1%}-{mh:.1%}) | "
        f"{result.perfect_rate:.1%} ({pl:.1%}-{ph:.1%})"
    )


def evaluate_sets(
    policy: str | Policy,
    *,
    split: str = "test",
    seed: int | None = 0,
    executor: PositionExecutor | None = None,
    sets: dict[str, str | Path] | None = None,
) -> SetResults:
    """``policy`` on each labelled set of ``sets`` (default :data:`POSITION_SETS`: the game
    split and the random split), the same ``split`` of each, as :func:`evaluate_policy`."""
    sets = dict(POSITION_SETS) if sets is None else sets
    results = {
        name: evaluate_policy(policy, split=split, seed=seed, path=path, executor=executor)
        for name, path in sets.items()
    }
    label = next(iter(results.values())).policy
    return SetResults(label, seed, results, f"{split} split")


def evaluate_pons_sets(
    policy: str | Policy,
    directory: str | Path,
    *,
    limit: int | None = None,
    seed: int | None = 0,
    node_limit: int | None = None,
    time_limit: float | None = None,
) -> SetResults:
    """``policy`` on the first ``limit`` positions of each Pons benchmark file of ``directory``
    (:func:`~connectx_baselines.position_sets.pons_files`), judged by the solver as in
    :func:`evaluate_policy`."""
    results = {
        name: evaluate_policy(
            policy,
            load_pons(path, limit=limit),
            seed=seed,
            node_limit=node_limit,
            time_limit=time_limit,
        )
        for name, path in pons_files(directory).items()
    }
    label = next(iter(results.values())).policy
    about = "Pons' sets" + (f", the first {limit} positions of each" if limit else "")
    return SetResults(label, seed, results, about)


def _summarise(
    mistake: np.ndarray, perfect: np.ndarray, critical: np.ndarray, illegal: np.ndarray
) -> PhaseResult:
    return PhaseResult(
        int(mistake.size), int(mistake.sum()), int(perfect.sum()), int(critical.sum()),
        int(illegal.sum()),
    )  # fmt: skip


def evaluate_policy(
    policy: str | Policy,
    positions: LabelledPositions | Iterable[Board | PonsPosition] | None = None,
    *,
    split: str = "test",
    seed: int | None = 0,
    path: str | Path | None = None,
    executor: PositionExecutor | None = None,
    node_limit: int | None = None,
    time_limit: float | None = None,
) -> PerfectPlayResult:
    """``policy``'s mistake and perfect-move rates on ``positions``.

    ``positions`` default to ``load_positions(path, split)`` (the shipped set's test split); they
    may be other :class:`LabelledPositions`, or boards and :class:`PonsPosition` (terminal boards
    skipped), which the solver judges within ``node_limit`` / ``time_limit`` per solver call (up
    to three per position). The policy (a spec or a :class:`~connectx_gym.policy.Policy`) is reset
    before each position; position ``i`` draws from the ``i``-th child of
    ``numpy.random.SeedSequence(seed)``. ``executor`` (e.g.
    ``connectx_gym.ray_executor.RayExecutor()``) answers labelled positions elsewhere, with the
    same result as the local run.
    """
    label = policy if isinstance(policy, str) else getattr(policy, "name", repr(policy))
    player = make_policy(policy)
    if positions is None:
        positions = load_positions(path, split)
    else:
        split = "given"
    if not isinstance(positions, LabelledPositions):
        if executor is not None:
            raise ValueError("an executor answers labelled positions only")
        limits = {"node_limit": node_limit, "time_limit": time_limit}
        overall = _judge_with_solver(player, label, list(positions), seed, limits)
        return PerfectPlayResult(label, split, seed, {}, overall)
    if len(positions) == 0:
        raise ValueError("no positions to evaluate")
    children = np.random.SeedSequence(seed).spawn(len(positions))
    jobs = [
        PositionJob(index, moves, child)
        for index, (moves, child) in enumerate(zip(positions.moves, children, strict=True))
    ]
    geometry = positions.geometry
    answers: Iterator[int | None]
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


def _judge_with_solver(
    player: Policy,
    label: str,
    items: list[Board | PonsPosition],
    seed: int | None,
    limits: dict[str, Any],
) -> PhaseResult:
    """The moves of ``player`` on boards (or Pons positions, whose known score spares a solve),
    judged by the solver; a position it cannot settle within ``limits`` is counted unsolved."""
    boards = [item.board if isinstance(item, PonsPosition) else item for item in items]
    known = [item.score if isinstance(item, PonsPosition) else None for item in items]
    playable = [index for index, board in enumerate(boards) if not board.is_terminal()]
    if not playable:
        raise ValueError("no positions to evaluate")
    children = np.random.SeedSequence(seed).spawn(len(playable))
    judged = mistakes = perfect = illegal = unsolved = 0
    for index, child in zip(playable, children, strict=True):
        board = boards[index]
        player.reset()
        try:
            column = validate_answer(player.act(board, np.random.default_rng(child)), board, label)
        except IllegalMoveError:
            judged, mistakes, illegal = judged + 1, mistakes + 1, illegal + 1
            continue
        solver = get_solver(board.geometry)
        try:
            best = solver.solve(board, **limits) if known[index] is None else known[index]
            kept = solver.keeps_best(board, column, best, **limits)
            # a move that keeps the best score keeps the value: a second search only otherwise
            lost = not kept and not solver.keeps_value(board, column, best, **limits)
        except SearchLimitError:
            unsolved += 1
            continue
        judged, perfect, mistakes = judged + 1, perfect + kept, mistakes + lost
    return PhaseResult(judged, mistakes, perfect, None, illegal, unsolved)


def _critical(scores: np.ndarray) -> np.ndarray:
    """Positions where some legal move has a lower value class than the best one."""
    signs = np.sign(scores)
    return np.nanmin(signs, axis=1) < np.nanmax(signs, axis=1)
