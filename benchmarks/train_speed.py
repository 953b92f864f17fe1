"""Training throughput of ``connectx train`` settings, and the opponent's share of the wall time.

Runs MaskablePPO for a fixed number of steps against one opponent with each setting and prints a
markdown table: median steps per second over ``--repeat`` runs (the settings take turns, so a busy
machine slows all of them alike), its ratio to the first row, the seconds spent inside the
opponent and their share of the wall time. The first row is the old default path: SB3's
``DummyVecEnv``, one torch thread, convolution weights in torch's default NCHW layout, numpy's BLAS
left alone, float32 products; the second is today's default (the batched env, two torch threads,
channels-last weights, BLAS held to one thread, ``--precision auto``: bfloat16 updates where the
CPU has bfloat16 instructions). Changes of the code itself (the fused Adam step, the numpy
convolution of self-play snapshots) speed up every row alike, so the ratio understates the gain
over the old code: ``train_speed_release.py`` measures that. ``--opponent snapshot`` plays a
frozen copy of the network (numpy forward passes, as self-play does). Usage::

    python benchmarks/train_speed.py [--quick | --smoke] [--repeat 3] [--settings 4]
        [--opponent minimax:depth=3 | snapshot] [--channels C] [--blocks B]

``--channels`` and ``--blocks`` change the network of every row (default: ``TrainConfig``'s).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from _machine import machine_line
from threadpoolctl import threadpool_limits

from connectx_gym.bitboard import Geometry
from connectx_gym.weights import write_weights
from connectx_train.config import TrainConfig
from connectx_train.model import model_weights, new_model
from connectx_train.opponents import collect_timing, make_vec_env
from connectx_train.run_setup import resolve_setup

#: Benchmark-only keys beside the TrainConfig fields: "layout" ("nchw": the old convolution
#: layout) and "blas" ("free": numpy's BLAS threads not limited, as before).
#: The old default path's settings (with "vec_env": "dummy", the first row).
OLD = {"torch_threads": 1, "layout": "nchw", "blas": "free", "precision": "fp32"}
SETTINGS: list[dict[str, Any]] = [  # the first is the reference of the "vs old" column
    {"vec_env": "dummy", **OLD},  # the old default
    {},  # today's default settings
    {"precision": "fp32"},  # today's default in float32 throughout
    {"vec_env": "batched", **OLD},
    {"vec_env": "batched", "torch_threads": 2, "layout": "nchw", "precision": "fp32"},
    {"vec_env": "batched", "torch_threads": 2, "blas": "free"},
    {"vec_env": "dummy", "torch_threads": 2},
    {"vec_env": "batched", "n_envs": 128, "n_steps": 16},
    {"vec_env": "subproc", "n_envs": 8, "n_steps": 256},
    {"vec_env": "subproc", "n_envs": 32, "n_steps": 64},
]


def measure(setting: dict[str, Any], base: TrainConfig, opponent: str, rollouts: int) -> dict:
    """Steps per second of ``rollouts`` rollouts (after one warm-up) and the opponent's seconds."""
    fields = {k: v for k, v in setting.items() if k not in ("layout", "blas")}
    config = dataclasses.replace(base, **fields)
    torch.set_num_threads(config.torch_threads or torch.get_num_threads())
    blas = 1 if setting.get("blas") != "free" else None
    env = make_vec_env(config)
    with tempfile.TemporaryDirectory() as directory, threadpool_limits(blas, user_api="blas"):
        setup = resolve_setup(config)
        model = new_model(config, env, Path(directory), setup.device, setup.precision.bf16)
        if setting.get("layout") == "nchw":
            model.policy.to(memory_format=torch.contiguous_format)
        model.tensorboard_log = None
        if opponent == "snapshot":
            opponent = str(Path(directory) / "snapshot.npz")
            write_weights(
                model_weights(model, Geometry(config.rows, config.columns, config.inarow)), opponent
            )
        env.env_method("queue_opponent", opponent, opponent)
        batch = config.n_envs * config.n_steps
        model.learn(batch)  # warm-up: numba compilation, first reset
        before = collect_timing(env)["opponents"].get(opponent, [0.0, 0])[0]
        started = time.perf_counter()
        model.learn(batch * rollouts, reset_num_timesteps=False)
        wall = time.perf_counter() - started
        after = collect_timing(env)["opponents"].get(opponent, [0.0, 0])[0]
    env.close()
    return {
        "config": config,
        "steps_per_second": batch * rollouts / wall,
        "opponent": after - before,
        "wall": wall,
    }


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
    parser.add_argument("--channels", type=int, default=TrainConfig.channels, help="network")
    parser.add_argument("--blocks", type=int, default=TrainConfig.blocks, help="network")
    args = parser.parse_args()
    rollouts = 1 if args.smoke else 2 if args.quick else 6
    base = TrainConfig(channels=args.channels, blocks=args.blocks)
    settings = SETTINGS[: args.settings]
    if args.smoke:
        base = dataclasses.replace(
            base, n_envs=4, n_steps=32, batch_size=64, n_epochs=1, channels=4, features_dim=16
        )
        settings = settings[:2]
    print(f"{machine_line()}\n", flush=True)
    results: list[list[dict[str, Any]]] = [[] for _ in settings]
    for _ in range(args.repeat):  # settings take turns, so machine load hits them alike
        for setting, runs in zip(settings, results, strict=True):
            runs.append(measure(setting, base, args.opponent, rollouts))
    print(
        f"MaskablePPO, {base.channels} channels, {base.blocks} block(s), default PPO settings, "
        f"against {args.opponent}; "
        f"median of {args.repeat} run(s) of {rollouts} rollout(s)\n"
    )
    print(
        "| vec env | n_envs | n_steps | torch threads | conv layout | BLAS threads | products "
        "| steps/s | vs old | opponent s | opponent share of wall |"
    )
    print("|---|---:|---:|---:|---|---|---|---:|---:|---:|---:|")
    old_speed = statistics.median(r["steps_per_second"] for r in results[0])
    for setting, runs in zip(settings, results, strict=True):
        config = runs[0]["config"]
        speed = statistics.median(r["steps_per_second"] for r in runs)
        opponent = statistics.median(r["opponent"] for r in runs)
        share = statistics.median(r["opponent"] / r["wall"] for r in runs)
        layout = "NCHW" if setting.get("layout") == "nchw" else "channels-last"
        blas = "numpy's" if setting.get("blas") == "free" else "1"
        products = "bf16" if resolve_setup(config).precision.bf16 else "fp32"
        print(
            f"| {config.vec_env} | {config.n_envs} | {config.n_steps} | {config.torch_threads} "
            f"| {layout} | {blas} | {products} | {speed:.0f} | {speed / old_speed:.2f}x "
            f"| {opponent:.2f} "
            f"| {100 * share:.1f}% |",
            flush=True,
        )


if __name__ == "__main__":
    main()
