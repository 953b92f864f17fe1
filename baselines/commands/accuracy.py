"""``connectx accuracy SPEC``: a policy's moves measured against perfect play.

By default on the shipped labelled positions (test split): the mistake rate (moves that lose game
value) and the perfect-move rate, per phase, with 95% intervals. ``--pons FILE`` judges the moves
on one of Pascal Pons' benchmark files instead (the solver judges each move), with the same
result (:func:`connectx_baselines.perfect_play.evaluate_policy`). ``--ray [ADDRESS]`` answers the
labelled positions on Ray (every position draws from its own seed, so the result is the local
run's).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from connectx_gym.commands import (
    add_result_options,
    open_executor,
    positive_float,
    positive_int,
)

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "mistake rate against perfect play, per game phase"


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
    add_result_options(parser, ray="answer the labelled positions")


def run(args: argparse.Namespace) -> int:
    from connectx_baselines.perfect_play import evaluate_policy, load_pons

    if args.pons:
        if args.ray is not None:
            raise ValueError("--ray works on the labelled positions, not with --pons")
        if not Path(args.pons).is_file():
            raise FileNotFoundError(f"no such Pons file: {args.pons}")
        positions = load_pons(args.pons, limit=args.limit)
        result = evaluate_policy(args.policy, positions, seed=args.seed, time_limit=args.time_limit)
    else:
        with open_executor(args) as executor:
            result = evaluate_policy(
                args.policy,
                split=args.split,
                seed=args.seed,
                path=args.positions,
                executor=executor,
            )
    print(json.dumps(result.to_dict()) if args.json else result.table())
    return 0
