"""Plies per second of ``ConnectX-v0`` against other Connect Four environments, in one run.

Every environment plays random games on the 6x7 board; the moves are chosen the same way
everywhere, by a seeded ``random.Random`` choosing among the legal columns of the mask the
environment returns. Counted plies include the opponent's moves played inside ``step()``:

- ``connectx-gym``: ``gymnasium.make("ConnectX-v0", opponent="random")`` (wrappers included);
  the agent's move from ``info["action_mask"]``, the opponent's inside ``step()``.
- ``connectx-gym (unwrapped)``: the same env without Gymnasium's wrappers.
- ``PettingZoo connect_four_v3``: the AEC env, both players' moves from ``obs["action_mask"]``.
- ``kaggle-environments connectx``: ``make("connectx").train([None, "random"])``, as the Kaggle
  tutorials' ``ConnectFourGym`` wraps it (board reshaped to an array, legal columns from it).
- ``OpenSpiel connect_four``: ``pyspiel`` with ``observation_tensor()`` and ``legal_actions()``.

Environments that are not installed are skipped. Each is measured ``--rounds`` times for
``--seconds`` each, interleaved; the table shows the median. Run::

    python benchmarks/bench_env.py            # 3 rounds of 2 s per environment
    python benchmarks/bench_env.py --quick    # 1 round of 0.5 s
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from collections.abc import Callable

import numpy as np
from _machine import machine_line

Runner = Callable[[float], tuple[int, float]]  # seconds -> (plies, elapsed seconds)

SEED = 0
GOAL = 25.0


def connectx_gym_runner(unwrapped: bool = False) -> Runner:
    import gymnasium as gym

    import connectx_gym  # noqa: F401  (registers ConnectX-v0)

    env = gym.make("ConnectX-v0", opponent="random")
    if unwrapped:
        env = env.unwrapped
    rnd = random.Random(SEED)
    _, info = env.reset(seed=SEED)

    def run(seconds: float) -> tuple[int, float]:
        nonlocal info
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            _, info = env.reset()
            plies += info["opponent_action"] is not None
            terminated = False
            while not terminated:
                action = rnd.choice(info["action_mask"].nonzero()[0].tolist())
                _, _, terminated, _, info = env.step(action)
                plies += 1 if info["opponent_action"] is None else 2
            if time.perf_counter() >= deadline:
                return plies, time.perf_counter() - start

    return run


def pettingzoo_runner() -> Runner:
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    rnd = random.Random(SEED)
    env.reset(seed=SEED)

    def run(seconds: float) -> tuple[int, float]:
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            env.reset()
            for _ in env.agent_iter():
                observation, _, terminated, truncated, _ = env.last()
                if terminated or truncated:
                    action = None
                else:
                    action = rnd.choice(observation["action_mask"].nonzero()[0].tolist())
                    plies += 1
                env.step(action)
            if time.perf_counter() >= deadline:
                return plies, time.perf_counter() - start

    return run


def kaggle_runner() -> Runner:
    from kaggle_environments import make

    trainer = make("connectx", debug=True).train([None, "random"])
    rnd = random.Random(SEED)
    rows, columns = 6, 7

    def run(seconds: float) -> tuple[int, float]:
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            observation = trainer.reset()
            stones = sum(1 for cell in observation["board"] if cell)
            done = False
            while not done:
                grid = np.array(observation["board"]).reshape(1, rows, columns)
                action = rnd.choice((grid[0, 0] == 0).nonzero()[0].tolist())
                observation, _, done, _ = trainer.step(action)
                now = sum(1 for cell in observation["board"] if cell)
                plies += now - stones
                stones = now
            if time.perf_counter() >= deadline:
                return plies, time.perf_counter() - start

    return run


def open_spiel_runner() -> Runner:
    import pyspiel

    game = pyspiel.load_game("connect_four")
    rnd = random.Random(SEED)

    def run(seconds: float) -> tuple[int, float]:
        plies = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            state = game.new_initial_state()
            while not state.is_terminal():
                state.observation_tensor()
                state.apply_action(rnd.choice(state.legal_actions()))
                plies += 1
            if time.perf_counter() >= deadline:
                return plies, time.perf_counter() - start

    return run


CANDIDATES: list[tuple[str, Callable[[], Runner]]] = [
    ("connectx-gym `ConnectX-v0`", connectx_gym_runner),
    ("connectx-gym (unwrapped env)", lambda: connectx_gym_runner(unwrapped=True)),
    ("PettingZoo `connect_four_v3`", pettingzoo_runner),
    ("kaggle-environments `connectx` (train)", kaggle_runner),
    ("OpenSpiel `connect_four` (C++)", open_spiel_runner),
]
REFERENCE = "PettingZoo `connect_four_v3`"


def main(argv: list[str] | None = None) -> None:
    """Measure every installed environment and print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per environment")
    parser.add_argument("--quick", action="store_true", help="one round of 0.5 s")
    parser.add_argument("--smoke", action="store_true", help="one round of 0.1 s: a crash test")
    args = parser.parse_args(argv)
    seconds, rounds = (
        (0.1, 1) if args.smoke else (0.5, 1) if args.quick else (args.seconds, args.rounds)
    )
    print(machine_line(), flush=True)

    runners: dict[str, Runner] = {}
    skipped: list[str] = []
    for name, factory in CANDIDATES:
        try:
            runners[name] = factory()
        except ImportError as error:
            skipped.append(f"{name} ({error.name or error} not installed)")
    for run in runners.values():
        run(min(0.2, seconds))  # warm up: imports, caches, first games
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            plies, elapsed = run(seconds)
            rates[name].append(plies / elapsed)
    median = {name: statistics.median(values) for name, values in rates.items()}
    reference = median.get(REFERENCE)

    print(f"Random masked moves on 6x7, {rounds} x {seconds:g} s each, median plies/s")
    print(f"(Python {platform.python_version()}, {platform.machine()}, {platform.system()})\n")
    print("| environment | plies/s | vs PettingZoo |")
    print("|---|---:|---:|")
    for name, rate in median.items():
        ratio = f"{rate / reference:.1f}x" if reference else "n/a"
        print(f"| {name} | {rate:,.0f} | {ratio} |")
    for name in skipped:
        print(f"\nskipped: {name}")
    ours = median.get(CANDIDATES[0][0])
    if ours and reference:
        verdict = "met" if ours / reference >= GOAL else "NOT met"
        print(f"\nGoal >= {GOAL:g}x PettingZoo: {verdict} ({ours / reference:.1f}x)")


if __name__ == "__main__":
    main()
