"""Generate the labelled positions of :mod:`baselines.perfect_play` (``data/positions.npz``).

Run ``python -m baselines.make_positions`` (the defaults made the shipped file; see
``baselines/data/README.md``, which this script writes next to the data).

How positions are made:

1. Games between policies of mixed strength: each game draws both players (with replacement)
   from :data:`PLAYERS` (random, onestep, minimax depths 1-4, depth-limited alpha-beta, and
   noisy ``~0.2`` versions), all moving with one seeded generator. Alpha-beta runs to a fixed
   ``max_depth`` with a generous clock, so its moves do not depend on the machine's speed.
2. From each game, one non-terminal position per phase whose ply range the game reaches (a
   uniformly drawn ply of the range). Phases are ranges of plies played (:func:`phase_bounds`).
3. Positions are deduplicated up to the horizontal mirror (across both splits), shuffled, and
   dealt alternately to the ``test`` and ``dev`` splits within each phase, so no position (nor
   its mirror) is in both. Tune on ``dev`` only; report on ``test``.
4. Each is labelled with the exact score of every legal move (:meth:`baselines.solver.Solver.
   move_scores`), under a per-position node cap (deterministic, unlike a clock). A position whose
   scores are not proven within the cap is skipped, counted in the metadata, and replaced by the
   next candidate of its phase.

The file holds ``moves`` (int8, ``[n, cells]``, 0-based columns padded with -1), ``plies``,
``scores`` (int8, ``[n, columns]``, :data:`ILLEGAL` for full columns), ``phase`` (index into the
metadata's phase names), ``split`` (0 dev, 1 test) and ``meta`` (a JSON string: geometry, seed,
command, counts, skipped positions, players, phase ranges). The file is rewritten every minute
while labelling (``"complete": false`` until the end).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from baselines.solver import SearchLimitError, Solver
from connectx_gym import _vector_kernels
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.outputs import open_atomically, write_text_atomically
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy

__all__ = [
    "DEFAULT_OUTPUT",
    "ILLEGAL",
    "PHASES",
    "PLAYERS",
    "canonical_key",
    "canonical_keys",
    "label_position",
    "main",
    "phase_bounds",
    "play_game",
    "sample_positions",
]

DEFAULT_OUTPUT = Path(__file__).parent / "data" / "positions.npz"
#: Score stored for a full column.
ILLEGAL = -128
#: Phase names and their first ply on 6x7 (each phase runs to the next one's start; the last to
#: the last ply). Fewer than 6 stones are left out: their exact scores cost 10+ s each on one core
#: (and matches cover the first plies with the two-ply openings of :mod:`connectx_gym.openings`).
PHASES: dict[str, int] = {"opening": 6, "early": 12, "middle": 19, "late": 29}
PLAYERS: tuple[str, ...] = (
    "random",
    "onestep",
    "onestep~0.2",
    "minimax:depth=1",
    "minimax:depth=2",
    "minimax:depth=2~0.2",
    "minimax:depth=3",
    "minimax:depth=3~0.2",
    "minimax:depth=4",
    "minimax:depth=4~0.2",
    "alphabeta:max_depth=6,time_budget=60",
    "alphabeta:max_depth=8,time_budget=60",
    "alphabeta:max_depth=8,time_budget=60~0.2",
)


def phase_bounds(geometry: Geometry) -> dict[str, tuple[int, int]]:
    """``{phase: (first ply, last ply)}``: :data:`PHASES`, scaled to the board's cell count."""
    cells = geometry.cells
    starts = [max(round(s * cells / 42), 1) for s in PHASES.values()]
    ends = [*(s - 1 for s in starts[1:]), cells - 1]
    return {name: (s, e) for name, s, e in zip(PHASES, starts, ends, strict=True) if s <= e}


def canonical_key(geometry: Geometry, moves: Sequence[int]) -> tuple[int, int]:
    """The smaller of the position's key and its horizontal mirror's (mirror-symmetric id)."""
    board = Board.from_moves(geometry, moves)
    mirror = Board.from_moves(geometry, [geometry.columns - 1 - c for c in moves])
    return min(board.key(), mirror.key())


def canonical_keys(geometry: Geometry, moves: np.ndarray) -> list[tuple[int, int]]:
    """:func:`canonical_key` of each row of ``moves`` (``[n, width]`` 0-based columns, padded at
    the end with -1, as the labelled sets store them), at once.

    The rows are replayed together by the batched env's kernels (one call per ply over every row
    that has a move there; :mod:`connectx_gym._vector_kernels`), then mirrored and replayed again:
    200,000 rows of 6x7 in 0.9 s on a quiet machine, where a :class:`Board` per row took about a
    minute. As with :func:`canonical_key`, a column out of range, a full column or a move after
    the game has ended is a ``ValueError``; so is a move after a row's -1 padding.
    """
    moves = np.asarray(moves)
    if moves.ndim != 2:
        raise ValueError(f"moves must be a 2-D array of rows, got shape {moves.shape}")
    played = moves >= 0
    if ((moves < -1) | (moves >= geometry.columns)).any():
        raise ValueError(f"a move is not a column of the board (0 to {geometry.columns - 1})")
    if (played[:, 1:] & ~played[:, :-1]).any():
        raise ValueError("a row has a move after its -1 padding")
    mirrored = np.where(played, geometry.columns - 1 - moves, moves)
    current, mask = _replay(geometry, moves, played)
    mirror_current, mirror_mask = _replay(geometry, mirrored, played)
    # min() of the two (current, mask) pairs, as tuples compare
    use_mirror = (mirror_current < current) | ((mirror_current == current) & (mirror_mask < mask))
    current = np.where(use_mirror, mirror_current, current)
    mask = np.where(use_mirror, mirror_mask, mask)
    return list(zip(current.tolist(), mask.tolist(), strict=True))


def _replay(
    geometry: Geometry, moves: np.ndarray, played: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``current`` and ``mask`` of each row after its moves, seen from the player to move."""
    g = geometry
    kernels = _vector_kernels.for_geometry(g.fits_64_bits)
    count, width = moves.shape
    word = np.int64 if g.fits_64_bits else object
    first, mask = np.zeros(count, dtype=word), np.zeros(count, dtype=word)  # first mover's stones
    plies, marks = np.zeros(count, dtype=np.int64), np.ones(count, dtype=np.int64)
    winner, rewards = np.full(count, -1, dtype=np.int64), np.zeros(count)
    planes = np.zeros((count, 2, g.rows, g.columns), dtype=np.int8)
    legal = np.ones((count, g.columns), dtype=np.int8)  # cleared as columns fill and games end
    for ply in range(width):
        boards = np.flatnonzero(played[:, ply])
        if not len(boards):
            break
        columns = moves[boards, ply].astype(np.int64)
        if not legal[boards, columns].all():
            raise ValueError(f"a row plays a full column or goes on after its game, ply {ply}")
        kernels.play_columns(
            first, mask, plies, marks, winner, rewards, planes, legal, boards, columns,
            ply % 2 == 0, g.rows, g.height, g.inarow, g.size, g.cells,
        )  # fmt: skip
    return np.where(plies % 2 == 0, first, first ^ mask), mask  # the first moves after even plies


def play_game(
    geometry: Geometry,
    policies: Sequence[Policy],
    rng: np.random.Generator,
    start: Sequence[int] = (),
) -> list[int]:
    """The moves of one game between two of ``policies`` drawn with replacement (the first
    seat first), every move and draw from ``rng``; the game starts with the moves ``start``
    (which it returns too)."""
    seats = [policies[i] for i in rng.integers(len(policies), size=2)]
    for policy in seats:
        policy.reset()
    board, moves = Board.from_moves(geometry, start), [int(c) for c in start]
    while not board.is_terminal():
        column = int(seats[board.moves % 2].act(board, rng))
        board = board.play(column)
        moves.append(column)
    return moves


def sample_positions(
    geometry: Geometry,
    per_phase: dict[str, int],
    seed: int,
    players: Sequence[str] = PLAYERS,
    max_games: int = 100_000,
) -> tuple[dict[str, list[list[int]]], int]:
    """Distinct (up to mirror) move lists per phase, ``per_phase[phase]`` of each, from games.

    Returns the candidates in a seeded random order and the number of games played.
    """
    rng = np.random.default_rng(seed)
    policies = [make_policy(spec) for spec in players]
    bounds = phase_bounds(geometry)
    found: dict[str, list[list[int]]] = {name: [] for name in bounds}
    seen: set[tuple[int, int]] = set()
    games = 0
    while any(len(found[p]) < per_phase.get(p, 0) for p in bounds):
        if games >= max_games:
            raise RuntimeError(f"only {found} positions after {games} games")
        games += 1
        moves = play_game(geometry, policies, rng)
        # moves[:ply] is a non-terminal position for every ply < len(moves).
        for name, (first, last) in bounds.items():
            last = min(last, len(moves) - 1)
            if first > last or len(found[name]) >= per_phase.get(name, 0):
                continue
            ply = int(rng.integers(first, last + 1))
            key = canonical_key(geometry, moves[:ply])
            if key not in seen:
                seen.add(key)
                found[name].append(moves[:ply])
    return found, games


def label_position(solver: Solver, moves: Sequence[int], node_limit: int | None) -> np.ndarray:
    """The exact score of every column after ``moves`` (int8, :data:`ILLEGAL` where full).

    Raises :class:`~baselines.solver.SearchLimitError` when not proven within ``node_limit``.
    """
    board = Board.from_moves(solver.geometry, moves)
    scores = solver.move_scores(board, node_limit=node_limit)
    return np.where(np.isnan(scores), ILLEGAL, scores).astype(np.int8)


def _save(path: Path, geometry: Geometry, labelled: list[dict[str, Any]], meta: dict) -> None:
    n, cells = len(labelled), geometry.cells
    moves = np.full((n, cells), -1, dtype=np.int8)
    scores = np.full((n, geometry.columns), ILLEGAL, dtype=np.int8)
    for i, item in enumerate(labelled):
        moves[i, : len(item["moves"])] = item["moves"]
        scores[i] = item["scores"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_atomically(path, "wb") as file:
        np.savez_compressed(
            file,
            moves=moves,
            plies=np.array([len(item["moves"]) for item in labelled], dtype=np.int8),
            scores=scores,
            phase=np.array([item["phase"] for item in labelled], dtype=np.int8),
            split=np.array([item["split"] for item in labelled], dtype=np.int8),
            meta=np.array(json.dumps(meta)),
        )


def _checkpoint(
    path: Path, meta: dict[str, Any], bounds: dict[str, tuple[int, int]]
) -> dict[str, list[dict[str, Any]]]:
    """Per phase, the labelled items of a stopped run's partial file, in labelling order."""
    with np.load(path, allow_pickle=False) as data:
        saved = json.loads(str(data["meta"]))
        for key in ("seed", "node_limit", "phases", "geometry", "players"):
            if saved[key] != meta[key]:
                raise RuntimeError(f"{path} was made with another {key}")
        items: dict[str, list[dict[str, Any]]] = {name: [] for name in bounds}
        names = list(bounds)
        for moves, plies, scores, phase, split in zip(
            data["moves"], data["plies"], data["scores"], data["phase"], data["split"], strict=True
        ):
            items[names[phase]].append(
                {"moves": [int(c) for c in moves[:plies]], "scores": scores, "phase": int(phase),
                 "split": int(split)}
            )  # fmt: skip
    return items


def _readme(meta: dict[str, Any]) -> str:
    g = meta["geometry"]
    skipped_text = ", ".join(
        f"{name} {meta['skipped'][name]} of "
        f"{meta['skipped'][name] + sum(meta['counts'][name].values())} candidates"
        for name in meta["phases"]
    )
    if meta.get("exhausted"):
        skipped_text += (
            f"; {', '.join(meta['exhausted'])}: every candidate was used, so the phase has fewer "
            "positions than asked (raise --spare)"
        )
    if not meta.get("complete", True):
        skipped_text += " (generation stopped before the end: counts are what was labelled)"
    lines = [
        "# Labelled positions for measuring play against the exact solver",
        "",
        f"`positions.npz`: {meta['total']} positions on {g['rows']}x{g['columns']} "
        f"(connect {g['inarow']}), each with the exact score of every legal move "
        "(Pascal Pons' scores, `baselines.solver.Solver.move_scores`). Read it with "
        "`baselines.perfect_play.load_positions()`; measure a policy with "
        "`connectx accuracy SPEC` or `baselines.perfect_play.evaluate_policy(SPEC)`.",
        "",
        f"Made by `{meta['command']}` (seed {meta['seed']}) in {meta['seconds'] / 60:.0f} "
        "minutes of wall time (one process, on a 2-core machine shared with other work), "
        f"from {meta['games']} games between these players, drawn at random for each "
        f"seat: {', '.join(f'`{p}`' for p in meta['players'])}.",
        "",
        "One position per phase per game (a random ply of the phase), deduplicated up to the "
        "horizontal mirror across both splits, dealt alternately to `test` and `dev`. "
        "**Tune on `dev` only; report on `test`.** Positions with fewer than "
        f"{min(first for first, _ in meta['phases'].values())} stones are not included "
        "(their exact scores cost 10+ s each); matches cover the first plies with the two-ply "
        "openings.",
        "",
        "| phase | plies | test | dev | skipped (not proven within the node cap) |",
        "|---|---|---:|---:|---:|",
    ]
    for name, (first, last) in meta["phases"].items():
        counts = meta["counts"][name]
        lines.append(
            f"| {name} | {first}-{last} | {counts['test']} | {counts['dev']} "
            f"| {meta['skipped'][name]} |"
        )
    lines += [
        "",
        f"Node cap per position: {meta['node_limit']:,} solver nodes (deterministic: the same "
        "positions on any machine; about 5 s on one core). A candidate not proven within the cap "
        "was skipped and replaced by the next candidate of its phase, so the hardest positions of "
        f"a phase are under-represented: {skipped_text}.",
        "",
        "Arrays: `moves` int8 [n, cells] (0-based columns, padded with -1), `plies` int8 [n], "
        f"`scores` int8 [n, columns] ({ILLEGAL} for a full column), `phase` int8 [n] (index "
        "into the phase names in `meta`), `split` int8 [n] (0 dev, 1 test), `meta` (JSON).",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m baselines.make_positions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--rows", type=int, default=6)
    parser.add_argument("--columns", type=int, default=7)
    parser.add_argument("--inarow", type=int, default=4)
    parser.add_argument("--per-phase", type=int, default=200, help="positions per phase and split")
    parser.add_argument(
        "--opening", type=int, default=120, help="positions per split in the opening phase"
    )
    parser.add_argument("--node-limit", type=int, default=30_000_000, help="per position")
    parser.add_argument("--spare", type=float, default=0.3, help="extra candidates (share)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("-o", "--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--no-readme", action="store_true", help="do not write README.md")
    parser.add_argument(
        "--resume", action="store_true", help="continue the partial --output of a stopped run"
    )
    parser.add_argument(
        "--readme-only", action="store_true", help="only (re)write README.md from --output"
    )
    args = parser.parse_args(argv)
    if args.readme_only:
        with np.load(args.output, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
        write_text_atomically(args.output.with_name("README.md"), _readme(meta))
        return 0

    started = time.perf_counter()
    geometry = Geometry(args.rows, args.columns, args.inarow)
    bounds = phase_bounds(geometry)
    wanted = {name: 2 * args.per_phase for name in bounds}
    if "opening" in wanted:
        wanted["opening"] = 2 * args.opening
    candidates_wanted = {p: int(n * (1 + args.spare)) + 4 for p, n in wanted.items()}
    candidates, games = sample_positions(geometry, candidates_wanted, args.seed)
    print(f"{games} games, candidates {candidates_wanted}", file=sys.stderr, flush=True)

    solver = Solver(geometry)
    labelled: list[dict[str, Any]] = []
    counts = {name: {"test": 0, "dev": 0} for name in bounds}
    skipped = dict.fromkeys(bounds, 0)
    command = "python -m baselines.make_positions" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    meta: dict[str, Any] = {
        "geometry": {"rows": geometry.rows, "columns": geometry.columns, "inarow": geometry.inarow},
        "seed": args.seed,
        "command": command,
        "players": list(PLAYERS),
        "games": games,
        "phases": {name: list(b) for name, b in bounds.items()},
        "node_limit": args.node_limit,
        "splits": ["dev", "test"],
        "complete": False,
    }
    exhausted: set[str] = set()
    resumed = _checkpoint(args.output, meta, bounds) if args.resume else None
    if args.resume:  # report the time of both runs
        with np.load(args.output, allow_pickle=False) as data:
            started -= json.loads(str(data["meta"]))["seconds"]
    # Round-robin over the phases, so a partial file (rewritten every minute) stays balanced.
    queues = {name: iter(candidates[name]) for name in bounds}
    last_save = time.perf_counter()
    phase_index = {name: i for i, name in enumerate(bounds)}
    while any(counts[p]["test"] + counts[p]["dev"] < wanted[p] for p in bounds):
        for name in bounds:
            done = counts[name]["test"] + counts[name]["dev"]
            if done >= wanted[name]:
                continue
            moves = next(queues[name], None)
            if moves is None:  # every candidate used: the phase ends short (see "exhausted")
                exhausted.add(name)
                wanted[name] = done
                continue
            if resumed and resumed[name]:
                # A stopped run's candidates: labelled ones are in its file, in order; the others
                # in between were skipped (not proven within the same cap), so need no new solve.
                if list(resumed[name][0]["moves"]) != list(moves):
                    skipped[name] += 1
                    continue
                counts[name]["test" if done % 2 == 0 else "dev"] += 1
                labelled.append(resumed[name].pop(0))
                continue
            try:
                scores = label_position(solver, moves, args.node_limit)
            except SearchLimitError:
                skipped[name] += 1
                continue
            split = "test" if done % 2 == 0 else "dev"
            counts[name][split] += 1
            labelled.append(
                {
                    "moves": moves,
                    "scores": scores,
                    "phase": phase_index[name],
                    "split": 1 if split == "test" else 0,
                }
            )
        if time.perf_counter() - last_save > 60:
            meta.update(counts=counts, skipped=skipped, total=len(labelled))
            meta["seconds"] = time.perf_counter() - started
            _save(args.output, geometry, labelled, meta)
            last_save = time.perf_counter()
            print(f"{len(labelled)} labelled, skipped {skipped}", file=sys.stderr, flush=True)
    meta.update(counts=counts, skipped=skipped, total=len(labelled), complete=True)
    meta["exhausted"] = sorted(exhausted)
    meta["seconds"] = time.perf_counter() - started
    _save(args.output, geometry, labelled, meta)
    if not args.no_readme:
        write_text_atomically(args.output.with_name("README.md"), _readme(meta))
    print(json.dumps({k: meta[k] for k in ("counts", "skipped", "games", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
