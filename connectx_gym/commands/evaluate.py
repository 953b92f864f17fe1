"""``connectx evaluate A B``: a match between two policies, seats alternating."""

from __future__ import annotations

import argparse
import json

from connectx_gym.commands import add_match_options, check_board, open_executor

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "play A against B, seats alternating"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("player_a", metavar="A", help="policy spec or saved agent")
    parser.add_argument("player_b", metavar="B", help="policy spec or saved agent")
    add_match_options(
        parser,
        games="games (default: every opening from both seats, 98 on 6x7)",
        seed=" of the match",
    )


def run(args: argparse.Namespace) -> int:
    from connectx_gym.match import play_match

    check_board(args)
    with open_executor(args) as executor:
        result = play_match(
            args.player_a, args.player_b, args.games, args.seed, args.rows, args.columns,
            args.inarow, openings=args.openings, save_games=args.save_games, executor=executor,
        )  # fmt: skip
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    low, high = result.interval
    print(
        f"{result.player_a} vs {result.player_b}, {result.games} games, seats alternating, "
        f"openings: {args.openings}"
    )
    print(f"  wins {result.wins}  draws {result.draws}  losses {result.losses}")
    print(f"  score {result.score:.3f}  95% CI {low:.3f}-{high:.3f}")
    print(f"  illegal moves: A {result.illegal_a}, B {result.illegal_b}")
    print(f"  ms per move: A {result.ms_per_move_a:.3f}, B {result.ms_per_move_b:.3f}")
    return 0
