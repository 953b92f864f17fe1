"""Where a learned agent's games are decided: the phase of its last value-losing move.

For each agent (a policy spec or a weights ``.npz``; default: the shipped ``ppo``), plays the
issue's match protocol (49 two-ply openings from both seats, 98 games per seed) against an
opponent (default: alphabeta at 50 ms per move, the hardest target), then walks back every game
the agent did not win with the exact solver to its last value-losing move
(:mod:`tools.game_review`). The table says in which phase of the game (plies of
:func:`connectx_baselines.game_positions.phase_bounds`) those moves were: where more teaching pays.

Positions of few stones can take seconds each to weakly solve: ``--node-limit`` caps each one,
and a game whose walk meets an unproven position counts as "unproven" (its decisive move, if
any, came earlier). "none": the agent made no value-losing move after the opening.

Usage: ``python benchmarks/bench_losses.py [AGENT ...] [--opponent SPEC] [--repeats N]
[--node-limit N] [--json PATH] [--smoke]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/ of this checkout

from _machine import machine_line

from connectx_baselines.game_positions import phase_bounds
from connectx_gym.bitboard import Geometry
from connectx_gym.match import play_match
from tools.game_review import review_games


def measure(
    spec: str, opponent: str, seeds: list[int], node_limit: int, smoke: bool
) -> dict[str, Any]:
    """``spec``'s matches against ``opponent`` (one per seed) and where its lost value went."""
    counts: dict[str, int] = {}
    plies: list[int] = []
    unproven: list[int | None] = []  # where each unproven walk stopped
    games = not_won = 0
    started = time.perf_counter()
    for seed in seeds:
        match = play_match(spec, opponent, games=4 if smoke else None, seed=seed)
        review = review_games(match, node_limit=node_limit)
        games, not_won = games + review.games, not_won + review.not_won
        for name, count in review.counts.items():
            counts[name] = counts.get(name, 0) + count
        plies.extend(review.plies)
        unproven.extend(r.ply for r in review.reviews if r.kind == "unproven")
        print(
            f"{spec} vs {opponent}, seed {seed}: {match.score:.3f}, {review.not_won} games not "
            f"won reviewed ({time.perf_counter() - started:.0f} s)",
            file=sys.stderr,
        )
    return {
        "games": games,
        "not_won": not_won,
        "counts": counts,
        "plies": sorted(plies),
        "unproven_at": unproven,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", nargs="*", default=["ppo"], help="specs or .npz files (ppo)")
    parser.add_argument("--opponent", default="alphabeta:time_budget=0.05")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="matches, seeds --seed, ... (1)")
    parser.add_argument(
        "--node-limit",
        type=int,
        default=50_000_000,
        help="solver nodes per reviewed position (50M)",
    )
    parser.add_argument(
        "--smoke", action="store_true", help="4 games, 2M nodes per position: a crash test"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.node_limit < 1:
        parser.error(f"--node-limit must be >= 1, got {args.node_limit}")
    if args.smoke:
        args.node_limit = min(args.node_limit, 2_000_000)
    print(f"{machine_line()}\n", flush=True)  # not in --json: its keys are the agents
    started = time.perf_counter()
    seeds = list(range(args.seed, args.seed + args.repeats))
    results = {
        spec: measure(spec, args.opponent, seeds, args.node_limit, args.smoke)
        for spec in args.agents
    }
    bounds = phase_bounds(Geometry(6, 7, 4))
    names = list(next(iter(results.values()))["counts"])
    print(f"## Where games against {args.opponent} were decided\n")
    print(
        "Games each agent did not win (49 two-ply openings from both seats, seeds "
        f"{seeds[0]} to {seeds[-1]}), by the phase of its last value-losing move (stones on the "
        f"board before it). {args.node_limit:,} solver nodes per position; "
        f"{time.perf_counter() - started:.0f} s in all. Phases: first moves before "
        f"{bounds['opening'][0]} stones, then "
        + ", ".join(f"{name} {first}-{last}" for name, (first, last) in bounds.items())
        + ".\n"
    )
    print(f"| agent | games | not won | {' | '.join(names)} |")
    print(f"|---|---:|---:|{'---:|' * len(names)}")
    for spec, r in results.items():
        cells = " | ".join(str(r["counts"][name]) for name in names)
        print(f"| {spec} | {r['games']} | {r['not_won']} | {cells} |")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
