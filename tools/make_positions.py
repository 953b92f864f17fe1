"""Generate the labelled positions of :mod:`connectx_baselines.perfect_play` (``baselines/data``).

Run ``python -m tools.make_positions`` from the repository root (the defaults made the shipped
file; see ``baselines/data/README.md``, which this script writes next to the data).

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
4. Each is labelled with the exact score of every legal move
   (:meth:`connectx_baselines.solver.Solver. move_scores`), under a per-position node cap
   (deterministic, unlike a clock). A position whose scores are not proven within the cap is
   skipped, counted in the metadata, and replaced by the next candidate of its phase.

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

from connectx_baselines.game_positions import canonical_key, phase_bounds, play_game
from connectx_baselines.position_sets import DEFAULT_POSITIONS, ILLEGAL
from connectx_baselines.solver import SearchLimitError, Solver
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.outputs import open_atomically, write_text_atomically
from connectx_gym.registry import make_policy

__all__ = ["DEFAULT_OUTPUT", "PLAYERS", "label_position", "main", "sample_positions"]

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
        "(Pascal Pons' scores, `connectx_baselines.solver.Solver.move_scores`). Read it with "
        "`connectx_baselines.perfect_play.load_positions()`; measure a policy with "
        "`connectx accuracy SPEC` or `connectx_baselines.perfect_play.evaluate_policy(SPEC)`.",
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
    command = "python -m tools.make_positions" + "".join(
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
