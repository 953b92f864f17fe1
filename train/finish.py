"""The final phase of a run: final models, the final panel, the report.

Every step can be repeated: files are written atomically, and the final panel, once played, is
kept in ``state.json`` and reused. So a run interrupted anywhere in this phase (or whose
checkpoint already reached its target steps) is finished by ``connectx train --resume``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sb3_contrib import MaskablePPO

from connectx_gym.files import save_weights
from connectx_train.averaging import averaged_weights, snapshot_step, snapshots_to_average
from connectx_train.budget import EtaLog
from connectx_train.config import TrainConfig
from connectx_train.devices import choose_precision, describe_device
from connectx_train.model import evaluate_panel, model_weights, perfect_play_rates, save_model
from connectx_train.report import DIGEST_KEY, weights_digest, write_report
from connectx_train.state import RunState, SessionClock

__all__ = ["finish", "timing_summary"]


def finish(
    config: TrainConfig,
    out: Path,
    model: MaskablePPO,
    state: RunState,
    clock: SessionClock,
    timing: dict[str, Any],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Save ``final.zip`` (the last weights) and ``final.npz`` (the play weights: the last ones,
    or their mean with snapshots, :mod:`connectx_train.averaging`), play the final panel with the
    play weights (or reuse the one saved in ``state``), write the report and the plot; returns the
    report."""
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
        started = time.perf_counter()
        results: dict[str, Any] = {}
        progress = EtaLog(log, len(config.panel))
        for spec in config.panel:  # one at a time, as evaluate_panel plays them: the same games
            results |= evaluate_panel(weights, (spec,), config.final_games, config.seed + 2)
            played = f"final panel: {len(results)}/{len(config.panel)} opponents"
            progress.update(len(results), lambda left, played=played: f"{played}, {left}")
        panel = {
            "games": config.final_games,
            "results": results,
            "perfect_play": perfect_play_rates(weights, "test"),
            "seconds": time.perf_counter() - started,
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
        "bf16": bool(getattr(model.policy.features_extractor, "bf16", False)),
        # this session's: a resumed run may change both
        "device": describe_device(model.device),
        "precision_reason": choose_precision(config.precision, model.device).reason,
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
        "timing": timing_summary(
            timing, clock.session_seconds(), int(model.num_timesteps - clock.start_steps)
        ),
    }
    write_report(report, out)
    log(f"report: {out / 'report.md'}")
    return report


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
