"""Training throughput of ``connectx train`` settings, and the opponent's share of the wall time.

Runs MaskablePPO for a fixed number of steps against one opponent with each vectorised-env setting
and prints a markdown table: steps per second, the seconds spent inside the opponent and their
share of the wall time. Usage::

    python benchmarks/train_speed.py [--quick] [--opponent minimax:depth=3]
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

from train.config import TrainConfig
from train.model import new_model
from train.opponents import collect_timing, make_vec_env

SETTINGS = [
    {"vec_env": "dummy", "n_envs": 8, "n_steps": 256},
    {"vec_env": "subproc", "n_envs": 8, "n_steps": 256},
    {"vec_env": "dummy", "n_envs": 16, "n_steps": 128},
    {"vec_env": "dummy", "n_envs": 32, "n_steps": 64},
    {"vec_env": "subproc", "n_envs": 32, "n_steps": 64},
]


def measure(config: TrainConfig, opponent: str, rollouts: int) -> dict[str, float]:
    """Steps per second of ``rollouts`` rollouts (after one warm-up) and the opponent's seconds."""
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
    parser.add_argument("--smoke", action="store_true", help="one tiny setting: a crash test")
    parser.add_argument("--opponent", default="minimax:depth=3")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rollouts = 1 if args.smoke else 2 if args.quick else 6
    base = TrainConfig()
    settings = (
        [{"vec_env": "dummy", "n_envs": 2, "n_steps": 32, "batch_size": 64}]
        if args.smoke
        else SETTINGS
    )
    print(f"MaskablePPO, default network and PPO settings, against {args.opponent}\n")
    print("| vec env | n_envs | n_steps | steps/s | opponent s | opponent share of wall |")
    print("|---|---:|---:|---:|---:|---:|")
    for setting in settings:
        config = dataclasses.replace(base, **setting)
        result = measure(config, args.opponent, rollouts)
        print(
            f"| {config.vec_env} | {config.n_envs} | {config.n_steps} "
            f"| {result['steps_per_second']:.0f} | {result['opponent']:.2f} "
            f"| {100 * result['opponent'] / result['wall']:.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
