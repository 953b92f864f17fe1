"""Search on top of the network against the issue's targets: Pons' sets beside AlphaZero.jl's
rates with search, and matches against alphabeta at 50 ms.

For each search (a policy spec; default: ``mcts:net=ppo,time_budget=0.05`` with and without the
exact solver at its leaves, ``solver_nodes=20000``):

- **Pons' six sets**, the first ``--limit`` positions of each (200), judged by the solver as
  ``connectx accuracy SPEC --pons DIR`` judges them (``--time-limit`` seconds a solver call; a
  position it cannot settle is left out): the mistake rate with its 95% interval beside
  AlphaZero.jl's published rate with 600 MCTS simulations a move (read from its Connect Four
  tutorial's plots: about 0% on End-Easy, Middle-Easy and Begin-Easy, about 2% on Begin-Medium,
  2.5-3% on Middle-Medium, about 7% on Begin-Hard). "met" means at or below that rate, taking
  "about 0%" as at most one position in 200 and the range's upper end;
- **matches** against alphabeta at 50 ms a move from the 49 two-ply openings, both seats (98
  games a seed), once per seed (``--repeats``, 4): the mean score, target >= 0.90, and the
  search's mean thinking time in them, target <= 50 ms.

A time budget buys more search on a faster core: the machine line says which this was. Nothing
here is tuned on (the searches' settings were chosen on other positions and openings:
``docs/experiments/mcts.md``).

Usage: ``python benchmarks/bench_search.py [SPEC ...] [--pons-dir DIR] [--limit N]
[--repeats N] [--time-limit S] [--smoke]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine_line
from bench_agent import repeated_match

from connectx_baselines.perfect_play import evaluate_pons_sets

DEFAULT_SEARCHES = [
    "mcts:net=ppo,time_budget=0.05,solver_nodes=20000",
    "mcts:net=ppo,time_budget=0.05",
]
#: AlphaZero.jl's mistake rate with search on each Pons set as published, and as the targets
#: read it (the most a search may err to be at or below it).
ALPHAZERO_JL = {
    "End-Easy": ("about 0%", 0.005),
    "Middle-Easy": ("about 0%", 0.005),
    "Middle-Medium": ("2.5-3%", 0.03),
    "Begin-Easy": ("about 0%", 0.005),
    "Begin-Medium": ("about 2%", 0.02),
    "Begin-Hard": ("about 7%", 0.07),
}
OPPONENT = "alphabeta:time_budget=0.05"
TARGET_SCORE = 0.90
TARGET_MS = 50.0
PONS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "pons"


def measure(spec: str, args: argparse.Namespace) -> dict[str, Any]:
    """``spec`` on Pons' sets (when the folder exists) and against alphabeta at 50 ms."""
    result: dict[str, Any] = {}
    if args.pons_dir.is_dir():
        started = time.perf_counter()
        sets = evaluate_pons_sets(spec, args.pons_dir, limit=args.limit, time_limit=args.time_limit)
        result["pons"] = {name: r.overall.to_dict() for name, r in sets.results.items()}
        print(f"{spec}: Pons' sets in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    seeds = list(range(args.repeats))
    result["alphabeta"] = repeated_match(spec, OPPONENT, seeds, args.smoke)
    return result


def report(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    specs = list(results)
    print("## Search on top of the network: the issue's targets\n")
    if all("pons" in r for r in results.values()):
        print(
            f"Pons' sets, the first {args.limit} positions of each, value-losing moves (95% CI; "
            "positions the solver did not settle are left out).\n"
        )
        heading = " | ".join(f"`{spec}`" for spec in specs)
        print(f"| set | AlphaZero.jl with search (target) | {heading} |")
        print("|---|---|" + "---|" * len(specs))
        for name, (published, goal) in ALPHAZERO_JL.items():
            cells = []
            for spec in specs:
                found = results[spec]["pons"].get(name)
                if found is None:
                    cells.append("-")
                    continue
                rate, (low, high) = found["mistake_rate"], found["mistake_ci95"]
                met = "met" if rate <= goal else "NOT met"
                cells.append(f"{rate:.1%} ({low:.1%}-{high:.1%}), {found['positions']}: {met}")
            print(f"| {name} | {published} (<= {goal:.1%}) | " + " | ".join(cells) + " |")
        print()
    else:
        print(f"Pons' sets: skipped (no folder {args.pons_dir}).\n")
    print(f"Against {OPPONENT}, two-ply openings, both seats, seeds 0 to {args.repeats - 1}.\n")
    print("| search | score (lowest-highest seed) | 95% CI | ms a move | verdict |")
    print("|---|---|---|---:|---|")
    for spec, r in results.items():
        a = r["alphabeta"]
        low, high = a["ci95"]
        met = a["score"] >= TARGET_SCORE and a["ms_per_move"] <= TARGET_MS
        print(
            f"| `{spec}` | {a['score']:.3f} ({min(a['scores']):.3f}-{max(a['scores']):.3f}) "
            f"| {low:.3f}-{high:.3f} | {a['ms_per_move']:.1f} "
            f"| >= {TARGET_SCORE} within {TARGET_MS:g} ms: {'met' if met else 'NOT met'} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("searches", nargs="*", default=DEFAULT_SEARCHES, help="policy specs")
    parser.add_argument("--pons-dir", type=Path, default=PONS_DIR, help="Pons' Test_L*_R* files")
    parser.add_argument("--limit", type=int, default=200, help="positions of each Pons set")
    parser.add_argument("--time-limit", type=float, default=5.0, help="seconds a solver call")
    parser.add_argument("--repeats", type=int, default=4, help="98-game matches, seeds 0, 1, ...")
    parser.add_argument("--smoke", action="store_true", help="2 positions a set, 2 games")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.limit < 1 or args.repeats < 1 or not args.time_limit > 0:
        parser.error("--limit and --repeats must be >= 1 and --time-limit > 0")
    if args.smoke:
        args.limit, args.repeats, args.time_limit = 2, 1, min(args.time_limit, 1.0)
    print(f"{machine_line()}\n", flush=True)
    started = time.perf_counter()
    results = {spec: measure(spec, args) for spec in args.searches}
    report(results, args)
    print(f"\n{time.perf_counter() - started:.0f} s in all.")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=float))


if __name__ == "__main__":
    main()
