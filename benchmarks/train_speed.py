"""Training throughput of ``connectx train`` settings, and the opponent's share of the wall time.

Runs MaskablePPO for a fixed number of steps against one opponent with each vectorised-env setting
(the default settings first: on the old path, ``--vec-env dummy``, then on the default ``batched``,
each with one and two torch threads) and prints a markdown table: median steps per second over
``--repeat`` runs (the settings take turns, so a busy machine slows all of them alike), its ratio
to the old path, the seconds spent inside the opponent and their share of the wall time. Usage::

    python benchmarks/train_speed.py [--quick | --smoke] [--repeat 3] [--settings 4]
        [--opponent minimax:depth=3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch

from train.config import TrainConfig
from train.model import new_model
from train.opponents import collect_timing, make_vec_env

SETTINGS = [  # the first is the reference of the "vs dummy" column
    {"vec_env": "dummy"},  # the default settings on the old path (the default before batched)
    {"vec_env": "batched"},  # the default settings
    {"vec_env": "dummy", "torch_threads": 2},
    {"vec_env": "batched", "torch_threads": 2},
    {"vec_env": "batched", "n_envs": 128, "n_steps": 16},
    {"vec_env": "dummy", "n_envs": 8, "n_steps": 256},
    {"vec_env": "subproc", "n_envs": 8, "n_steps": 256},
    {"vec_env": "dummy", "n_envs": 16, "n_steps": 128},
    {"vec_env": "dummy", "n_envs": 32, "n_steps": 64},
    {"vec_env": "subproc", "n_envs": 32, "n_steps": 64},
]


def measure(config: TrainConfig, opponent: str, rollouts: int) -> dict[str, float]:
    """Steps per second of ``rollouts`` rollouts (after one warm-up) and the opponent's seconds."""
    torch.set_num_threads(config.torch_threads or torch.get_num_threads())
    env = make_vec_env(config)
    env.env_method("queue_opponent", opponent, opponent)
    with tempfile.TemporaryDirectory() as directory:
        model = new_model(config, env, Path(directory))
        model.tensorboard_log = None
        batch = config.n_envs * config.n_steps
        model.learn(batch)  # warm-up: numba compilation, first reset
        before = collect_timing(env)["opponents"].get(opponent, [0.0, 0])[0]
        started = time.perf_counter()
        model.learn(batch * rollouts, reset_num_timesteps=False)
        wall = time.perf_counter() - started
        after = collect_timing(env)["opponents"].get(opponent, [0.0, 0])[0]
    env.close()
    return {"steps_per_second": batch * rollouts / wall, "opponent": after - before, "wall": wall}


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rollouts")
    parser.add_argument(
        "--smoke", action="store_true", help="a few seconds: tiny network, default and batched only"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting (median)")
    parser.add_argument(
        "--settings", type=int, default=len(SETTINGS), help="only the first N settings"
    )
    parser.add_argument("--opponent", default="minimax:depth=3")
    args = parser.parse_args()
    rollouts = 1 if args.smoke else 2 if args.quick else 6
    base = TrainConfig()
    settings = SETTINGS[: args.settings]
    if args.smoke:
        base = dataclasses.replace(
            base, n_envs=4, n_steps=32, batch_size=64, n_epochs=1, channels=4, features_dim=16
        )
        settings = settings[:2]
    configs = [dataclasses.replace(base, **setting) for setting in settings]
    results: list[list[dict[str, float]]] = [[] for _ in configs]
    for _ in range(args.repeat):  # settings take turns, so machine load hits them alike
        for config, runs in zip(configs, results, strict=True):
            runs.append(measure(config, args.opponent, rollouts))
    print(
        f"MaskablePPO, default network and PPO settings, against {args.opponent}; "
        f"median of {args.repeat} run(s) of {rollouts} rollout(s)\n"
    )
    print(
        "| vec env | n_envs | n_steps | torch threads | steps/s | vs dummy "
        "| opponent s | opponent share of wall |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    default_speed = statistics.median(r["steps_per_second"] for r in results[0])
    for config, runs in zip(configs, results, strict=True):
        speed = statistics.median(r["steps_per_second"] for r in runs)
        opponent = statistics.median(r["opponent"] for r in runs)
        share = statistics.median(r["opponent"] / r["wall"] for r in runs)
        print(
            f"| {config.vec_env} | {config.n_envs} | {config.n_steps} | {config.torch_threads} "
            f"| {speed:.0f} | {speed / default_speed:.2f}x | {opponent:.2f} | {100 * share:.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
