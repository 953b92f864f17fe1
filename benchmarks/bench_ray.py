"""Games per second of ``play_match`` locally and on a local Ray instance with 1 and 2 workers;
with ``--accuracy SPEC``, positions per second of ``evaluate_policy`` (the labelled test split).

    python benchmarks/bench_ray.py [--games N] [--player-a SPEC] [--player-b SPEC] [--smoke]
    python benchmarks/bench_ray.py --accuracy minimax:depth=6

One run, one machine: the ratios are what matter (the machine is shared and noisy). Needs the
``ray`` extra; without it the script says so and exits 0 under ``--smoke``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from _machine import machine_line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--player-a", default="minimax:depth=3")
    parser.add_argument("--player-b", default="onestep")
    parser.add_argument("--smoke", action="store_true", help="4 games, to check the script runs")
    parser.add_argument("--accuracy", metavar="SPEC", help="time an accuracy run of SPEC instead")
    args = parser.parse_args()
    games = 4 if args.smoke else args.games
    try:
        import ray  # noqa: F401
    except ImportError:
        print('bench_ray: Ray is not installed (pip install "ray>=2.9"); skipped')
        return 0 if args.smoke else 1
    print(machine_line(), flush=True)
    if args.accuracy:
        return accuracy(args.accuracy)
    from connectx_gym.match import play_match

    def run(executor: Any) -> Any:
        return play_match(
            args.player_a, args.player_b, games=games, seed=0, executor=executor
        ).records

    title = f"{args.player_a} vs {args.player_b}, {games} games"
    return report(rates(run, games), title, "games")


def rates(run: Callable[[Any], Any], count: int) -> list[tuple[str, float]] | None:
    """Items per second of ``run(executor)`` locally (``executor=None``), then on a local Ray
    instance with 1 and 2 workers; None when a Ray result differs from the local one."""
    from connectx_gym.ray_executor import RayExecutor

    started = time.perf_counter()
    local = run(None)
    rows = [("local loop", count / (time.perf_counter() - started))]
    with RayExecutor(num_cpus=2) as executor:
        for workers in (1, 2):
            executor.workers = workers
            started = time.perf_counter()
            result = run(executor)
            rows.append((f"ray, {workers} worker(s)", count / (time.perf_counter() - started)))
            if result != local:
                return None
    return rows


def accuracy(spec: str) -> int:
    """Positions per second of ``evaluate_policy(spec)``: local, then Ray with 1 and 2 workers."""
    from connectx_baselines.perfect_play import evaluate_policy, load_positions

    positions = load_positions(split="test")
    rows = rates(
        lambda executor: evaluate_policy(spec, positions, executor=executor).to_dict(),
        len(positions),
    )
    return report(rows, f"accuracy of {spec}, {len(positions)} positions", "positions")


def report(rows: list[tuple[str, float]] | None, title: str, unit: str) -> int:
    """Print the rates (exit status 0), or say that Ray's results differed (exit status 1)."""
    if rows is None:
        print(f"bench_ray: Ray's {unit} differ from the local run's", file=sys.stderr)
        return 1
    print(f"{title} (the same results in every row)")
    for name, rate in rows:
        print(f"  {name:<20} {rate:8.2f} {unit}/s  x{rate / rows[0][1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
