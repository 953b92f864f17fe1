"""``connectx accuracy SPEC``: the share of a policy's moves that keep the exact game value."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectx_gym.commands import add_seed, positive_float, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="policy spec or saved agent")
    parser.add_argument("--pons", default=None, help="a Pons benchmark file of positions")
    parser.add_argument("--limit", type=positive_int, default=200, help="positions (200)")
    parser.add_argument("--opponent", default="random", help="opponent in generated games")
    parser.add_argument("--games", type=positive_int, default=10, help="generated games (10)")
    parser.add_argument(
        "--time-limit", type=positive_float, default=5.0, help="seconds per position (5)"
    )
    add_seed(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from baselines.solver import load_pons, move_accuracy, positions_from_games
    from connectx_gym.bitboard import Geometry

    if args.pons:
        if not Path(args.pons).is_file():
            raise FileNotFoundError(f"no such Pons file: {args.pons}")
        positions: Sequence[Any] = load_pons(args.pons, limit=args.limit)
    else:
        positions = positions_from_games(
            args.policy, args.games, geometry=Geometry(), opponent=args.opponent, seed=args.seed
        )[: args.limit]
    result = move_accuracy(args.policy, positions, seed=args.seed, time_limit=args.time_limit)
    if args.json:
        summary = {
            "policy": args.policy,
            "positions": result.positions,
            "correct": result.correct,
            "unsolved": result.unsolved,
            "accuracy": result.accuracy,
            "ci95": [result.low, result.high],
        }
        print(json.dumps(summary))
    else:
        print(f"{args.policy}: {result}")
    return 0
