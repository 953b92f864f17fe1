"""Strength of the search baselines: every pairing, seats alternating, 95% confidence intervals.

Players: random, onestep, minimax depth 1-4, negamax (depth 4), the shipped network ``ppo``,
alphabeta (under a per-move time budget, 0.05 s by default here to keep the table affordable; its
default is 1 s) and, when kaggle-environments is installed, kaggle's own negamax. Each pairing
plays ``--games`` games on 6x7 (98 by default: the 49 two-ply openings, each from both seats), A
taking the first move in even games; scores count a draw as half a win and come with 95% Wilson
intervals.

``--only SPEC`` plays just the pairings of one player (for example ``--only ppo`` after shipping
new weights), each with the seed it has in the full table, so its row equals the full run's.

Usage: ``python benchmarks/bench_strength.py [--quick | --smoke] [--games N] [--time-budget S]
[--only SPEC]``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

from _machine import machine_line

from connectx_gym.match import MatchResult, play_match

#: alphabeta must score at least this against these opponents.
TARGETS = {"kaggle:negamax": 0.95, "minimax:depth=3": 0.95}


def players(time_budget: float, with_kaggle: bool) -> list[str]:
    """Specs of the players, weakest first."""
    specs = ["random", "onestep", *(f"minimax:depth={d}" for d in range(1, 5)), "negamax"]
    if with_kaggle:
        specs.append("kaggle:negamax")
    specs.append("ppo")
    specs.append(f"alphabeta:time_budget={time_budget:g}")
    return specs


def kaggle_installed() -> bool:
    """True when kaggle-environments can be imported."""
    try:
        import kaggle_environments  # noqa: F401
    except ImportError:
        return False
    return True


def cell(result: MatchResult) -> str:
    """Score of the row player in percent, with its interval."""
    low, high = result.interval
    return f"{100 * result.score:.0f} ({100 * low:.0f}-{100 * high:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=None, help="games per pairing (98)")
    parser.add_argument("--quick", action="store_true", help="20 games per pairing")
    parser.add_argument("--smoke", action="store_true", help="4 players, 2 games: a crash test")
    parser.add_argument(
        "--time-budget", type=float, default=0.05, help="alphabeta's seconds per move (0.05)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=None, help="play only the pairings of this player")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    games = args.games or (2 if args.smoke else 20 if args.quick else 98)
    with_kaggle = kaggle_installed() and not args.smoke
    specs = players(args.time_budget, with_kaggle)
    if args.smoke:
        specs = [specs[0], specs[1], specs[2], specs[-1]]
    alphabeta = specs[-1]
    if args.only is not None and args.only not in specs:
        parser.error(f"--only {args.only!r} is not a player; players: {', '.join(specs)}")
    print(f"{machine_line()}\n", flush=True)  # not in --json: its keys are the pairings

    results: dict[tuple[str, str], MatchResult] = {}
    started = time.perf_counter()
    pairs = list(itertools.combinations(specs, 2))
    for index, (a, b) in enumerate(pairs):
        if args.only is not None and args.only not in (a, b):
            continue  # the seed stays the pairing's index in the full table
        pair_started = time.perf_counter()
        result = play_match(a, b, games=games, seed=args.seed + index)
        results[a, b] = result
        print(
            f"[{index + 1}/{len(pairs)}] {result.summary()} "
            f"({time.perf_counter() - pair_started:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    print(f"## Strength: {games} games per pairing on 6x7 from the two-ply openings\n")
    print(
        f"alphabeta's time budget: {args.time_budget:g} s per move (its default is 1 s); "
        f"kaggle-environments' negamax {'included' if with_kaggle else 'not installed'}; "
        f"seed {args.seed}; {time.perf_counter() - started:.0f} s in all.\n"
    )
    print("Score of the row player against the column player, % (95% CI); draws count half.\n")
    short = [
        s.replace(":depth=", " ").replace(f":time_budget={args.time_budget:g}", "") for s in specs
    ]
    print("| | " + " | ".join(short) + " |")
    print("|---" * (len(specs) + 1) + "|")
    for row, name in zip(specs, short, strict=True):
        cells = []
        for column in specs:
            if row == column:
                cells.append("-")
            elif (row, column) not in results and (column, row) not in results:
                cells.append("")  # not played (--only)
            elif (row, column) in results:
                cells.append(cell(results[row, column]))
            else:
                flipped = results[column, row]
                mirrored = MatchResult(
                    row, column, flipped.games, flipped.losses, flipped.draws, flipped.wins
                )
                cells.append(cell(mirrored))
        print(f"| {name} | " + " | ".join(cells) + " |")

    print("\n| A | B | A wins | draws | B wins | A score | 95% CI | ms/move A | ms/move B |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (a, b), r in results.items():
        low, high = r.interval
        print(
            f"| {a} | {b} | {r.wins} | {r.draws} | {r.losses} | {r.score:.3f} | "
            f"{low:.3f}-{high:.3f} | {r.ms_per_move_a:.2f} | {r.ms_per_move_b:.2f} |"
        )

    print()
    for opponent, target in TARGETS.items():
        key = (opponent, alphabeta)
        if key not in results:
            print(f"alphabeta vs {opponent}: not played")
            continue
        flipped = results[key]
        score = (flipped.losses + 0.5 * flipped.draws) / flipped.games
        verdict = "met" if score >= target else "NOT met"
        goal = f"target >= {100 * target:.0f}%: {verdict}"
        print(f"alphabeta vs {opponent}: {100 * score:.1f}% ({goal})")

    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {f"{a} vs {b}": r.to_dict() for (a, b), r in results.items()},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
