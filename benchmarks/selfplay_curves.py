"""Learning curves of ``connectx train --preset selfplay`` over several seeds, with a band.

Runs the preset once per seed, one after the other, each into its own folder (``ROOT/seed_S``;
a folder that already holds a ``report.json`` is read, not run again), then measures and draws,
against PPO steps:

- the mistake rate against perfect play on the random-position split and on the game-position
  split (``--split``, the test split by default) of every self-play snapshot the run saved
  (``snapshots/step_*.npz``, every ``--snapshot-every`` steps) and of its final weights, read
  from the shipped labels (:func:`connectx_baselines.perfect_play.evaluate_sets`; no solver);
- the score against minimax depth 4 that the run logged at each ``--eval-every`` (the
  ``evaluations`` of its ``report.json``, ``eval/minimax:depth=4`` in TensorBoard) and its final
  panel's.

Each panel shows every seed as a thin line and their mean with its 95% confidence band across
seeds (Student's t) at the steps every seed reached. Prints the machine, each run's command, wall
time and steps, and a markdown table of the curves (``--table`` also writes it to a file).

Each seed's measured curves are also written to ``ROOT/seed_S/curves_SPLIT.json``, a few
kilobytes: ``--measured FILE...`` joins such files (from runs on other machines or in other
sessions, whose run folders are gone) to the seeds run or read here; ``--measured`` without
``--seeds`` draws the figure and the tables from such files alone, with no run folder. Usage::

    python benchmarks/selfplay_curves.py --seeds 0 1 2 [--root runs/selfplay_seeds]
        [--figure selfplay_curves.png] [--table selfplay_curves.md] [connectx train flags...]
    python benchmarks/selfplay_curves.py --seeds 0 1 2 --max-minutes 8 --snapshot-every 20000
    python benchmarks/selfplay_curves.py --seeds 2 --measured seed_0/curves_test.json ...
    python benchmarks/selfplay_curves.py --measured docs/experiments/data/selfplay_*_test.json

Flags this script does not know go to every ``connectx train --preset selfplay`` command.
``--smoke`` runs two tiny runs (seconds) in a temporary folder: its own flags come after the
given ones and win (``connectx train`` still checks those).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _child as child
import numpy as np
from _machine import machine_line

from connectx_baselines.perfect_play import evaluate_sets
from connectx_gym.files import NumpyNetPolicy, load_weights
from connectx_train.learning_curves import series_colours

#: the panel opponent whose score is drawn
OPPONENT = "minimax:depth=4"
#: the labelled sets drawn, by their name in :data:`connectx_baselines.perfect_play.POSITION_SETS`
SETS = {"random": "random-position split", "games": "game-position split"}
#: the panels drawn: the labelled sets' mistake rates, then the score against OPPONENT
PANELS = [*SETS, OPPONENT]
#: what a measured seed's record holds besides its seed and its panels' points
RUN_FIGURES = {
    "split", "timesteps", "wall_seconds", "steps_per_second", "final_stage",
    "stopped_by_time_limit",
}  # fmt: skip
#: a run of seconds that still saves snapshots, evaluates against minimax 4 and plays a panel
SMOKE = [
    "--timesteps", "256", "--n-envs", "2", "--n-steps", "64", "--batch-size", "64",
    "--n-epochs", "1", "--channels", "4", "--blocks", "1", "--features-dim", "16",
    "--vf-layers", "8", "--snapshot-every", "128", "--checkpoint-every", "128",
    "--eval-every", "128", "--eval-games", "2", "--final-games", "2",
    "--panel", "random", OPPONENT, "--max-minutes", "0",
]  # fmt: skip


def smoke_args(train_args: list[str]) -> list[str]:
    """The flags of a ``--smoke`` run given ``train_args``: the tiny run's last, so that they win
    over a long run's (the last of a flag given twice counts) and the run stays seconds long,
    while ``connectx train`` still checks the given ones."""
    return [*train_args, *SMOKE]


def train_command(seed: int, out: Path, train_args: list[str]) -> list[str]:
    """The ``connectx train --preset selfplay`` command of one seed."""
    return [
        sys.executable, "-m", "connectx_gym.cli", "train", "--preset", "selfplay",
        "--seed", str(seed), "--out", str(out), "--no-progress-bar", *train_args,
    ]  # fmt: skip


def run_seed(seed: int, out: Path, train_args: list[str]) -> dict[str, Any]:
    """The report of the run of ``seed`` in ``out``: read when there is one, else trained (its
    log shown as it goes). Exits with the command's status if it fails."""
    report = out / "report.json"
    command = train_command(seed, out, train_args)
    if report.is_file():
        print(f"seed {seed}: reading the finished run in {out}", flush=True)
    else:
        print(f"seed {seed}: {' '.join(command[2:])}", flush=True)
        started = time.perf_counter()
        status = child.run(command).returncode
        if status != 0:
            print(f"selfplay_curves: seed {seed} failed (exit status {status})", file=sys.stderr)
            sys.exit(status)
        print(f"seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    return dict(json.loads(report.read_text()))


def mistake_points(out: Path, report: dict[str, Any], split: str) -> dict[str, list[tuple]]:
    """``{set: [(step, mistake rate), ...]}`` of the run's snapshots and its final weights on
    ``split`` of each of :data:`SETS`."""
    paths = sorted((out / "snapshots").glob("step_*.npz"))
    weights = [(int(path.stem.removeprefix("step_")), path) for path in paths]
    if not weights or weights[-1][0] != report["timesteps"]:
        weights.append((int(report["timesteps"]), out / "final.npz"))
    points: dict[str, list[tuple]] = {name: [] for name in SETS}
    for step, path in weights:
        policy = NumpyNetPolicy(load_weights(path), deterministic=True, name=f"step {step}")
        results = evaluate_sets(policy, split=split).results
        for name in SETS:
            points[name].append((step, results[name].overall.mistake_rate))
    return points


def score_points(report: dict[str, Any]) -> list[tuple]:
    """``[(step, score against OPPONENT), ...]`` of the run's periodic evaluations, then its
    final panel (which stands for an evaluation at the same step: it plays more games)."""
    end = report["timesteps"]
    final = report["panel"].get(OPPONENT)
    points = [
        (e["timestep"], e["scores"][OPPONENT])
        for e in report["evaluations"]
        if final is None or e["timestep"] != end
    ]
    return points if final is None else [*points, (end, final["score"])]


def mean_band(series: list[list[tuple]]) -> list[tuple[int, float, float, float]]:
    """``(step, mean, low, high)`` at the steps every series has: the mean across series and its
    95% Student's t interval, clipped to the rates' and scores' range [0, 1] (the mean alone,
    for one series)."""
    from scipy.stats import t  # type: ignore[import-untyped,import-not-found,unused-ignore]

    common = sorted(set.intersection(*({step for step, _ in s} for s in series)))
    rows = []
    for step in common:
        values = np.array([dict(s)[step] for s in series], dtype=np.float64)
        mean = float(values.mean())
        if len(values) < 2:
            rows.append((step, mean, mean, mean))
            continue
        half = float(t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values)))
        rows.append((step, mean, max(mean - half, 0.0), min(mean + half, 1.0)))
    return rows


def measure(seed: int, out: Path, report: dict[str, Any], split: str) -> dict[str, Any]:
    """The record of one seed: its run's figures and each panel's points, also written to
    ``out/curves_SPLIT.json`` (what ``--measured`` reads)."""
    record = {
        "seed": seed,
        "split": split,
        "timesteps": report["timesteps"],
        "wall_seconds": report["wall_seconds"],
        "steps_per_second": report["steps_per_second"],
        "final_stage": report["curriculum"][-1]["opponents"] if report["curriculum"] else [],
        "stopped_by_time_limit": report["stopped_by_time_limit"],
        "panels": {**mistake_points(out, report, split), OPPONENT: score_points(report)},
    }
    (out / f"curves_{split}.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def read_measured(path: Path, split: str) -> dict[str, Any]:
    """A record that :func:`measure` wrote; exits with a one-line message if ``path`` holds none
    or its curves were measured on another split than ``split``."""
    try:
        record = dict(json.loads(path.read_text()))
        record["seed"] = int(record["seed"])
        record["panels"] = {
            name: [(int(step), float(value)) for step, value in record["panels"][name]]
            for name in PANELS
        }
        missing = RUN_FIGURES - record.keys()
        if missing:
            raise KeyError(", ".join(sorted(missing)))
    except (OSError, ValueError, KeyError, TypeError) as error:
        sys.exit(f"selfplay_curves: {path} is not a curves file of this script ({error!r})")
    if record["split"] != split:
        sys.exit(
            f"selfplay_curves: {path} was measured on the {record['split']} split, not on "
            f"the {split} split (--split {split})"
        )
    return record


def curves(records: dict[int, dict[str, Any]]) -> dict[str, dict[int, list]]:
    """Each panel's points per seed: ``{panel: {seed: [(step, value), ...]}}``."""
    return {name: {seed: r["panels"][name] for seed, r in records.items()} for name in PANELS}


def draw(panels: dict[str, dict[int, list]], split: str, path: Path) -> None:
    """The three panels (random split, game split, score against minimax 4) to ``path``."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter, StrMethodFormatter

    seeds = sorted({seed for panel in panels.values() for seed in panel})
    colours = series_colours([f"seed {seed}" for seed in seeds])
    figure = Figure(figsize=(10, 9), layout="constrained")
    axes = figure.subplots(len(panels), 1, sharex=True)
    for axis, (name, by_seed) in zip(axes, panels.items(), strict=True):
        for seed in seeds:
            if by_seed.get(seed):
                steps, values = zip(*by_seed[seed], strict=True)
                label = f"seed {seed}"
                axis.plot(steps, values, color=colours[label], linewidth=1, alpha=0.6, label=label)
        rows = mean_band([by_seed[seed] for seed in seeds if by_seed.get(seed)])
        if rows:
            steps, means, lows, highs = zip(*rows, strict=True)
            axis.plot(steps, means, color="black", linewidth=2, marker="o", markersize=3,
                      label=f"mean of {len(seeds)} seeds")  # fmt: skip
            if len(seeds) > 1:
                axis.fill_between(steps, lows, highs, color="black", alpha=0.15,
                                  label="95% CI across seeds")  # fmt: skip
        if name in SETS:
            axis.set_ylabel(f"mistakes,\n{SETS[name]}\n({split})")
            axis.set_ylim(bottom=0)
            axis.yaxis.set_major_formatter(PercentFormatter(1.0))
        else:
            axis.set_ylabel(f"score vs\n{name}")
            axis.set_ylim(-0.02, 1.02)
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[0].set_title("connectx train --preset selfplay: no solver labels, PPO from scratch")
    axes[-1].set_xlabel("PPO steps")
    axes[-1].set_xlim(left=0)
    axes[-1].xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    figure.savefig(path, dpi=100, format="png")


def table(panels: dict[str, dict[int, list]]) -> str:
    """The means and 95% intervals across seeds of each panel at the steps every seed reached."""
    lines = []
    for name, by_seed in panels.items():
        what = f"mistakes, {SETS[name]}" if name in SETS else f"score vs {name}"
        percent = name in SETS
        lines += [f"| steps | {what}: mean | 95% CI | per seed |", "|---:|---:|---|---|"]
        series = [by_seed[seed] for seed in sorted(by_seed)]
        for step, mean, low, high in mean_band(series):
            each = ", ".join(_value(dict(s)[step], percent) for s in series)
            band = f"{_value(low, percent)} to {_value(high, percent)}"
            lines.append(f"| {step:,} | {_value(mean, percent)} | {band} | {each} |")
        lines.append("")
    return "\n".join(lines)


def _value(value: float, percent: bool) -> str:
    return f"{value:.1%}" if percent else f"{value:.3f}"


def run_lines(records: dict[int, dict[str, Any]], panels: dict[str, dict[int, list]]) -> str:
    """One line per run: its seed, steps, wall time, steps a second, the stage reached, whether
    the time bound stopped it, and each panel's value at its end (final weights, final panel)."""
    ends = " | ".join(f"end: mistakes, {what}" for what in SETS.values())
    lines = [
        f"| seed | steps | wall min | steps/s | final stage | time bound | {ends} | "
        f"end: score vs {OPPONENT} |",
        "|---:|---:|---:|---:|---|---|" + "---:|" * len(panels),
    ]
    for seed, record in records.items():
        last = [panel[seed][-1][1] if panel.get(seed) else math.nan for panel in panels.values()]
        values = " | ".join(_value(v, name in SETS) for v, name in zip(last, panels, strict=True))
        lines.append(
            f"| {seed} | {record['timesteps']:,} | {record['wall_seconds'] / 60:.1f} | "
            f"{record['steps_per_second']:.0f} | {'+'.join(record['final_stage'])} | "
            f"{'stopped it' if record['stopped_by_time_limit'] else 'no'} | {values} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="the runs' seeds (default: 0 1 2, or none with --measured: the "
                        "figure and tables of those files alone)")  # fmt: skip
    parser.add_argument("--root", type=Path, default=Path("runs/selfplay_seeds"),
                        help="the runs' folder: one seed_S folder each")  # fmt: skip
    parser.add_argument("--figure", type=Path, default=None,
                        help="the PNG to write (default: ROOT/selfplay_curves.png)")  # fmt: skip
    parser.add_argument("--table", type=Path, default=None, help="also write the tables here")
    parser.add_argument("--split", choices=("test", "dev"), default="test",
                        help="the labelled positions' split measured")  # fmt: skip
    parser.add_argument("--measured", type=Path, nargs="+", default=[], metavar="FILE",
                        help="curves_SPLIT.json files of other seeds' runs to join")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="two tiny runs (seconds)")
    args, train_args = parser.parse_known_args()
    if importlib.util.find_spec("scipy") is None:  # before hours of training, not after
        sys.exit("selfplay_curves: the confidence bands need scipy (pip install scipy)")
    if args.seeds is None:
        args.seeds = [] if args.measured else [0, 1, 2]
    if args.smoke:
        args.seeds, train_args = [0, 1], smoke_args(train_args)
    measured = [read_measured(path, args.split) for path in args.measured]
    seeds = [*args.seeds, *(record["seed"] for record in measured)]
    if len(set(seeds)) < len(seeds):
        sys.exit(f"selfplay_curves: a seed comes twice among --seeds and --measured ({seeds})")
    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="selfplay_curves_") as directory:
        if args.smoke:
            args.root = Path(directory)
        records = {record["seed"]: record for record in measured}
        for seed in args.seeds:
            out = args.root / f"seed_{seed}"
            records[seed] = measure(seed, out, run_seed(seed, out, train_args), args.split)
        records = dict(sorted(records.items()))
        panels = curves(records)
        figure = args.figure or args.root / "selfplay_curves.png"
        figure.parent.mkdir(parents=True, exist_ok=True)
        draw(panels, args.split, figure)
        text = f"{run_lines(records, panels)}\n\n{table(panels)}"
        print()
        print(text)
        print(f"figure: {figure}")
        if args.table is not None:
            args.table.write_text(text + "\n")


if __name__ == "__main__":
    main()
