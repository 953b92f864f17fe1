"""``connectx accuracy SPEC``: a policy's moves measured against perfect play.

By default on the two shipped labelled sets side by side, the game split (positions of games
between search players) and the random split (positions of random legal play), the same
``--split`` of each: the mistake rate (moves that lose game value) and the perfect-move rate, per
phase and overall, with 95% intervals (:func:`connectx_baselines.perfect_play.evaluate_sets`).
``--positions FILE`` measures one labelled file. ``--pons DIR`` judges the moves on the first
``--limit`` positions of each of Pascal Pons' benchmark files in ``DIR`` (the solver judges each
move within ``--time-limit`` seconds or ``--node-limit`` nodes a search, the latter the same on
any machine), one row per set; ``--pons FILE`` on one file. ``--ray [ADDRESS]`` answers the labelled
positions on Ray (every position draws from its own seed, so the result is the local run's).
``--png FILE`` also draws the mistake rates with their intervals, per phase and set
(:mod:`connectx_baselines.accuracy_plot`).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from connectx_gym.commands import (
    add_png,
    add_result_options,
    bounded_int,
    check_png,
    open_executor,
    positive_float,
    positive_int,
)

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "mistake rate against perfect play, per game phase"

logger = logging.getLogger(__name__)

#: the most solver nodes ``--node-limit`` takes (about 3 minutes of one core a search)
MAX_NODE_LIMIT = 1_000_000_000
#: the solver's seconds per Pons search when neither ``--time-limit`` nor ``--node-limit`` is given
DEFAULT_TIME_LIMIT = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("policy", help="policy spec or saved agent")
    parser.add_argument(
        "--split",
        choices=("test", "dev", "all"),
        default="test",
        help="split of both labelled sets (test; tune on dev only)",
    )
    parser.add_argument(
        "--positions",
        default=None,
        help="one labelled-positions .npz instead of the two shipped sets",
    )
    parser.add_argument(
        "--pons",
        default=None,
        help="a directory of Pons benchmark files (Test_L*_R*), or one such file, instead",
    )
    parser.add_argument(
        "--limit", type=positive_int, default=200, help="positions of each Pons file (200)"
    )
    parser.add_argument(
        "--time-limit",
        type=positive_float,
        default=None,
        help=f"solver seconds per Pons search ({DEFAULT_TIME_LIMIT:g} without --node-limit)",
    )
    parser.add_argument(
        "--node-limit",
        type=bounded_int(1, MAX_NODE_LIMIT),
        default=None,
        help="solver nodes per Pons search: the same positions settled on any machine",
    )
    add_result_options(parser, ray="answer the labelled positions")
    add_png(parser, "the mistake rates per phase and set, with their 95% intervals")


def run(args: argparse.Namespace) -> int:
    from connectx_baselines.perfect_play import (
        PerfectPlayResult,
        SetResults,
        evaluate_policy,
        evaluate_pons_sets,
        evaluate_sets,
        load_pons,
    )

    check_png(args)  # before the positions: an unwritable path, or no matplotlib, fails now
    if not args.pons and (args.time_limit is not None or args.node_limit is not None):
        raise ValueError("--time-limit and --node-limit bound the solver's judging of --pons")
    result: PerfectPlayResult | SetResults
    if args.pons:
        if args.ray is not None:
            raise ValueError("--ray works on the labelled positions, not with --pons")
        if args.positions is not None:
            raise ValueError("--positions and --pons each name what to measure: give one")
        pons = Path(args.pons)
        time_limit = args.time_limit
        if time_limit is None and args.node_limit is None:
            time_limit = DEFAULT_TIME_LIMIT
        limits = {"seed": args.seed, "time_limit": time_limit, "node_limit": args.node_limit}
        if pons.is_dir():
            result = evaluate_pons_sets(args.policy, pons, limit=args.limit, **limits)
        elif pons.is_file():
            result = evaluate_policy(args.policy, load_pons(pons, limit=args.limit), **limits)
        else:
            raise FileNotFoundError(f"no such Pons file or directory: {args.pons}")
    else:
        with open_executor(args) as executor:
            if args.positions is not None:
                result = evaluate_policy(
                    args.policy,
                    split=args.split,
                    seed=args.seed,
                    path=args.positions,
                    executor=executor,
                )
            else:
                result = evaluate_sets(
                    args.policy, split=args.split, seed=args.seed, executor=executor
                )
    print(json.dumps(result.to_dict()) if args.json else result.table())
    if args.png:
        from connectx_baselines.accuracy_plot import plot_mistake_rates

        logger.info("plot: %s", plot_mistake_rates(result, args.png))
    return 0
