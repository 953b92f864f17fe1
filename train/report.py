"""The end-of-run report: ``report.json``, ``report.md`` and ``learning_curves.png``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from connectx_gym.outputs import write_atomically, write_text_atomically

__all__ = [
    "DIGEST_KEY",
    "check_report",
    "markdown_report",
    "plot_learning_curves",
    "weights_digest",
    "write_report",
]

#: the report's field holding :func:`weights_digest` of the ``final.npz`` it describes
DIGEST_KEY = "weights_sha256"


def markdown_report(report: dict[str, Any]) -> str:
    """The report as markdown: panel table with 95% intervals, run facts, opponent timings."""
    config = report["config"]
    teacher_seed = config.get("teacher_seed")
    seed = f"seed {config['seed']}" + (
        f" (teacher positions of seed {teacher_seed})"
        if teacher_seed is not None and teacher_seed != config["seed"]
        else ""
    )
    lines = [
        "# connectx train report",
        "",
        f"- steps: {report['timesteps']:,} in {report['wall_seconds'] / 60:.1f} min wall: "
        f"teacher (labelling and supervised passes) {report.get('teacher_seconds', 0):.0f} s, "
        f"PPO {report['training_seconds']:.0f} s ({report['steps_per_second']:.0f} steps/s), "
        f"periodic evaluation {report['periodic_eval_seconds']:.0f} s, "
        f"final panel {report['final_eval_seconds']:.0f} s",
        f"- board {config['rows']}x{config['columns']}, {config['inarow']} in a row; {seed}; "
        f"{config['n_envs']} envs ({config['vec_env']}); network products in "
        f"{'bfloat16' if report.get('bf16') else 'float32'} "
        f"({report.get('precision_reason', '--precision ' + config.get('precision', 'fp32'))})"
        + (f" on {report['device']}" if "device" in report else ""),
        f"- curriculum reached stage {report['final_stage']}: "
        + " -> ".join(
            f"{'+'.join(h['opponents'])} @ {h['timestep']:,}" for h in report["curriculum"]
        ),
    ]
    if config.get("average_weights", 1) > 1:
        steps = report.get("averaged_snapshots", [])
        lines.append(
            f"- play weights (final.npz, the panel below): the mean of the last weights and the "
            f"snapshots of steps {', '.join(f'{step:,}' for step in steps)}"
            if steps
            else "- play weights: the last weights (no snapshot to average with)"
        )
    if report.get(DIGEST_KEY):
        lines.append(f"- play weights: final.npz, weights sha256 {report[DIGEST_KEY]}")
    if report.get("stopped_by_time_limit"):
        lines.append(f"- stopped by the time limit (--max-minutes {config['max_minutes']})")
    lines += [
        "",
        f"## Panel ({config['final_games']} games each, seats alternating, deterministic agent)",
        "",
        "| opponent | wins | draws | losses | score | 95% CI | illegal |",
        "|---|---:|---:|---:|---:|---|---:|",
    ]
    for spec, r in report["panel"].items():
        low, high = r["ci95"]
        lines.append(
            f"| {spec} | {r['wins']} | {r['draws']} | {r['losses']} | {r['score']:.3f} "
            f"| {low:.3f}-{high:.3f} | {r['illegal_a']} |"
        )
    rates = report.get("perfect_play")
    if rates:
        lines += [
            "",
            f"## Against perfect play (shipped labelled positions, {rates['split']} split)",
            "",
            "| phase | positions | mistakes | 95% CI | perfect moves |",
            "|---|---:|---:|---|---:|",
        ]
        for name, r in [*rates["phases"].items(), ("all", rates["overall"])]:
            low, high = r["mistake_ci95"]
            lines.append(
                f"| {name} | {r['positions']} | {r['mistake_rate']:.1%} "
                f"| {low:.1%}-{high:.1%} | {r['perfect_rate']:.1%} |"
            )
    timing = report["timing"]
    lines += [
        "",
        "## Time inside opponents",
        "",
        f"Opponents took {100 * timing['opponent_share_of_wall']:.1f}% of the wall time "
        f"({timing['opponent_seconds']:.0f} s of the env's {timing['env_seconds']:.0f} s).",
        "",
        f"Wall time of this session's PPO: rollouts {timing.get('rollout_seconds', 0):.0f} s "
        f"(env and opponents {timing['env_seconds']:.0f} s; the policy's forward passes and "
        f"callbacks {timing.get('rollout_forward_seconds', 0):.0f} s), PPO updates "
        f"{timing.get('update_seconds', 0):.0f} s (with teacher replay).",
        "",
        "| opponent | moves | ms/move | share of wall if every step were against it |",
        "|---|---:|---:|---:|",
    ]
    for label, t in sorted(timing["opponents"].items()):
        lines.append(
            f"| {label} | {t['moves']:,} | {t['ms_per_move']:.3f} "
            f"| {100 * t['projected_share_of_wall']:.1f}% |"
        )
    lines.append("")
    return "\n".join(lines)


def plot_learning_curves(report: dict[str, Any], path: Path) -> None:
    """Panel scores and training win rates against steps, as a PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    evaluations = report["evaluations"]
    for spec in report["panel"]:
        points = [(e["timestep"], e["scores"][spec]) for e in evaluations if spec in e["scores"]]
        points.append((report["timesteps"], report["panel"][spec]["score"]))
        top.plot(*zip(*points, strict=True), marker="o", label=spec)
    top.set_ylabel("panel score")
    top.set_ylim(-0.02, 1.02)
    top.legend(fontsize="small")
    top.grid(alpha=0.3)
    curve = report["train_curve"]
    labels = sorted({k for p in curve for k in p} - {"timestep", "stage"})
    for label in labels:
        points = [(p["timestep"], p[label]) for p in curve if label in p]
        bottom.plot(*zip(*points, strict=True), label=label)
    for stage in report["curriculum"][1:]:
        for axis in (top, bottom):
            axis.axvline(stage["timestep"], color="grey", linestyle=":", linewidth=1)
    bottom.set_ylabel("training win rate")
    bottom.set_xlabel("steps")
    bottom.set_ylim(-0.02, 1.02)
    if labels:
        bottom.legend(fontsize="small")
    bottom.grid(alpha=0.3)
    figure.tight_layout()
    try:
        write_atomically(path, lambda temporary: figure.savefig(temporary, dpi=100, format="png"))
    finally:
        plt.close(figure)


def weights_digest(path: Path) -> str:
    """SHA-256 of the arrays of a weights file (``final.npz``): each array's name, dtype, shape
    and bytes, in name order, so the digest names the weights, not the zip they are kept in."""
    digest = hashlib.sha256()
    with np.load(path, allow_pickle=False) as archive:
        for name in sorted(archive.files):
            array = np.ascontiguousarray(archive[name])
            digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


def check_report(out: Path, log: Callable[[str], None]) -> bool:
    """Whether ``out/report.json`` describes ``out/final.npz`` (its :data:`DIGEST_KEY` equals
    the file's digest); says in the log when it does not (a report written before the digest,
    or one left over from other weights). True when there is no report or no weights."""
    report_path, weights_path = out / "report.json", out / "final.npz"
    if not report_path.is_file() or not weights_path.is_file():
        return True
    try:
        saved = json.loads(report_path.read_text()).get(DIGEST_KEY)
        actual = weights_digest(weights_path)
    except (OSError, ValueError, AttributeError, KeyError) as error:
        log(f"cannot compare {report_path} with {weights_path} ({error}); the report is rewritten")
        return False
    if saved != actual:
        log(
            f"{report_path} does not describe the weights in {weights_path} "
            f"({'no digest' if saved is None else 'other digest'}); it is rewritten at the end"
        )
        return False
    return True


def write_report(report: dict[str, Any], out: Path) -> None:
    """Write ``report.json``, ``report.md`` and ``learning_curves.png`` into ``out``; the
    report must carry :data:`DIGEST_KEY` of ``out/final.npz`` (``ValueError`` otherwise: a report
    never describes other weights than those beside it)."""
    if report.get(DIGEST_KEY) != weights_digest(out / "final.npz"):
        raise ValueError(f"the report does not describe the weights in {out / 'final.npz'}")
    for name, text in (
        ("report.json", json.dumps(report, indent=2, default=float)),
        ("report.md", markdown_report(report)),
    ):
        write_text_atomically(out / name, text)
    plot_learning_curves(report, out / "learning_curves.png")
