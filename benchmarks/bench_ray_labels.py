"""Teacher labelling on Ray (``connectx train --ray``): positions per second in one local process
and on a local Ray instance with 1 and 2 workers, and whether Ray's labels equal the local ones.

The positions are those a run labels itself: :func:`connectx_baselines.teacher_labels.
make_teacher_set` with the run's defaults, of a teacher seed (``--seed``, not 0) whose chunks the
shipped labels do not hold, all labelled by the solver (``--teacher-labels label``). Each Ray row
runs on an instance of as many CPUs as workers (one chunk task a CPU), started before its timing
(the start is printed apart); the workers' imports count, as in a run. ``--smoke`` runs both Ray
rows on one instance of 2 CPUs (one start of Ray), the 1-worker row with one CPU held by an idle
actor. The labels of every row are compared with the local ones (``np.array_equal`` on the moves
and on the values).

    python benchmarks/bench_ray_labels.py [--positions N] [--seed S]
    python benchmarks/bench_ray_labels.py --smoke     # 500 positions on 5x6, in seconds

One run, one machine: the ratios are what matter (a shared machine is noisy). Needs the ``ray``
extra; without it the script says so and exits 0 under ``--smoke``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from _machine import machine_line

from connectx_baselines.teacher_labels import CHUNK, TeacherSet, make_teacher_set
from connectx_baselines.teacher_ray import LOCAL
from connectx_gym.bitboard import Geometry

#: the board of the timed labelling, and the smaller one of ``--smoke``
BOARD, SMOKE_BOARD = Geometry(6, 7, 4), Geometry(5, 6, 4)


def label(geometry: Geometry, count: int, seed: int, ray: str = "") -> tuple[TeacherSet, float]:
    """The teacher set a run of teacher seed ``seed`` labels (in this process, or as Ray tasks
    with ``ray``), and its seconds."""
    started = time.perf_counter()
    labels = make_teacher_set(geometry, count, seed, shipped=False, workers=1, ray=ray)
    return labels, time.perf_counter() - started


class _Idle:
    """A Ray actor that holds one CPU and does nothing, so that the chunk tasks get the others."""

    def ready(self) -> bool:
        return True


def on_ray(
    geometry: Geometry, count: int, seed: int, shared: bool
) -> Iterator[tuple[int, TeacherSet, float, str]]:
    """(workers, labels, seconds, how Ray started) with 1 then 2 Ray workers: each on an instance
    of as many CPUs, or with ``shared`` both on one instance of 2 CPUs (one held for 1 worker)."""
    import ray

    from connectx_gym.ray_executor import RayExecutor

    if not shared:
        for workers in (1, 2):
            started = time.perf_counter()
            with RayExecutor(num_cpus=workers):  # the instance the labelling's session uses
                start = f"Ray's start {time.perf_counter() - started:.0f} s apart"
                yield workers, *label(geometry, count, seed, ray=LOCAL), start
        return
    started = time.perf_counter()
    with RayExecutor(num_cpus=2):
        start = f"Ray's start {time.perf_counter() - started:.0f} s apart"
        for workers in (1, 2):
            idle: list[Any] = [ray.remote(num_cpus=1)(_Idle).remote() for _ in range(2 - workers)]
            ray.get([actor.ready.remote() for actor in idle])
            try:
                yield workers, *label(geometry, count, seed, ray=LOCAL), start
            finally:
                for actor in idle:
                    ray.kill(actor)
            start = "the same instance"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=20_000, help="teacher positions to label")
    parser.add_argument(
        "--seed", type=int, default=1, help="teacher seed (0's chunks are shipped: not 0)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="500 positions on 5x6, one Ray instance, in seconds"
    )
    args = parser.parse_args()
    if args.seed == 0:
        parser.error("--seed 0's positions are shipped, not labelled by a run: use another seed")
    if args.positions < 1:
        parser.error(f"--positions must be at least 1, got {args.positions}")
    try:
        import ray  # noqa: F401
    except ImportError:
        print('bench_ray_labels: Ray is not installed (pip install "ray>=2.9"); skipped')
        return 0 if args.smoke else 1
    geometry, count = (SMOKE_BOARD, 2 * CHUNK) if args.smoke else (BOARD, args.positions)
    print(machine_line(), flush=True)
    chunks = -(-count // CHUNK)
    print(
        f"labelling {count} teacher positions of seed {args.seed} on {geometry.rows}x"
        f"{geometry.columns} ({chunks} chunks of up to {CHUNK}), none read from the shipped labels",
        flush=True,
    )
    make_teacher_set(geometry, 1, args.seed + 1, shipped=False)  # numba's compilation, untimed
    local, seconds = label(geometry, count, args.seed)
    rates = {0: len(local) / seconds}
    print(f"  {'one local process':<22} {rates[0]:8.2f} positions/s ({seconds:.0f} s)", flush=True)
    differ = False
    try:
        for workers, labels, seconds, start in on_ray(geometry, count, args.seed, args.smoke):
            equal = bool(np.array_equal(labels.moves, local.moves)) and bool(
                np.array_equal(labels.values, local.values)
            )
            differ = differ or not equal
            rates[workers] = len(labels) / seconds
            print(
                f"  {f'ray, {workers} worker(s)':<22} {rates[workers]:8.2f} positions/s "
                f"({seconds:.0f} s; {start})  x{rates[workers] / rates[0]:.2f} of local  "
                f"labels equal to the local ones: {'yes' if equal else 'NO'}",
                flush=True,
            )
    except ConnectionError as error:  # Ray did not start (a loaded machine: its 30 s bound)
        print(f"bench_ray_labels: {error}", file=sys.stderr)
        return 1
    print(f"2 Ray workers over 1: x{rates[2] / rates[1]:.2f}")
    if differ:
        print("bench_ray_labels: Ray's labels differ from the local ones", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
