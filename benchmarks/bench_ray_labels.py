"""Teacher labelling on Ray (``connectx train --ray``): positions per second in one local process
and on a local Ray instance with 1 and 2 workers, and whether Ray's labels equal the local ones.

The positions are those a run labels itself: :func:`connectx_baselines.teacher_labels.
make_teacher_set` with the run's defaults, of a teacher seed (``--seed``, not 0) whose chunks the
shipped labels do not hold, all labelled by the solver (``--teacher-labels label``). Each Ray row
runs on an instance of as many CPUs as workers (one chunk task a CPU), started before its timing
(the start is printed apart); the workers' imports count, as in a run. The labels of every row are
compared with the local ones (``np.array_equal`` on the moves and on the values).

    python benchmarks/bench_ray_labels.py [--positions N] [--seed S]
    python benchmarks/bench_ray_labels.py --smoke     # 500 positions on 5x6, in seconds

One run, one machine: the ratios are what matter (a shared machine is noisy). Needs the ``ray``
extra; without it the script says so and exits 0 under ``--smoke``.
"""

from __future__ import annotations

import argparse
import sys
import time

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=20_000, help="teacher positions to label")
    parser.add_argument(
        "--seed", type=int, default=1, help="teacher seed (0's chunks are shipped: not 0)"
    )
    parser.add_argument("--smoke", action="store_true", help="500 positions on 5x6, in seconds")
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
    from connectx_gym.ray_executor import RayExecutor

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
    rows = [("one local process", len(local) / seconds, True)]
    print(f"  {rows[0][0]:<22} {rows[0][1]:8.2f} positions/s ({seconds:.0f} s)", flush=True)
    for workers in (1, 2):
        started = time.perf_counter()
        with RayExecutor(num_cpus=workers):  # the instance the labelling's session then uses
            start = time.perf_counter() - started
            labels, seconds = label(geometry, count, args.seed, ray=LOCAL)
        equal = bool(np.array_equal(labels.moves, local.moves)) and bool(
            np.array_equal(labels.values, local.values)
        )
        name = f"ray, {workers} worker(s)"
        rows.append((name, len(labels) / seconds, equal))
        print(
            f"  {name:<22} {rows[-1][1]:8.2f} positions/s ({seconds:.0f} s; Ray's start "
            f"{start:.0f} s apart)  x{rows[-1][1] / rows[0][1]:.2f} of local  "
            f"labels equal to the local ones: {'yes' if equal else 'NO'}",
            flush=True,
        )
    print(f"2 Ray workers over 1: x{rows[2][1] / rows[1][1]:.2f}")
    if not all(equal for _, _, equal in rows):
        print("bench_ray_labels: Ray's labels differ from the local ones", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
