"""Speed of the search baselines against the code they replace, measured in one run.

* ``onestep`` and ``minimax`` (depth 3) against the Kaggle tutorials' own agents, re-implemented
  plainly in ``benchmarks/_reference_agents.py`` (numpy grids, as the tutorials write them);
* ``minimax`` at depth 6 on its own (target: median under 20 ms);
* ``negamax`` (depth 4) against kaggle-environments' ``negamax_agent`` (when installed);
* ``minimax`` depth 3 as the opponent inside ``ConnectX-v0``: the cost per env step, against the
  forward pass of a small policy network (two 64-channel convolutions and an MLP, about the size
  of an SB3 CNN policy for 6x7), when torch is installed.

Times are per move, on the same 6x7 mid-game positions for every agent (10 to 20 plies played:
4 random ones, then minimax depth 2's).

Usage: ``python benchmarks/bench_baselines_speed.py [--quick | --smoke] [--positions N]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _reference_agents as reference
from _machine import machine_line

from connectx_gym import Board, Geometry, make_policy
from connectx_gym.policy import Policy, kaggle_configuration, kaggle_observation


def mid_game_positions(count: int, seed: int) -> list[Board]:
    """``count`` 6x7 positions after 10 to 20 plies, game not over: 4 random plies, then moves
    of ``minimax:depth=2`` (random play would leave wins lying around that end searches early)."""
    rng = np.random.default_rng(seed)
    geometry = Geometry(6, 7, 4)
    player = make_policy("minimax:depth=2")
    positions: list[Board] = []
    while len(positions) < count:
        board = Board(geometry, 0, 0, 0)
        for ply in range(int(rng.integers(10, 21))):
            column = int(rng.choice(board.legal_moves())) if ply < 4 else player.act(board, rng)
            board = board.play(column)
            if board.is_terminal():
                break
        if not board.is_terminal():
            positions.append(board)
    return positions


def time_policy(policy: Policy, boards: list[Board], repeat: int = 1) -> list[float]:
    """Seconds per ``act`` on each board (best of ``repeat``), after one warm-up call."""
    rng = np.random.default_rng(0)
    policy.act(boards[0], rng)
    times = []
    for board in boards:
        best = np.inf
        for _ in range(repeat):
            started = time.perf_counter()
            policy.act(board, rng)
            best = min(best, time.perf_counter() - started)
        times.append(best)
    return times


def time_kaggle_agent(agent: Callable[[Any, Any], int], boards: list[Board]) -> list[float]:
    """Seconds per call of a Kaggle-style agent on each board."""
    random.seed(0)
    times = []
    for board in boards:
        obs, config = kaggle_observation(board), kaggle_configuration(board)
        started = time.perf_counter()
        agent(obs, config)
        times.append(time.perf_counter() - started)
    return times


def ms(seconds: float) -> str:
    """Milliseconds, with sensible digits."""
    value = 1000 * seconds
    return f"{value:.3f}" if value < 1 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def env_step_seconds(opponent: str, steps: int, seed: int) -> list[float]:
    """Wall time of each ``ConnectX-v0.step`` with random legal actions against ``opponent``."""
    import gymnasium as gym

    env = gym.make("connectx_gym:ConnectX-v0", opponent=opponent)
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))  # warm-up (compilation)
    _, info = env.reset(seed=seed)
    times = []
    for _ in range(steps):
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        started = time.perf_counter()
        _, _, terminated, truncated, info = env.step(action)
        times.append(time.perf_counter() - started)
        if terminated or truncated:
            _, info = env.reset()
    env.close()
    return times


def policy_forward_seconds(calls: int) -> tuple[list[float], int] | None:
    """Seconds of each forward pass (batch 1) of a small CNN policy, and its parameter count."""
    try:
        import torch
        from torch import nn
    except ImportError:
        return None
    torch.set_num_threads(1)

    class SmallPolicy(nn.Module):
        """Two 64-channel 3x3 convolutions, a 128-unit layer, then [64, 64] policy and value
        MLPs: the shape of an SB3 ``CnnPolicy`` with a small extractor on a 2x6x7 board."""

        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(2, 64, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1),
                nn.ReLU(),
                nn.Flatten(),
                nn.Linear(64 * 6 * 7, 128),
                nn.ReLU(),
            )
            self.policy = nn.Sequential(
                nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 7)
            )
            self.value = nn.Sequential(
                nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
            )

        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            features = self.features(obs)
            return self.policy(features), self.value(features)

    model = SmallPolicy().eval()
    observation = np.zeros((2, 6, 7), dtype=np.int8)
    times = []
    with torch.no_grad():
        for _ in range(calls + 20):
            started = time.perf_counter()
            obs = torch.as_tensor(observation).float().unsqueeze(0)
            logits, _ = model(obs)
            int(torch.argmax(logits))
            times.append(time.perf_counter() - started)
    parameters = sum(p.numel() for p in model.parameters())
    return times[20:], parameters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer positions, a smoke run")
    parser.add_argument("--smoke", action="store_true", help="2 positions, seconds: a crash test")
    parser.add_argument("--positions", type=int, default=None, help="positions per agent")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{machine_line()}\n", flush=True)
    count = args.positions or (2 if args.smoke else 5 if args.quick else 30)
    slow_count = 1 if args.smoke else max(2, count // 10) if args.quick else max(3, count // 3)
    boards = mid_game_positions(count, args.seed)
    slow_boards = boards[:slow_count]

    rows: list[tuple[str, str, str, str, str, str]] = []

    def compare(name: str, ours: list[float], plain: list[float], plain_name: str, target: float):
        ours_median = statistics.median(ours)
        plain_median = statistics.median(plain)
        ratio = plain_median / ours_median
        verdict = "yes" if ratio >= target else "NO"
        rows.append(
            (
                name,
                ms(ours_median),
                f"{plain_name}: {ms(plain_median)}",
                f"{ratio:,.0f}x",
                f">= {target:,.0f}x",
                verdict,
            )
        )

    onestep = time_policy(make_policy("onestep"), boards, repeat=3)
    compare(
        "onestep",
        onestep,
        time_kaggle_agent(reference.onestep_agent, boards),
        "tutorial",
        100,
    )

    minimax3 = make_policy("minimax:depth=3")
    compare(
        "minimax depth 3",
        time_policy(minimax3, slow_boards, repeat=3),
        time_kaggle_agent(reference.make_minimax_agent(3), slow_boards),
        "tutorial",
        1000,
    )
    minimax3_all = time_policy(minimax3, boards, repeat=3)

    minimax6 = time_policy(make_policy("minimax:depth=6"), boards)
    median6 = statistics.median(minimax6)
    rows.append(
        (
            "minimax depth 6",
            ms(median6),
            "-",
            f"max {ms(max(minimax6))} ms",
            "median < 20 ms",
            "yes" if median6 < 0.020 else "NO",
        )
    )

    negamax = time_policy(make_policy("negamax"), boards, repeat=3)
    try:
        from kaggle_environments.envs.connectx.connectx import negamax_agent
    except ImportError:
        rows.append(("negamax depth 4", ms(statistics.median(negamax)), "-", "-", "-", "skipped"))
    else:
        compare(
            "negamax depth 4",
            negamax,
            time_kaggle_agent(negamax_agent, boards),
            "kaggle-environments",
            100,
        )

    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    print(f"## Search baselines: ms per move, 6x7 mid-game positions ({machine})\n")
    print(f"{len(boards)} positions ({len(slow_boards)} for the plain minimax), seed {args.seed}\n")
    print("| agent | ours (median ms) | plain (median ms) | speed-up | target | met |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")

    steps = 30 if args.smoke else 300 if args.quick else 3000
    with_minimax = env_step_seconds("minimax:depth=3", steps, args.seed)
    with_random = env_step_seconds("random", steps, args.seed)
    forward = policy_forward_seconds(steps)
    print(f"\n## minimax depth 3 as the opponent inside ConnectX-v0 ({steps} steps)\n")
    print("| measure | median µs | mean µs |")
    print("|---|---|---|")
    for name, times in (
        ("env step, opponent minimax:depth=3", with_minimax),
        ("env step, opponent random", with_random),
    ):
        print(f"| {name} | {us(statistics.median(times))} | {us(statistics.mean(times))} |")
    share = statistics.median(with_minimax) - statistics.median(with_random)
    mean_share = statistics.mean(with_minimax) - statistics.mean(with_random)
    print(f"| minimax:depth=3's share of a step (difference) | {us(share)} | {us(mean_share)} |")
    print(
        f"| minimax:depth=3 act() alone (positions above) | {us(statistics.median(minimax3_all))} "
        f"| {us(statistics.mean(minimax3_all))} |"
    )
    if forward is None:
        print("| small CNN policy forward pass | torch not installed | |")
    else:
        forward_times, parameters = forward
        print(
            f"| small CNN policy forward pass, batch 1, 1 thread ({parameters:,} parameters) "
            f"| {us(statistics.median(forward_times))} | {us(statistics.mean(forward_times))} |"
        )
        verdict = "yes" if share < statistics.median(forward_times) else "NO"
        print(f"\nminimax depth 3 costs less per step than the forward pass (medians): {verdict}")


def us(seconds: float) -> str:
    """Microseconds, one decimal."""
    return f"{1e6 * seconds:.1f}"


if __name__ == "__main__":
    main()
