"""Rollouts on Ray actors (``connectx train --ray --env-slices K``): steps per second with 1 and 2
Ray workers, the cost of each actor to the learner's process, a projection to more workers, and
the overhead of ``--ray`` on a training run where there is nothing to gain.

1. Steps per second of :class:`connectx_train.ray_rollouts.SlicedVecEnv` on a local Ray instance,
   ``--boards`` boards (the run's default 32) against ``--opponent``
   (``alphabeta:time_budget=0.01``: every opponent move a search of 10 ms at most) cut into 1 and
   2 env slices, one Ray actor each on an instance of as many CPUs (one numba thread each);
   the agent plays seeded random legal moves, so only the env and its opponents are timed.
2. The cost of one actor to the driver: its CPU time per step and actor (submitting the call,
   reading the answer), and the wall time of a step with a cheap opponent (random) on one actor,
   the round trip. From these and the opponents' time per board, a projection of steps per second
   with 16 and 64 workers, as many boards per worker as measured (written as a projection).
3. A default-size ``connectx train`` (the default settings, shortened to ``--timesteps``, without
   the teacher's positions and with a small final panel) without and with ``--ray`` on a local
   instance (one env slice, as by default), in turns: the PPO phase's seconds (rollouts and
   updates) and the whole run's, the medians of ``--rounds`` runs of each.

Run::

    python benchmarks/bench_ray_rollouts.py                      # all three parts
    python benchmarks/bench_ray_rollouts.py --parts 1 2 --seconds 10
    python benchmarks/bench_ray_rollouts.py --parts 3 --timesteps 65536 --rounds 2
    python benchmarks/bench_ray_rollouts.py --quick        # parts 1 and 2 in seconds (--smoke)
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from _machine import machine_line

from connectx_gym.ray_executor import LOCAL_SYSTEM_CONFIG
from connectx_train.config import TrainConfig
from connectx_train.ray_rollouts import SlicedVecEnv

SEED = 0


def steps_per_second(
    config: TrainConfig, address: str, opponent: str, seconds: float
) -> tuple[float, float]:
    """(agent steps per second, driver CPU seconds per step and actor) of ``config``'s slices on
    Ray, against ``opponent`` on every board, after a warm-up of a few steps."""
    env = SlicedVecEnv(config, address)
    try:
        for board in range(env.num_envs):
            env.env_method("queue_opponent", opponent, opponent, indices=[board])
        env.reset()
        rng = np.random.default_rng(SEED)

        def step() -> None:
            masks = env.action_masks()
            env.step_async(np.array([rng.choice(np.flatnonzero(mask)) for mask in masks]))
            env.step_wait()

        for _ in range(5):  # compilation, the actors' first calls
            step()
        steps, started, cpu = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - started < seconds:
            step()
            steps += 1
        wall = time.perf_counter() - started
        driver = (time.process_time() - cpu) / (steps * config.env_slices)
        return steps * env.num_envs / wall, driver
    finally:
        env.close()


def start_ray(cpus: int) -> None:
    import ray

    ray.init(
        address="local",
        num_cpus=cpus,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        _system_config=LOCAL_SYSTEM_CONFIG,  # as the package's own local instances
    )


def on_ray(workers: int, boards: int, opponent: str, seconds: float) -> tuple[float, float]:
    """:func:`steps_per_second` of ``boards`` boards in ``workers`` slices on a local Ray
    instance of ``workers`` CPUs (one a worker), or on the instance already started."""
    import ray

    started = not ray.is_initialized()
    if started:
        start_ray(workers)
    try:
        config = TrainConfig(n_envs=boards, env_slices=workers, seed=SEED)
        return steps_per_second(config, "auto", opponent, seconds)
    finally:
        if started:
            ray.shutdown()


def rollouts(args: argparse.Namespace) -> dict[str, Any]:
    """Parts 1 and 2: steps/s with 1 and 2 workers, the per-actor cost, the projection (with
    ``--quick``, every row on one instance of 2 CPUs: one start of Ray, figures of no worth)."""
    import ray

    if args.quick:
        start_ray(2)
    try:
        return measured_rollouts(args)
    finally:
        if args.quick:
            ray.shutdown()


def measured_rollouts(args: argparse.Namespace) -> dict[str, Any]:
    rates = {}
    for workers in (1, 2):
        rates[workers], _ = on_ray(workers, args.boards, args.opponent, args.seconds)
        print(
            f"  {workers} Ray worker(s), {args.boards} boards, {args.opponent}: "
            f"{rates[workers]:8.1f} steps/s  x{rates[workers] / rates[1]:.2f}",
            flush=True,
        )
    _, driver = on_ray(2, 2, "random", args.seconds)
    rate, _ = on_ray(1, 1, "random", args.seconds)
    round_trip = 1 / rate  # one board on one actor: a step is the round trip
    per_board = max(args.boards / rates[1] - round_trip - driver, 0.0) / args.boards
    print(
        f"  driver CPU per step and actor: {1000 * driver:.2f} ms; a step's round trip to one "
        f"actor (random opponent): {1000 * round_trip:.2f} ms; opponent time per board and "
        f"step: {1000 * per_board:.2f} ms"
    )
    boards_per_worker = args.boards
    projection = {}
    for workers in (1, 2, 16, 64):
        step_seconds = boards_per_worker * per_board + round_trip + driver * workers
        projection[workers] = workers * boards_per_worker / step_seconds
    print(
        f"  projection ({boards_per_worker} boards per worker; a step = boards x opponent time "
        "+ round trip + driver CPU x workers):"
    )
    for workers, rate in projection.items():
        print(f"    {workers:3d} workers: {rate:9.0f} steps/s  x{rate / projection[1]:.1f}")
    return {"rates": rates, "driver": driver, "round_trip": round_trip, "projection": projection}


def training(args: argparse.Namespace) -> None:
    """Part 3: a default-size run without and with ``--ray`` (a local instance), in turns
    (``--rounds`` of each, the order alternating: the machine's load drifts), the medians
    compared."""
    from connectx_train.trainer import train

    runs: dict[str, list[tuple[float, float, float, float]]] = {"local": [], "--ray": []}
    kinds = [("local", ""), ("--ray", "local")]
    for round_number in range(args.rounds):  # in turns, first one kind then the other: ABBA...
        for name, ray in kinds if round_number % 2 == 0 else kinds[::-1]:
            with tempfile.TemporaryDirectory() as folder:
                config = TrainConfig(
                    out=str(Path(folder) / "run"),
                    timesteps=args.timesteps,
                    teacher_positions=0,
                    eval_every=0,
                    final_games=2,
                    ray=ray,
                    seed=SEED,
                    progress_bar=False,
                )
                started = time.perf_counter()
                report = train(config, log=lambda line: None)
                wall = time.perf_counter() - started
            timing = report["timing"]
            rollout, update = timing["rollout_seconds"], timing["update_seconds"]
            runs[name].append((rollout + update, rollout, update, wall))
            print(
                f"    {name:<6} PPO {rollout + update:7.1f} s (rollouts {rollout:6.1f} s, "
                f"updates {update:6.1f} s); whole run {wall:7.1f} s",
                flush=True,
            )
    medians = {name: np.median(np.array(rows), axis=0) for name, rows in runs.items()}
    base = medians["local"]
    for name, (ppo, rollout, update, wall) in medians.items():
        print(
            f"  median {name:<6} PPO {ppo:7.1f} s x{ppo / base[0]:.3f} (rollouts "
            f"x{rollout / base[1]:.3f}, updates x{update / base[2]:.3f}); whole run "
            f"{wall:7.1f} s x{wall / base[3]:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--opponent", default="alphabeta:time_budget=0.01")
    parser.add_argument("--boards", type=int, default=32, help="boards of parts 1 and 2")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed per row of part 1-2")
    parser.add_argument("--timesteps", type=int, default=8192, help="steps of each run of part 3")
    parser.add_argument("--rounds", type=int, default=4, help="runs of each kind in part 3")
    parser.add_argument("--parts", type=int, nargs="+", default=[1, 2, 3], choices=[1, 2, 3])
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="parts 1 and 2 only, 4 boards, 0.3 s a row"
    )
    args = parser.parse_args()
    if args.quick:
        args.parts, args.boards, args.seconds = [1, 2], 4, 0.3
    print(machine_line())
    if {1, 2} & set(args.parts):
        where = "one instance of 2 CPUs (--quick)" if args.quick else "one CPU a worker"
        print(f"rollouts on Ray actors (a local instance, {where}):")
        rollouts(args)
    if 3 in args.parts:
        print(f"default-size connectx train, {args.timesteps} steps, without and with --ray:")
        training(args)


if __name__ == "__main__":
    main()
