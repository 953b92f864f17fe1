"""Training speed of an earlier revision's default settings on its own code, beside today's.

``train_speed.py`` compares settings on today's code; speed-ups of the code itself help all its
rows alike. This script answers "how much faster is ``connectx train`` than it was at revision
REV": it checks REV out into a temporary ``git worktree`` and measures, in alternating
subprocesses (each importing one checkout), MaskablePPO with each checkout's default
``TrainConfig`` against one opponent: one warm-up rollout, then ``--rollouts`` timed ones, the
thread settings each checkout's ``connectx train`` uses. It prints the median steps/s of each
and their ratio. The default REV is the last commit before the batched-env work (one core: SB3's
``DummyVecEnv``, one torch thread). Both checkouts train the same network, ``--channels`` 32 and
``--blocks`` 1 (REV's default; today's default network is bigger, and a bigger network is slower
per step whatever the code), so the ratio is the code's. Usage::

    python benchmarks/train_speed_release.py [--revision REV] [--repeat 3] [--rollouts 6]
        [--opponent minimax:depth=3 | snapshot] [--channels 32] [--blocks 1] [--smoke]

``--smoke`` measures today's checkout only, with a tiny network, in a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The parent of the first batched-env commit: the one-core recipe the issue measured.
BEFORE_BATCHED = "cd61a91^"

#: Runs in a subprocess whose ``sys.path`` starts with one checkout; prints steps/s as JSON.
WORKER = r"""
import contextlib, dataclasses, json, sys, tempfile, time
from pathlib import Path
import torch
from connectx_train.config import TrainConfig
from connectx_train.model import model_weights, new_model
from connectx_train.opponents import make_vec_env
opponent, rollouts, smoke = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
config = dataclasses.replace(TrainConfig(), channels=int(sys.argv[4]), blocks=int(sys.argv[5]))
if smoke:
    config = dataclasses.replace(
        config, n_envs=4, n_steps=32, batch_size=64, n_epochs=1, channels=4, features_dim=16
    )
try:  # the thread settings of this checkout's `connectx train`
    try:
        from connectx_train.run_setup import thread_pools as _thread_pools
    except ImportError:  # checkouts before run_setup
        from connectx_train.trainer import _thread_pools
    pools = _thread_pools(config.torch_threads)
except ImportError:  # older checkouts set torch's threads only
    torch.set_num_threads(config.torch_threads or torch.get_num_threads())
    pools = contextlib.nullcontext()
env = make_vec_env(config)
with tempfile.TemporaryDirectory() as directory, pools:
    try:  # this checkout's: the device and number format resolved once, handed to the model
        from connectx_train.run_setup import resolve_setup

        setup = resolve_setup(config)
        model = new_model(config, env, Path(directory), setup.device, setup.precision.bf16)
    except ImportError:  # older checkouts resolve them in new_model
        model = new_model(config, env, Path(directory))
    model.tensorboard_log = None
    if opponent == "snapshot":
        from connectx_gym.bitboard import Geometry
        from connectx_gym.weights import write_weights
        opponent = str(Path(directory) / "snapshot.npz")
        geometry = Geometry(config.rows, config.columns, config.inarow)
        write_weights(model_weights(model, geometry), opponent)
    env.env_method("queue_opponent", opponent, opponent)
    batch = config.n_envs * config.n_steps
    model.learn(batch)  # warm-up: numba compilation, first reset
    started = time.perf_counter()
    model.learn(batch * rollouts, reset_num_timesteps=False)
    wall = time.perf_counter() - started
env.close()
print(json.dumps({"steps_per_second": batch * rollouts / wall, "vec_env": config.vec_env,
                  "torch_threads": config.torch_threads, "channels": config.channels,
                  "blocks": config.blocks}))
"""


def measure(
    checkout: Path, opponent: str, rollouts: int, smoke: bool, network: tuple[int, int]
) -> dict:
    """One measurement of ``checkout``'s default settings with ``network`` (channels, blocks),
    in a fresh interpreter."""
    # the checkout first; what was on the path stays (packages installed with --target there)
    path = [str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    flag = "1" if smoke else "0"
    # imported here: tests load this module without benchmarks/ on sys.path
    import _child as child

    done = child.run(
        [sys.executable, "-c", WORKER, opponent, str(rollouts), flag, *map(str, network)],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"measuring {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--revision", default=BEFORE_BATCHED, help="the earlier git revision")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each checkout (median)")
    parser.add_argument("--rollouts", type=int, default=6, help="timed rollouts per run")
    parser.add_argument("--opponent", default="minimax:depth=3")
    parser.add_argument("--channels", type=int, default=32, help="the network of both checkouts")
    parser.add_argument("--blocks", type=int, default=1, help="the network of both checkouts")
    parser.add_argument("--smoke", action="store_true", help="today's checkout only, tiny network")
    args = parser.parse_args()
    # imported here: tests load this module without benchmarks/ on sys.path
    from _machine import machine_line

    print(f"{machine_line()}\n", flush=True)  # this process's stdout, never the workers' JSON
    network = (args.channels, args.blocks)
    if args.smoke:
        result = measure(ROOT, args.opponent, 1, smoke=True, network=network)
        print(
            f"today: {result['steps_per_second']:.0f} steps/s (tiny network: "
            f"{result['channels']} channels, {result['blocks']} block(s); smoke run)"
        )
        return
    with tempfile.TemporaryDirectory() as directory:
        old = Path(directory) / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.revision],
            check=True,
            capture_output=True,
        )
        try:
            runs: dict[str, list[dict]] = {"old": [], "today": []}
            for _ in range(args.repeat):  # alternating, so machine load hits both alike
                for name, checkout in (("old", old), ("today", ROOT)):
                    result = measure(checkout, args.opponent, args.rollouts, False, network)
                    runs[name].append(result)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False
            )
    speed = {k: statistics.median(r["steps_per_second"] for r in v) for k, v in runs.items()}
    print(
        f"Default settings of each checkout, {args.channels} channels and {args.blocks} "
        f"block(s), against {args.opponent}; median of {args.repeat} "
        f"run(s) of {args.rollouts} rollout(s)\n"
    )
    print("| checkout | vec env | torch threads | steps/s | ratio |")
    print("|---|---|---:|---:|---:|")
    for name, label in (("old", args.revision), ("today", "today")):
        first = runs[name][0]
        print(
            f"| {label} | {first['vec_env']} | {first['torch_threads']} | {speed[name]:.0f} "
            f"| {speed[name] / speed['old']:.2f}x |"
        )


if __name__ == "__main__":
    main()
