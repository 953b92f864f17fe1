"""The GPU path of ``connectx train``, checked and timed in one go on a machine with a GPU.

1. ``--device cuda`` picks the GPU, a tiny run (with a teacher) trains there, and its checkpoint
   resumes on the CPU (``--device cpu``).
2. One supervised pass (:func:`connectx_train.teacher.pretrain_policy`, the default network, batches
   of 256) over ``--positions`` positions on the GPU (float32 and bfloat16) and on the CPU (float32,
   torch's threads), after a short warm-up pass on each. The positions are random boards with
   random labels: the pass's work does not depend on them.
3. The phases of the default run on the GPU, in this process (:mod:`bench_phases`' table);
   flags not known here go to that run (for example ``--max-minutes 8`` or ``--timesteps
   200000``).

It stops at once, with one line, when torch sees no GPU. ``--device cpu`` runs every part on the
CPU instead (to check the script where there is no GPU); ``--smoke`` makes every part tiny.
Usage::

    python benchmarks/gpu_check.py [--positions 80000] [--skip-run | --run-only] [train flags...]
    python benchmarks/gpu_check.py --device cpu --smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from bench_phases import SMOKE, describe_run, phase_table

from connectx_train.config import TrainConfig
from connectx_train.config_cli import add_arguments, config_from_args
from connectx_train.run_setup import machine_summary, resolve_device, resolve_setup

if TYPE_CHECKING:
    from connectx_train.teacher import TeacherTensors

# connectx_train.model, connectx_train.teacher and connectx_train.trainer (stable-baselines3) are
# imported where they are used: without a GPU the script stops before those slow imports


def tiny_config() -> TrainConfig:
    """A run of seconds on a small board, with a teacher, so that every part of the plumbing
    runs: :mod:`bench_phases`' smoke settings, with checkpoints and a teacher replay."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    extra = ["--checkpoint-every", "128", "--teacher-replay", "1", "--no-progress-bar"]
    return config_from_args(parser.parse_args([*SMOKE, *extra]))


def quiet(_: str) -> None:
    pass


def check_tiny_run(device: str, directory: Path) -> None:
    """Part 1: a tiny run on ``device`` reports it, and its checkpoint resumes on the CPU."""
    from connectx_train.trainer import train

    out, tiny = directory / "tiny", tiny_config()
    report = train(dataclasses.replace(tiny, out=str(out), device=device), log=quiet)
    if not report["device"].startswith(device):
        raise SystemExit(f"gpu_check: the tiny run ran on {report['device']}, not on {device}")
    print(f"tiny run: {report['timesteps']} steps on {report['device']}")
    resumed = dataclasses.replace(tiny, out=str(out), device="cpu", resume=True, timesteps=512)
    again = train(resumed, log=quiet)
    if not again["device"].startswith("cpu"):
        raise SystemExit(f"gpu_check: the resumed run ran on {again['device']}, not on the CPU")
    print(f"its checkpoint resumed on {again['device']}: {again['timesteps']} steps")


def random_positions(count: int, rows: int, columns: int, seed: int) -> TeacherTensors:
    """``count`` random boards and labels, shaped like the teacher's (seeded)."""
    from connectx_train.teacher import TeacherTensors

    rng = np.random.default_rng(seed)
    stones = rng.random((count, rows, columns)) < 0.4
    mover = rng.random((count, rows, columns)) < 0.5
    planes = np.stack([stones & mover, stones & ~mover], axis=1).astype(np.int8)
    good = rng.random((count, columns)) < 0.3
    good[:, 0] = True  # every position keeps its value somewhere
    return TeacherTensors(
        torch.as_tensor(planes),
        torch.ones(count, columns, dtype=torch.bool),
        torch.as_tensor(good),
        torch.as_tensor(rng.choice([-1.0, 0.0, 1.0], count), dtype=torch.float32),
    )


def time_supervised_pass(device: str, precision: str, positions: TeacherTensors) -> float:
    """Wall seconds of one supervised pass over ``positions`` with the default network."""
    from connectx_train.model import new_model
    from connectx_train.opponents import close_env, make_vec_env
    from connectx_train.teacher import PRETRAIN_LEARNING_RATE, TEACHER_BATCH, pretrain_policy

    config = dataclasses.replace(TrainConfig(), device=device, precision=precision, n_envs=2)
    env = make_vec_env(config)
    with tempfile.TemporaryDirectory() as directory:
        setup = resolve_setup(config)
        policy = new_model(config, env, Path(directory), setup.device, setup.precision.bf16).policy
    close_env(env)
    warm_up = type(positions)(
        *(part[: 2 * TEACHER_BATCH] for part in dataclasses.astuple(positions))
    )
    settings = {"batch_size": TEACHER_BATCH, "learning_rate": PRETRAIN_LEARNING_RATE, "seed": 0}
    pretrain_policy(policy, warm_up, epochs=1, log=quiet, **settings)
    started = time.perf_counter()
    pretrain_policy(policy, positions, epochs=1, log=quiet, **settings)  # ends reading its losses
    return time.perf_counter() - started


def time_supervised_passes(device: str, count: int) -> None:
    """Part 2: the pass on ``device`` (float32, bfloat16) and on the CPU (float32)."""
    from connectx_train.teacher import TEACHER_BATCH

    positions = random_positions(count, TrainConfig().rows, TrainConfig().columns, seed=0)
    runs = [(device, "fp32"), (device, "bf16")] + ([("cpu", "fp32")] if device != "cpu" else [])
    print(f"\none supervised pass over {count:,} positions, batches of {TEACHER_BATCH}:")
    for where, precision in runs:
        seconds = time_supervised_pass(where, precision, positions)
        threads = f", {torch.get_num_threads()} threads" if where == "cpu" else ""
        print(f"  {where} {precision}{threads}: {seconds:.2f} s")


def run_config(train_args: list[str], out: Path) -> Any:
    """The settings of ``connectx train train_args --out out`` (argparse's errors and exit)."""
    from connectx_train.config_cli import add_arguments, config_from_args

    parser = argparse.ArgumentParser(prog="gpu_check.py (flags of connectx train)")
    add_arguments(parser)
    args = parser.parse_args([*train_args, "--out", str(out), "--no-progress-bar"])
    try:
        return config_from_args(args)
    except ValueError as error:
        parser.error(str(error))


def run_default(config: Any) -> tuple[dict[str, Any], float]:
    """Part 3: the run of ``config`` in this process (its log shown); its report and seconds."""
    from connectx_train.trainer import train

    started = time.perf_counter()
    report = train(config)
    return report, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--positions", type=int, default=80_000, help="of the supervised pass")
    parser.add_argument("--skip-run", action="store_true", help="leave out part 3")
    parser.add_argument("--run-only", action="store_true", help="leave out parts 1 and 2")
    parser.add_argument("--smoke", action="store_true", help="every part tiny")
    args, run_args = parser.parse_known_args()
    try:
        resolve_device(args.device)
    except ValueError:
        print(
            f"gpu_check: torch {torch.__version__} sees no GPU: run this on a GPU machine "
            "(--device cpu checks the script itself on the CPU)",
            file=sys.stderr,
        )
        sys.exit(2)
    from connectx_train.teacher import TEACHER_BATCH

    if args.positions < TEACHER_BATCH:
        parser.error(f"--positions must be >= {TEACHER_BATCH}")
    print(machine_summary())
    train_args = [*(SMOKE if args.smoke else []), *run_args, "--device", args.device]
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as directory:
        config = run_config(train_args, Path(directory) / "default")  # bad flags: before part 1
        if not args.run_only:
            check_tiny_run(args.device, Path(directory))
            count = 2 * TEACHER_BATCH if args.smoke else args.positions
            time_supervised_passes(args.device, count)
        if args.skip_run:
            return
        print(f"\nthe run: connectx train {' '.join(train_args)}")
        report, seconds = run_default(config)
    print()
    print(describe_run(report, train_args, seconds))
    print()
    print(phase_table(report))


if __name__ == "__main__":
    main()
