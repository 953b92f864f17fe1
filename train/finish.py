"""The final phase of a run: the final weights, the final panel, the report.

Every step can be repeated: files are written atomically, and the final panel, once played, is
kept in ``state.json`` and reused. So a run interrupted anywhere in this phase (or whose
checkpoint already reached its target steps) is finished by ``connectx train --resume``.

The play weights (``final.npz``, the final panel, the report) are the last weights, or with
``average_weights`` = K > 1 the element-wise mean of the last weights and the K - 1 newest
snapshots of the self-play pool taken at least half a snapshot interval before the end (stochastic
weight averaging, Izmailov et al. 2018): the snapshot of the last few rollouts is the last weights
give or take an update, so the K weights are about one interval apart. ``final.zip`` keeps the
last weights, to train further from.

The report is ``report.json``, ``report.md`` and ``learning_curves.png``; it carries the digest of
the ``final.npz`` it describes (:func:`weights_digest`), and a resumed run whose report describes
other weights says so and rewrites it (:func:`check_report`).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sb3_contrib import MaskablePPO

from connectx_gym.files import load_weights, save_weights
from connectx_gym.logs import warn
from connectx_gym.outputs import write_text_atomically
from connectx_gym.weights import WeightsFile
from connectx_train.budget import EtaLog, panel_seconds
from connectx_train.config import TrainConfig
from connectx_train.learning_curves import plot_learning_curves
from connectx_train.model import evaluate_panel, model_weights, perfect_play_rates, save_model
from connectx_train.run_setup import describe_device
from connectx_train.state import RunState

if TYPE_CHECKING:
    from connectx_train.run_setup import RunSetup

__all__ = [
    "DIGEST_KEY",
    "averaged_weights",
    "check_report",
    "final_panel_seconds",
    "finish",
    "markdown_report",
    "periodic_evaluation",
    "play_final_panel",
    "snapshot_step",
    "snapshots_to_average",
    "timing_summary",
    "weights_digest",
    "write_report",
]

#: the report's field holding :func:`weights_digest` of the ``final.npz`` it describes
DIGEST_KEY = "weights_sha256"
#: games per panel opponent timed to estimate the final panel
PANEL_SAMPLE_GAMES = 2
_SNAPSHOT = re.compile(r"step_(\d+)\.npz")


def finish(
    setup: RunSetup,
    model: MaskablePPO,
    state: RunState,
    timing: dict[str, Any],
    log: Callable[[str], None],
    check_stop: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Save ``final.zip`` (the last weights) and ``final.npz`` (the play weights: the last ones,
    or their mean with snapshots), play the final panel with the play weights (or reuse the one
    saved in ``state``), write the report and the plot; returns the report. ``check_stop()`` is
    called between panel opponents and after the report (it raises to stop the run there)."""
    config, out, clock = setup.config, setup.out, setup.clock
    geometry = config.geometry
    save_model(model, out / "final.zip")
    weights = model_weights(model, geometry)
    averaged = snapshots_to_average(
        out / "snapshots", model.num_timesteps, config.snapshot_every, config.average_weights - 1
    )
    averaged_steps = [snapshot_step(path) for path in averaged]
    if config.average_weights > 1:
        weights = averaged_weights(weights, averaged)
        steps = ", ".join(f"{step:,}" for step in averaged_steps) or "none found"
        log(
            f"play weights: the mean of the last ones and {len(averaged)} of "
            f"{config.average_weights - 1} snapshots (steps {steps})"
        )
    save_weights(weights, out / "final.npz")
    clock.update()
    log(
        f"trained {model.num_timesteps} steps in {state.wall_seconds / 60:.1f} min; "
        "playing the final panel"
    )
    panel = state.final_panel
    if (
        panel is None
        or panel["games"] != config.final_games
        or list(panel["results"]) != list(config.panel)
        # other play weights (a resume with another --average-weights): play it again
        or panel.get("averaged_snapshots", []) != averaged_steps
    ):
        panel = {
            **play_final_panel(config, weights, log, check_stop),
            "averaged_snapshots": averaged_steps,
        }
        state.final_panel = panel
        clock.update()
        state.save(out / "state.json")  # an interrupted report needs no second panel
    else:
        log("final panel already played: reusing it")
    wall = state.wall_seconds
    training_seconds = max(
        wall - state.eval_seconds - panel["seconds"] - state.teacher_seconds, 1e-9
    )
    report = {
        "config": config.to_json(),
        DIGEST_KEY: weights_digest(out / "final.npz"),
        "timesteps": int(model.num_timesteps),
        # this session's: a resumed run may change both
        "bf16": setup.precision.bf16,
        "device": describe_device(setup.device),
        "precision_reason": setup.precision.reason,
        "stopped_by_time_limit": state.stopped_by_time,
        "wall_seconds": wall,
        "training_seconds": training_seconds,
        "teacher_seconds": state.teacher_seconds,
        "periodic_eval_seconds": state.eval_seconds,
        "final_eval_seconds": panel["seconds"],
        "steps_per_second": model.num_timesteps / training_seconds,
        "averaged_snapshots": averaged_steps,
        "curriculum": state.curriculum_history,
        "final_stage": state.stage,
        "panel": panel["results"],
        "perfect_play": panel.get("perfect_play"),
        "evaluations": state.evaluations,
        "train_curve": state.train_curve,
        "cluster": timing.get("cluster"),  # the rollouts' Ray actors and cluster (None: here)
        "timing": timing_summary(
            timing, clock.session_seconds(), int(model.num_timesteps - clock.start_steps)
        ),
    }
    write_report(report, out)
    log(f"report: {out / 'report.md'}")
    check_stop()
    return report


def periodic_evaluation(
    config: TrainConfig, weights: WeightsFile, timestep: int, state: RunState
) -> dict[str, Any]:
    """The panel played deterministically with ``weights`` (``config.eval_games`` games a spec)
    and the mistake rate on the labelled positions' dev split: the entry (``timestep``,
    ``games``, ``scores`` and, where the labels are shipped, ``mistake_rate`` and
    ``mistake_ci95``) is appended to ``state.evaluations``, its time added to
    ``state.eval_seconds``, and returned."""
    started = time.perf_counter()
    results = evaluate_panel(weights, config.panel, config.eval_games, config.seed + 1)
    entry: dict[str, Any] = {
        "timestep": timestep,
        "games": config.eval_games,
        "scores": {spec: result["score"] for spec, result in results.items()},
    }
    rates = perfect_play_rates(weights, "dev")
    if rates is not None:
        entry["mistake_rate"] = rates["overall"]["mistake_rate"]
        entry["mistake_ci95"] = rates["overall"]["mistake_ci95"]
    state.evaluations.append(entry)
    state.eval_seconds += time.perf_counter() - started
    return entry


def final_panel_seconds(config: TrainConfig, weights: WeightsFile) -> float:
    """The seconds a bounded budget keeps aside for the final panel: a few games of ``weights``
    against each panel opponent, timed (:func:`connectx_train.budget.panel_seconds`)."""

    def play(games: int) -> None:
        evaluate_panel(weights, config.panel, games, config.seed + 2)

    return panel_seconds(play, config.final_games, PANEL_SAMPLE_GAMES)


def play_final_panel(
    config: TrainConfig,
    weights: WeightsFile,
    log: Callable[[str], None],
    check_stop: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """The final panel of ``weights``: ``config.final_games`` deterministic games against each
    of ``config.panel`` (a progress line with the time left), then the mistake rates on the
    shipped labelled positions' split ``config.report_split`` (the test split unless told);
    ``{"games", "results", "perfect_play", "seconds"}``. ``check_stop()`` is called after each
    opponent."""
    started = time.perf_counter()
    results: dict[str, Any] = {}
    progress = EtaLog(log, len(config.panel))
    for spec in config.panel:  # one at a time, as evaluate_panel plays them: the same games
        results |= evaluate_panel(weights, (spec,), config.final_games, config.seed + 2)
        played = f"final panel: {len(results)}/{len(config.panel)} opponents"

        def panel_line(left: str, played: str = played) -> str:
            return f"{played}, {left}"

        progress.update(len(results), panel_line)
        check_stop()
    return {
        "games": config.final_games,
        "results": results,
        "perfect_play": perfect_play_rates(weights, config.report_split),
        "seconds": time.perf_counter() - started,
    }


def timing_summary(timing: dict[str, Any], wall: float, timesteps: int) -> dict[str, Any]:
    """Share of the wall time of the last session (``timesteps`` steps in ``wall`` seconds) spent
    inside opponents, overall and projected per opponent as if every step had been played
    against it (one opponent move per agent step)."""
    opponents = {}
    total = 0.0
    for label, (seconds, moves) in timing["opponents"].items():
        total += seconds
        per_move = seconds / max(moves, 1)
        opponents[label] = {
            "seconds": seconds,
            "moves": int(moves),
            "ms_per_move": 1000 * per_move,
            "projected_share_of_wall": per_move * timesteps / max(wall, 1e-9),
        }
    rollout = timing.get("rollout_seconds", 0.0)
    return {
        "env_seconds": timing["env_seconds"],
        "rollout_seconds": rollout,
        "rollout_forward_seconds": max(rollout - timing["env_seconds"], 0.0),
        "update_seconds": timing.get("update_seconds", 0.0),
        "labelling_seconds": timing.get("labelling_seconds", 0.0),
        "teaching_seconds": timing.get("teaching_seconds", 0.0),
        "opponent_seconds": total,
        "opponent_share_of_wall": total / max(wall, 1e-9),
        "opponents": opponents,
        "note": "timings cover the last session of the run (since the last --resume)",
    }


def snapshot_step(path: Path) -> int:
    """The step at which snapshot ``path`` (``step_000050016.npz``) was taken."""
    match = _SNAPSHOT.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path} is not a snapshot file (step_<steps>.npz)")
    return int(match[1])


def snapshots_to_average(directory: Path, end: int, every: int, count: int) -> list[Path]:
    """The ``count`` newest ``step_*.npz`` files of ``directory`` taken at step ``end - every / 2``
    or earlier, newest first (fewer when the run has fewer)."""
    if count <= 0 or not directory.is_dir():
        return []
    matches = ((_SNAPSHOT.fullmatch(path.name), path) for path in directory.iterdir())
    taken = [(int(m[1]), path) for m, path in matches if m and int(m[1]) <= end - every / 2]
    return [path for _, path in sorted(taken, reverse=True)[:count]]


def averaged_weights(last: WeightsFile, snapshots: Sequence[Path]) -> WeightsFile:
    """The element-wise mean (in float64, stored as float32) of ``last`` and the weights saved in
    ``snapshots``, value head included, which must be the same network (``ValueError``
    otherwise)."""
    others = [load_weights(path) for path in snapshots]
    for path, other in zip(snapshots, others, strict=True):
        if (
            other.layers != last.layers
            or other.value != last.value
            or any(other.params[name].shape != array.shape for name, array in last.params.items())
        ):
            raise ValueError(f"cannot average {path}: it is not the run's network")
    params = {
        name: np.mean([w.params[name].astype(np.float64) for w in (*others, last)], axis=0)
        for name in last.params
    }
    return WeightsFile(last.geometry, last.layers, params, last.value)


def markdown_report(report: dict[str, Any]) -> str:
    """The report as markdown: panel table with 95% intervals, run facts, the learning curves
    (``learning_curves.png`` and TensorBoard's folder), opponent timings. Another trainer's
    report (:mod:`connectx_train.rllib.selfplay`) may add ``trainer`` (a line naming it),
    ``envs`` (its envs, in place of ``n_envs`` and ``vec_env``) and ``tensorboard`` False (no
    TensorBoard folder)."""
    config = report["config"]
    teacher_seed = config.get("teacher_seed")
    seed = f"seed {config['seed']}" + (
        f" (teacher positions of seed {teacher_seed})"
        if teacher_seed is not None and teacher_seed != config["seed"]
        else ""
    )
    # the envs of a connectx train run; a report of another trainer (RLlib) names its own
    cluster = f"; {report['cluster']}" if report.get("cluster") else ""
    envs = f"{config['n_envs']} envs ({config['vec_env']}{cluster})"
    lines = [
        "# connectx train report",
        "",
        *([f"- trainer: {report['trainer']}"] if report.get("trainer") else []),
        f"- steps: {report['timesteps']:,} in {report['wall_seconds'] / 60:.1f} min wall: "
        f"teacher (labelling and supervised passes) {report.get('teacher_seconds', 0):.0f} s, "
        f"PPO {report['training_seconds']:.0f} s ({report['steps_per_second']:.0f} steps/s), "
        f"periodic evaluation {report['periodic_eval_seconds']:.0f} s, "
        f"final panel {report['final_eval_seconds']:.0f} s",
        f"- board {config['rows']}x{config['columns']}, {config['inarow']} in a row; {seed}; "
        f"{report.get('envs') or envs}; network products in "
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
    tensorboard = Path(config.get("out", "<run folder>")) / "tb"
    lines += ["", "## Learning curves", "", "![learning curves](learning_curves.png)"]
    if report.get("tensorboard", True):
        lines += [
            "",
            f"Every logged series (losses, win rates, `eval/*` scores, `eval/mistake_rate_dev`) "
            f"is in TensorBoard: `tensorboard --logdir {tensorboard}`.",
        ]
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
        f"{timing.get('update_seconds', 0):.0f} s"
        + (
            " (with teacher replay)."
            if config.get("teacher_positions") and config.get("teacher_replay")
            else "."
        ),
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
        warn(
            log,
            f"cannot compare {report_path} with {weights_path} ({error}); the report is rewritten",
        )
        return False
    if saved != actual:
        warn(
            log,
            f"{report_path} does not describe the weights in {weights_path} "
            f"({'no digest' if saved is None else 'other digest'}); it is rewritten at the end",
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
