"""Wall time of each phase of one ``connectx train`` run, on this machine.

Runs ``connectx train`` with the arguments given (any flag of ``connectx train``; none: the
default run) in ``--out`` (default: a temporary directory, removed afterwards), then prints the
machine (CPU model, cores, bfloat16 support, GPU, torch version), the device and number format
the run chose, and a table of its phases read from the run's ``report.json``: labelling the
teacher positions, the supervised passes, PPO's rollouts and updates, the final panel. Usage::

    python benchmarks/bench_phases.py [--out DIR] [--smoke] [connectx train flags...]
    python benchmarks/bench_phases.py --timesteps 4096
    python benchmarks/bench_phases.py --device cuda

``--smoke`` adds a tiny run's settings (seconds of training) before the flags given.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _child as child

from connectx_train.run_setup import machine_summary

#: a run of a few seconds that still labels, teaches, trains and plays a final panel
SMOKE = [
    "--timesteps", "256", "--rows", "4", "--columns", "5", "--inarow", "3",
    "--n-envs", "2", "--n-steps", "64", "--batch-size", "64", "--n-epochs", "1",
    "--channels", "4", "--blocks", "1", "--features-dim", "16", "--vf-layers", "8",
    "--curriculum", "random", "--panel", "random", "--eval-every", "0", "--final-games", "2",
    "--teacher-positions", "10", "--teacher-epochs", "1", "--teacher-workers", "1",
    "--teacher-book", "none",
    "--max-minutes", "0",
]  # fmt: skip


def run_training(train_args: list[str], out: Path) -> tuple[dict[str, Any], float]:
    """Run ``connectx train train_args --out out`` (its log shown as it goes); returns its
    report and the command's wall seconds. Exits with the command's status if it fails."""
    command = [sys.executable, "-m", "connectx_gym.cli", "train", *train_args, "--out", str(out)]
    started = time.perf_counter()
    status = child.run([*command, "--no-progress-bar"]).returncode
    seconds = time.perf_counter() - started
    if status != 0:
        print(f"bench_phases: connectx train failed (exit status {status})", file=sys.stderr)
        sys.exit(status)
    return json.loads((out / "report.json").read_text()), seconds


def phase_rows(report: dict[str, Any]) -> list[tuple[str, float]]:
    """``(phase, wall seconds)`` of a run's report, ending with the whole run."""
    timing = report["timing"]
    if "labelling_seconds" in timing:
        teacher = [
            ("labelling teacher positions", timing["labelling_seconds"]),
            ("teaching (supervised passes)", timing["teaching_seconds"]),
        ]
    else:  # a report from before the two were timed apart
        teacher = [("teacher (labelling and supervised passes)", report["teacher_seconds"])]
    rows = [
        *teacher,
        ("PPO rollouts (with periodic evaluation, checkpoints)", timing["rollout_seconds"]),
        ("PPO updates (with teacher replay)", timing["update_seconds"]),
        ("final panel", report["final_eval_seconds"]),
    ]
    wall = report["wall_seconds"]
    rows.append(("other (start, final files, report)", max(wall - sum(s for _, s in rows), 0)))
    return [*rows, ("whole run", wall)]


def phase_table(report: dict[str, Any]) -> str:
    """The phases of :func:`phase_rows` as a markdown table with their share of the run."""
    wall = max(report["wall_seconds"], 1e-9)
    lines = ["| phase | wall s | share |", "|---|---:|---:|"]
    for name, seconds in phase_rows(report):
        lines.append(f"| {name} | {seconds:.1f} | {100 * seconds / wall:.0f}% |")
    return "\n".join(lines)


def describe_run(report: dict[str, Any], train_args: list[str], seconds: float) -> str:
    """What ran: the command, the device and number format it chose, its steps."""
    number_format = "bfloat16" if report.get("bf16") else "float32"
    reason = report.get("precision_reason", "")
    return (
        f"connectx train {' '.join(train_args)}".rstrip()
        + f"\ndevice {report.get('device', 'cpu')}; products in {number_format} ({reason}); "
        f"{report['timesteps']:,} steps; {seconds:.1f} s in all"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="the run's directory (default: a temporary one)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (seconds)")
    args, train_args = parser.parse_known_args()
    train_args = [*SMOKE, *train_args] if args.smoke else train_args
    with tempfile.TemporaryDirectory(prefix="bench_phases_") as directory:
        out = args.out or Path(directory) / "run"
        report, seconds = run_training(train_args, out)
    print()
    print(machine_summary())
    print(describe_run(report, train_args, seconds))
    print()
    print(phase_table(report))


if __name__ == "__main__":
    main()
