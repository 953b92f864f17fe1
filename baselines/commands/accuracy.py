"""``connectx accuracy SPEC``: a policy's moves measured against perfect play.

By default on the shipped labelled positions (:mod:`baselines.perfect_play`, test split): the
mistake rate (moves that lose game value) and the perfect-move rate, per phase, with 95%
intervals. ``--pons FILE`` reads one of Pascal Pons' benchmark files instead and reports the share
of moves that keep the best exact score.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from connectx_gym.commands import add_seed, positive_float, positive_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="policy spec or saved agent")
    parser.add_argument(
        "--split",
        choices=("test", "dev", "all"),
        default="test",
        help="split of the labelled positions (test; tune on dev only)",
    )
    parser.add_argument(
        "--positions", default=None, help="a labelled-positions .npz (default: the shipped set)"
    )
    parser.add_argument("--pons", default=None, help="a Pons benchmark file of positions instead")
    parser.add_argument(
        "--limit", type=positive_int, default=200, help="positions of the Pons file (200)"
    )
    parser.add_argument(
        "--time-limit",
        type=positive_float,
        default=5.0,
        help="solver seconds per Pons position (5)",
    )
    add_seed(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    if args.pons:
        return _pons(args)
    from baselines.perfect_play import evaluate_policy

    result = evaluate_policy(args.policy, split=args.split, seed=args.seed, path=args.positions)
    print(json.dumps(result.to_dict()) if args.json else result.table())
    return 0


def _pons(args: argparse.Namespace) -> int:
    from baselines.solver import load_pons, move_accuracy

    if not Path(args.pons).is_file():
        raise FileNotFoundError(f"no such Pons file: {args.pons}")
    positions = load_pons(args.pons, limit=args.limit)
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
