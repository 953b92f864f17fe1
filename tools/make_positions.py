"""Generate the labelled positions of :mod:`connectx_baselines.perfect_play` (``baselines/data``).

Run ``python -m tools.make_positions`` from the repository root (the defaults made the shipped
game split, ``positions.npz``; ``--random`` the random split, ``positions_random.npz``; see
``baselines/data/README.md``, whose section on the file this script writes).

How positions are made (with ``--random``, step 1 and 2 are the random play below):

1. Games between policies of mixed strength: each game draws both players (with replacement)
   from :data:`PLAYERS` (random, onestep, minimax depths 1-4, depth-limited alpha-beta, and
   noisy ``~0.2`` versions), all moving with one seeded generator. Alpha-beta runs to a fixed
   ``max_depth`` with a generous clock, so its moves do not depend on the machine's speed.
2. From each game, one non-terminal position per phase whose ply range the game reaches (a
   uniformly drawn ply of the range). Phases are ranges of plies played (:func:`phase_bounds`).
3. Positions are deduplicated up to the horizontal mirror (across both splits), shuffled, and
   dealt alternately to the ``test`` and ``dev`` splits within each phase, so no position (nor
   its mirror) is in both. Tune on ``dev`` only; report on ``test``.
4. Each is labelled with the exact score of every legal move
   (:meth:`connectx_baselines.solver.Solver. move_scores`), under a per-position node cap
   (deterministic, unlike a clock). A position whose scores are not proven within the cap is
   skipped, counted in the metadata, and replaced by the next candidate of its phase.

The file holds ``moves`` (int8, ``[n, cells]``, 0-based columns padded with -1), ``plies``,
``scores`` (int8, ``[n, columns]``, :data:`ILLEGAL` for full columns), ``phase`` (index into the
metadata's phase names), ``split`` (0 dev, 1 test) and ``meta`` (a JSON string: geometry, seed,
command, counts, skipped positions, players, phase ranges). The file is rewritten every minute
while labelling (``"complete": false`` until the end).

**Random positions** (``--random``): a position of ``p`` stones is the board after ``p`` uniformly
random legal moves from the empty board, drawn again from the start when one of those moves ends
the game (a four in a row); ``p`` is drawn uniformly from its phase's plies, as in the game split.
So every position is one a game can reach, with the game still on; nothing else is asked of it:
random play leaves immediate wins unplayed and threats unblocked, and a position may hold a move
that wins at once. Positions of the game split (``positions.npz``) and of the teacher data a run
reads (the books and the shipped chunks, :func:`teacher_keys`) are left out, up to the mirror.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from connectx_baselines.game_positions import canonical_key, canonical_keys, phase_bounds, play_game
from connectx_baselines.position_sets import (
    DEFAULT_POSITIONS,
    ILLEGAL,
    RANDOM_POSITIONS,
    load_positions,
)
from connectx_baselines.solver import SearchLimitError, Solver
from connectx_baselines.teacher_book import BOOKS
from connectx_baselines.teacher_cache import (
    SHIPPED_FILE,
    exclusion_digest,
    pad_moves,
    shipped_store,
)
from connectx_baselines.teacher_labels import TeacherSet
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.outputs import open_atomically
from connectx_gym.registry import make_policy
from tools.positions_readme import section, write_section

__all__ = [
    "DEFAULT_OUTPUT",
    "PLAYERS",
    "label_position",
    "main",
    "sample_positions",
    "sample_random_positions",
    "teacher_keys",
]

DEFAULT_OUTPUT = DEFAULT_POSITIONS
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


def random_play(geometry: Geometry, plies: int, rng: np.random.Generator) -> list[int] | None:
    """``plies`` uniformly random legal moves from the empty board, or None when one of them
    ends the game (a four in a row; the board cannot fill before its last cell)."""
    board, moves = Board.from_moves(geometry, ()), []
    for _ in range(plies):
        legal = board.legal_moves()
        column = legal[int(rng.integers(len(legal)))]
        if board.is_winning_move(column):
            return None
        board = board.play(column)
        moves.append(column)
    return moves


def sample_random_positions(
    geometry: Geometry,
    per_phase: dict[str, int],
    seed: int,
    exclude: frozenset[tuple[int, int]] = frozenset(),
    max_draws: int = 10_000_000,
) -> tuple[dict[str, list[list[int]]], dict[str, int]]:
    """Distinct (up to mirror) positions of random play (:func:`random_play`) per phase,
    ``per_phase[phase]`` of each, none of whose mirror-canonical key is in ``exclude``.

    A position's number of stones is drawn uniformly from its phase's plies. Returns the
    candidates in the order drawn and the counts: ``draws`` (move sequences drawn), ``ended``
    (games that ended before the position), ``excluded`` and ``repeats`` (positions drawn before).
    """
    rng = np.random.default_rng(seed)
    bounds = phase_bounds(geometry)
    found: dict[str, list[list[int]]] = {name: [] for name in bounds}
    seen: set[tuple[int, int]] = set()
    stats = dict.fromkeys(("draws", "ended", "excluded", "repeats"), 0)
    while any(len(found[p]) < per_phase.get(p, 0) for p in bounds):
        for name, (first, last) in bounds.items():
            if len(found[name]) >= per_phase.get(name, 0):
                continue
            if stats["draws"] >= max_draws:
                raise RuntimeError(
                    f"only {len(found[name])} {name} positions after {max_draws} random games"
                )
            stats["draws"] += 1
            moves = random_play(geometry, int(rng.integers(first, last + 1)), rng)
            if moves is None:
                stats["ended"] += 1
                continue
            key = canonical_key(geometry, moves)
            if key in exclude:
                stats["excluded"] += 1
            elif key in seen:
                stats["repeats"] += 1
            else:
                seen.add(key)
                found[name].append(moves)
    return found, stats


def teacher_keys(geometry: Geometry) -> dict[str, set[tuple[int, int]]]:
    """Mirror-canonical keys of the shipped teacher data a run reads on ``geometry``, by file
    name: the books (:data:`connectx_baselines.teacher_book.BOOKS`) and the shipped chunks."""
    sets: dict[str, np.ndarray] = {}
    for book in BOOKS.values():
        if book.file.is_file():
            teacher = TeacherSet.load(book.file)
            if teacher.geometry == geometry:
                sets[book.file.name] = teacher.moves
    store = shipped_store()
    if store is not None and tuple(store.meta["geometry"]) == geometry.key:
        sets[SHIPPED_FILE.name] = store.moves
    return {name: set(canonical_keys(geometry, moves)) for name, moves in sets.items()}


def held_out_keys(geometry: Geometry) -> dict[str, set[tuple[int, int]]]:
    """What the random split leaves out, by file name: the game split and the teacher data."""
    keys = teacher_keys(geometry)
    if DEFAULT_POSITIONS.is_file():
        games = load_positions(DEFAULT_POSITIONS, split="all")
        if games.geometry == geometry:
            moves = pad_moves(games.moves, geometry.cells)
            keys[DEFAULT_POSITIONS.name] = set(canonical_keys(geometry, moves))
    return keys


def label_position(solver: Solver, moves: Sequence[int], node_limit: int | None) -> np.ndarray:
    """The exact score of every column after ``moves`` (int8, :data:`ILLEGAL` where full).

    Raises :class:`~connectx_baselines.solver.SearchLimitError` when not proven within
    ``node_limit``.
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
        # the candidates depend on all of these: another value draws other candidates
        for key in (
            "seed", "node_limit", "phases", "geometry", "players", "source", "exclusion",
            "candidates",
        ):  # fmt: skip
            if saved.get(key) != meta.get(key):
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


def _wins_at_once(geometry: Geometry, labelled: list[dict[str, Any]]) -> int:
    """How many positions hold a move that wins at once (the highest score a move can have)."""
    return sum(
        int(np.max(item["scores"])) == (geometry.cells + 1 - len(item["moves"])) // 2
        for item in labelled
    )


def _machine() -> str:
    """The CPU's model name and the number of cores (as ``lscpu`` reports them)."""
    try:
        output = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    fields = dict(line.split(":", 1) for line in output.splitlines() if ":" in line)
    model = fields.get("Model name", "").strip()
    cpus = fields.get("CPU(s)", "").strip()
    return f"{model}, {cpus} CPUs" if model else ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.make_positions", description=__doc__.splitlines()[0]
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
    parser.add_argument(
        "--random",
        action="store_true",
        help="positions of random legal play, held out from the game split and the teacher data",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help=f"the file (default {DEFAULT_OUTPUT.name}; with --random {RANDOM_POSITIONS.name})",
    )
    parser.add_argument("--no-readme", action="store_true", help="do not write README.md")
    parser.add_argument(
        "--resume", action="store_true", help="continue the partial --output of a stopped run"
    )
    parser.add_argument(
        "--readme-only", action="store_true", help="only (re)write README.md from --output"
    )
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = RANDOM_POSITIONS if args.random else DEFAULT_OUTPUT
    if args.readme_only:
        with np.load(args.output, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
        write_section(args.output.with_name("README.md"), section(meta))
        return 0

    started = time.perf_counter()
    geometry = Geometry(args.rows, args.columns, args.inarow)
    bounds = phase_bounds(geometry)
    wanted = {name: 2 * args.per_phase for name in bounds}
    if "opening" in wanted:
        wanted["opening"] = 2 * args.opening
    candidates_wanted = {p: int(n * (1 + args.spare)) + 4 for p, n in wanted.items()}
    source: dict[str, Any]
    if args.random:
        held_out = held_out_keys(geometry)
        exclude = frozenset().union(*held_out.values())
        candidates, drawn = sample_random_positions(geometry, candidates_wanted, args.seed, exclude)
        source = {
            "source": "random",
            "players": [],
            "drawn": drawn,
            "held_out": {name: len(keys) for name, keys in held_out.items()},
            "exclusion": exclusion_digest(exclude),
            "machine": _machine(),
        }
        print(f"{drawn}, candidates {candidates_wanted}", file=sys.stderr, flush=True)
    else:
        candidates, games = sample_positions(geometry, candidates_wanted, args.seed)
        source = {"players": list(PLAYERS), "games": games}
        print(f"{games} games, candidates {candidates_wanted}", file=sys.stderr, flush=True)

    solver = Solver(geometry)
    labelled: list[dict[str, Any]] = []
    counts = {name: {"test": 0, "dev": 0} for name in bounds}
    skipped = dict.fromkeys(bounds, 0)
    command = "python -m tools.make_positions" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    meta: dict[str, Any] = {
        "geometry": {"rows": geometry.rows, "columns": geometry.columns, "inarow": geometry.inarow},
        "seed": args.seed,
        "command": command,
        **source,
        "phases": {name: list(b) for name, b in bounds.items()},
        "node_limit": args.node_limit,
        "splits": ["dev", "test"],
        "candidates": candidates_wanted,
        "complete": False,
    }
    exhausted: set[str] = set()
    resumed = _checkpoint(args.output, meta, bounds) if args.resume else None
    if resumed is not None:
        for name, items in resumed.items():
            drawn_moves = {tuple(moves) for moves in candidates[name]}
            if any(tuple(item["moves"]) not in drawn_moves for item in items):
                raise RuntimeError(f"{args.output} holds {name} positions this run does not draw")
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
    if args.random:
        meta["wins_at_once"] = _wins_at_once(geometry, labelled)
    meta["exhausted"] = sorted(exhausted)
    meta["seconds"] = time.perf_counter() - started
    _save(args.output, geometry, labelled, meta)
    if not args.no_readme:
        write_section(args.output.with_name("README.md"), section(meta))
    print(json.dumps({k: meta.get(k) for k in ("counts", "skipped", "games", "drawn", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
