"""Speed of a weights-only network's numpy forward pass, one board at a time, with and without
Winograd convolutions, measured in one run.

Three ways of answering the same boards, timed in turn (one pass over the boards each, repeated
``--rounds`` times, so that the shared machine's slow spells fall on all three alike):

- ``winograd``: :func:`connectx_gym.forward.forward_layers` with the network's own kernels (wide
  3x3 convolutions as Winograd's F(2x2, 3x3));
- ``direct``: the same forward pass given im2col matrices for every convolution (one matrix
  product per convolution, as before Winograd);
- ``act``: the policy's whole move (``NumpyNetPolicy.act``: planes, mask, forward pass, choice);
- ``batch``: the boards ``--batch`` at a time (a batched env's opponent), in pieces of
  :data:`~connectx_gym.forward.FORWARD_CHUNK` boards, and ``batch whole`` in one piece.

The forward passes run on one BLAS thread, as the policy's do. Printed: the best and the median
round's milliseconds per board, the ratios of the medians, and on how many boards the two forward
passes pick different columns (none expected: they agree to float32 rounding). In one process
the two batch ways share the memory allocator, so their ratio may differ from that of fresh
processes timed one way each (docs/experiments/hardware_runs.md).

Usage: ``python benchmarks/bench_forward.py [AGENT] [--rounds N] [--batch N] [--smoke]`` (AGENT:
a ``.npz`` weights file or the name of shipped weights; default ``ppo``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _machine import machine_line

from connectx_baselines.perfect_play import load_positions
from connectx_gym import forward as forward_module
from connectx_gym.files import (
    SHIPPED_WEIGHTS,
    NumpyNetPolicy,
    load_file,
    one_blas_thread,
    shipped_weights,
)
from connectx_gym.forward import forward_layers, im2col_kernel
from connectx_gym.weights import WeightsFile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("agent", nargs="?", default="ppo")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=32, help="boards a batch (default 32)")
    parser.add_argument("--smoke", action="store_true", help="20 boards, 2 rounds")
    args = parser.parse_args()
    source = shipped_weights(args.agent) if args.agent in SHIPPED_WEIGHTS else args.agent
    try:
        weights = load_file(source)
    except (OSError, ValueError, ImportError) as error:
        raise SystemExit(f"bench_forward.py: {error}") from None
    if not isinstance(weights, WeightsFile):
        raise SystemExit(f"bench_forward.py: {args.agent} is not a weights-only network (.npz)")
    boards = [b for b in load_positions(split="test").boards() if b.geometry == weights.geometry]
    if not boards:
        raise SystemExit(f"no labelled positions on {weights.geometry}")
    if args.batch < 1:
        raise SystemExit("bench_forward.py: --batch must be at least 1")
    rounds = 2 if args.smoke else args.rounds
    boards = boards[:20] if args.smoke else boards
    planes = [board.to_planes()[None].astype(np.float32) for board in boards]
    direct = {name: im2col_kernel(weights.params[name]) for name in weights.kernels}
    policy, rng = NumpyNetPolicy(weights), np.random.default_rng(0)
    print(machine_line(), flush=True)

    def forward(kernels: dict) -> list[np.ndarray]:
        with one_blas_thread():
            return [
                forward_layers(weights.layers, weights.params, x, kernels=kernels) for x in planes
            ]

    batches = [
        np.concatenate(planes[k : k + args.batch]) for k in range(0, len(planes), args.batch)
    ]

    def batched(piece: int) -> None:
        chunk, forward_module.FORWARD_CHUNK = forward_module.FORWARD_CHUNK, piece
        try:
            with one_blas_thread():
                for x in batches:
                    forward_layers(weights.layers, weights.params, x, kernels=weights.kernels)
        finally:
            forward_module.FORWARD_CHUNK = chunk

    ways = {
        "winograd": lambda: forward(weights.kernels),
        "direct": lambda: forward(direct),
        "act": lambda: [policy.act(board, rng) for board in boards],
        "batch": lambda: batched(forward_module.FORWARD_CHUNK),
        "batch whole": lambda: batched(args.batch),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append(1000 * (time.perf_counter() - started) / len(boards))
    fast, slow = forward(weights.kernels), forward(direct)
    differ = sum(int(np.argmax(a) != np.argmax(b)) for a, b in zip(fast, slow, strict=True))
    print(f"{args.agent}: {len(boards)} boards, {rounds} rounds (ms per board, one BLAS thread)")
    for name, values in times.items():
        print(f"  {name:11s} best {min(values):.3f}  median {statistics.median(values):.3f}")
    ratio = statistics.median(times["direct"]) / statistics.median(times["winograd"])
    print(f"  direct / winograd (medians): {ratio:.2f}x; columns that differ: {differ}")
    pieces = statistics.median(times["batch whole"]) / statistics.median(times["batch"])
    print(
        f"  batches of {args.batch}: one piece / pieces of {forward_module.FORWARD_CHUNK} "
        f"(medians): {pieces:.2f}x"
    )


if __name__ == "__main__":
    main()
