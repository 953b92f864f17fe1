"""Plies per second of the batched env (``gymnasium.make_vec("ConnectX-v0")``) at several batch
sizes, beside the single env and pgx's ``jit(vmap(step))``, in one run; and its memory.

All on the 6x7 board, random legal moves for the agent (drawn from the mask with a seeded numpy
generator: ``argmax(mask * uniform)``), counted plies include the opponent's moves:

- ``make_vec B``: the public API, ``gymnasium.make_vec("ConnectX-v0", num_envs=B)``; per step
  the agent's B moves and the opponents' replies and opening moves (``infos["_opponent_action"]``).
- ``single env``: ``gymnasium.make("ConnectX-v0")``, one ``step`` at a time (batch 1 of the
  table's "single" column).
- ``pgx B``: ``pgx.make("connect_four")``, ``jax.jit(jax.vmap(auto_reset(step, init)))`` with the
  random legal move sampled inside the jitted function; one ply per board per call. Only when pgx
  is installed (``pip install pgx``; a comparison point, never a dependency).

The second table uses ``minimax:depth=3`` as the opponent (pgx has none). Each measurement is
repeated ``--rounds`` times for ``--seconds`` each, interleaved; the tables show the median.
Memory: the bytes tracemalloc sees allocated by building, resetting and stepping an 8192-board env.
Run::

    python benchmarks/bench_vector.py            # 3 rounds of 1 s
    python benchmarks/bench_vector.py --quick    # 1 round of 0.2 s, small batches only (CI)
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from _machine import machine_line

Runner = Callable[[float], tuple[int, float]]  # seconds -> (plies, elapsed seconds)

SEED = 0
BATCHES = (1, 64, 1024, 8192)


def make_vec_runner(batch: int, opponent: str) -> Runner:
    import gymnasium as gym

    import connectx_gym  # noqa: F401  (registers ConnectX-v0)

    env = gym.make_vec("ConnectX-v0", num_envs=batch, opponent=opponent)
    rng = np.random.default_rng(SEED)
    env.reset(seed=SEED)

    def run(seconds: float) -> tuple[int, float]:
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            masks = env.action_masks()
            actions = np.argmax(masks * rng.random(masks.shape), axis=1)
            _, _, _, _, infos = env.step(actions)
            plies += batch + int(np.count_nonzero(infos["_opponent_action"]))
        return plies, time.perf_counter() - start

    return run


def single_env_runner(opponent: str) -> Runner:
    import gymnasium as gym

    import connectx_gym  # noqa: F401

    env = gym.make("ConnectX-v0", opponent=opponent)
    rng = np.random.default_rng(SEED)
    _, info = env.reset(seed=SEED)

    def run(seconds: float) -> tuple[int, float]:
        nonlocal info
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            _, info = env.reset()
            plies += info["opponent_action"] is not None
            terminated = False
            while not terminated:
                action = int(np.argmax(info["action_mask"] * rng.random(7)))
                _, _, terminated, _, info = env.step(action)
                plies += 1 if info["opponent_action"] is None else 2
        return plies, time.perf_counter() - start

    return run


def pgx_runner(batch: int) -> Runner:
    import jax
    import jax.numpy as jnp
    import pgx
    from pgx.experimental import auto_reset

    env = pgx.make("connect_four")
    step = auto_reset(env.step, env.init)

    def one(state: pgx.State, key: jax.Array) -> pgx.State:
        choose, reset = jax.random.split(key)
        logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(choose, logits)
        return step(state, action, reset)

    @jax.jit
    def play(state: pgx.State, key: jax.Array) -> tuple[pgx.State, jax.Array]:
        key, sub = jax.random.split(key)
        return jax.vmap(one)(state, jax.random.split(sub, batch)), key

    key = jax.random.PRNGKey(SEED)
    state = jax.jit(jax.vmap(env.init))(jax.random.split(key, batch))
    state, key = play(state, key)  # compile
    jax.block_until_ready(state)

    def run(seconds: float) -> tuple[int, float]:
        nonlocal state, key
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while time.perf_counter() < deadline:
            state, key = play(state, key)
            jax.block_until_ready(state)
            plies += batch
        return plies, time.perf_counter() - start

    return run


def memory_of_batch(batch: int = 8192) -> float:
    """MB allocated (tracemalloc, numpy arrays included) by an env of ``batch`` boards after
    reset and 10 steps."""
    import gymnasium as gym

    import connectx_gym  # noqa: F401

    make_vec_runner(1, "random")(0.01)  # compile the kernels outside the measurement
    tracemalloc.start()
    env = gym.make_vec("ConnectX-v0", num_envs=batch)
    env.reset(seed=SEED)
    rng = np.random.default_rng(SEED)
    for _ in range(10):
        masks = env.action_masks()
        env.step(np.argmax(masks * rng.random(masks.shape), axis=1))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del env
    return peak / 1e6


def measure(runners: dict[str, Runner], rounds: int, seconds: float) -> dict[str, float]:
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for runner in runners.values():
        runner(min(seconds, 0.2))  # warm up (numba, jax)
    for _ in range(rounds):
        for name, runner in runners.items():
            plies, elapsed = runner(seconds)
            rates[name].append(plies / elapsed)
    return {name: statistics.median(values) for name, values in rates.items()}


def table(opponent: str, batches: tuple[int, ...], rounds: int, seconds: float) -> None:
    runners: dict[str, Runner] = {"single env": single_env_runner(opponent)}
    for batch in batches:
        runners[f"make_vec {batch}"] = make_vec_runner(batch, opponent)
    have_pgx = opponent == "random"
    if have_pgx:
        try:
            import pgx  # noqa: F401
        except ImportError:
            have_pgx = False
            print("pgx is not installed: its column is skipped (pip install pgx)")
    if have_pgx:
        for batch in batches:
            runners[f"pgx {batch}"] = pgx_runner(batch)
    rates = measure(runners, rounds, seconds)
    single = rates["single env"]
    print(f"\nopponent {opponent!r}: plies/s (median of {rounds} x {seconds:g} s)\n")
    print("| batch | make_vec | x single env | pgx jit(vmap(step)) | make_vec / pgx |")
    print("|---:|---:|---:|---:|---:|")
    for batch in batches:
        ours = rates[f"make_vec {batch}"]
        theirs = rates.get(f"pgx {batch}")
        pgx_cells = f"{theirs:,.0f} | {ours / theirs:.2f}x" if theirs else "- | -"
        print(f"| {batch} | {ours:,.0f} | {ours / single:.1f}x | {pgx_cells} |")
    print(f"| single env | {single:,.0f} | 1.0x | | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="1 round of 0.2 s, batches 1 and 64"
    )
    args = parser.parse_args()
    batches = BATCHES
    if args.quick:
        args.rounds, args.seconds, batches = 1, 0.2, (1, 64)
    print(machine_line())
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")  # fmt: skip
    table("random", batches, args.rounds, args.seconds)
    table("minimax:depth=3", batches, args.rounds, args.seconds)
    print(f"\nmemory of an 8192-board 6x7 batch (reset + 10 steps, tracemalloc peak): "
          f"{memory_of_batch():.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
