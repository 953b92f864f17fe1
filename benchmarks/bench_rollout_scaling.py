"""Rollout steps per second against ``minimax:depth=4`` (or ``--opponent``) on 1, 2, 4, ...
threads: how the batched env's searching opponents scale with the cores.

Each step of ``gymnasium.make_vec("ConnectX-v0", num_envs=B, opponent="minimax:depth=4")`` plays
B random legal agent moves (drawn from the mask with a seeded generator) and the opponents'
replies, which :mod:`connectx_baselines.batch_actors` searches on numba's threads
(``numba.set_num_threads``, the count of each row). The rows are measured in turns (``--rounds``
rounds of ``--seconds`` each, after a warm-up in which the batch actor settles whether spreading
pays) and the table shows the median, with the ratio to 1 and to 2 threads. The 16-core target of
issue 44 is at least 5x the steps/s of 2 threads.

Run::

    python benchmarks/bench_rollout_scaling.py                 # 1, 2, 4, ... up to every core
    python benchmarks/bench_rollout_scaling.py --threads 1 2 16 --envs 512
    python benchmarks/bench_rollout_scaling.py --opponent alphabeta:max_depth=8  # the curriculum's
    python benchmarks/bench_rollout_scaling.py --quick         # 1 round of 0.3 s (CI: --smoke)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
from _machine import available_cores, machine_line

SEED = 0


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below ``cores``, then ``cores``."""
    counts, count = [], 1
    while count < cores:
        counts.append(count)
        count *= 2
    return [*counts, cores]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--opponent",
        default="minimax:depth=4",
        help="the opponent spec (a searcher with a batch answer: onestep, minimax, negamax, "
        "alphabeta with a max_depth)",
    )
    parser.add_argument("--envs", type=int, default=256, help="boards of the batched env")
    parser.add_argument("--threads", type=int, nargs="+", help="thread counts (default 1, 2, 4..)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="per row and round")
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="1 round of 0.3 s, 64 boards"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.envs = 1, 0.3, 64

    import gymnasium as gym
    import numba

    from connectx_gym.registry import make_policy  # (connectx_gym registers ConnectX-v0)

    try:
        make_policy(args.opponent)
    except (ValueError, TypeError) as error:
        parser.error(f"--opponent {args.opponent!r}: {error}")
    cores = available_cores()
    counts = args.threads or thread_counts(min(cores, numba.config.NUMBA_NUM_THREADS))
    too_many = [count for count in counts if not 1 <= count <= numba.config.NUMBA_NUM_THREADS]
    if too_many:
        parser.error(f"--threads {too_many}: numba has 1 to {numba.config.NUMBA_NUM_THREADS}")
    print(machine_line())
    print(f"Python {platform.python_version()}, numba {numba.__version__} "
          f"(threading layer chosen at the first parallel call)")  # fmt: skip

    opponent = args.opponent
    env = gym.make_vec("ConnectX-v0", num_envs=args.envs, opponent=opponent)
    rng = np.random.default_rng(SEED)
    env.reset(seed=SEED)

    def steps_per_second(threads: int, seconds: float) -> float:
        numba.set_num_threads(threads)
        steps = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            masks = env.action_masks()
            env.step(np.argmax(masks * rng.random(masks.shape), axis=1))
            steps += args.envs
        return steps / (time.perf_counter() - start)

    for threads in counts:  # compile, and let the batch actor time both ways
        steps_per_second(threads, max(1.0, args.seconds) if not args.quick else 0.3)
    rates: dict[int, list[float]] = {threads: [] for threads in counts}
    for _ in range(args.rounds):
        for threads in counts:
            rates[threads].append(steps_per_second(threads, args.seconds))
    medians = {threads: statistics.median(values) for threads, values in rates.items()}
    layer = numba.threading_layer() if max(counts) > 1 else "none used"
    print(f"threading layer: {layer}\n")
    print(f"agent steps/s against {opponent}, {args.envs} boards "
          f"(median of {args.rounds} x {args.seconds:g} s)\n")  # fmt: skip
    print("| threads | steps/s | x 1 thread | x 2 threads |")
    print("|---:|---:|---:|---:|")
    for threads in counts:
        rate = medians[threads]
        two = f"{rate / medians[2]:.2f}x" if 2 in medians else "-"
        print(f"| {threads} | {rate:,.0f} | {rate / medians[counts[0]]:.2f}x | {two} |")
    env.close()


if __name__ == "__main__":
    main()
