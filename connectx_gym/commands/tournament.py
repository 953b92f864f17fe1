"""``connectx tournament SPEC SPEC...``: a round robin with Elo ratings (a plot with ``--png``)."""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from connectx_gym.commands import (
    CommandError,
    add_match_options,
    add_png,
    bounded_int,
    check_board,
    check_png,
    open_executor,
)

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "round robin with Elo ratings"

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("players", nargs="+", metavar="SPEC", help="two or more players")
    add_match_options(parser, games="games per pairing (default: every opening from both seats)")
    parser.add_argument(
        "--bootstrap", type=bounded_int(0, 100_000), default=1000, help="bootstrap resamples"
    )
    add_png(parser, "the ratings and the heat map of pairwise scores")


def run(args: argparse.Namespace) -> int:
    from connectx_gym.tournament import run_tournament

    check_board(args)
    if len(args.players) < 2:
        raise CommandError("a tournament needs at least two players")
    check_png(args)  # before the games: a path that cannot be written, or no matplotlib, fails now

    def progress(done: int, total: int, match: Any) -> None:
        logger.info("[%d/%d] %s", done, total, match.summary())

    with open_executor(args) as executor:
        result = run_tournament(
            args.players,
            args.games,
            args.seed,
            args.rows,
            args.columns,
            args.inarow,
            bootstrap=args.bootstrap,
            progress=progress,
            openings=args.openings,
            save_games=args.save_games,
            executor=executor,
        )
    print(json.dumps(result.to_dict()) if args.json else result.table())
    if args.png:
        logger.info("plot: %s", result.plot(args.png))
    return 0
