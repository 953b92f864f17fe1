"""The ``connectx`` command: train, evaluate, tournament, play, export-kaggle, accuracy.

Policies are given as specs everywhere: a registered name with parameters (``minimax:depth=3``), a
weights-only ``.npz`` (safe: never unpickles), an SB3 ``.zip`` (unpickles: loading runs code from
the file) or a Kaggle agent ``.py`` (its code is run). Bad input ends with a one-line message on
stderr and a non-zero exit status, not a traceback. Only ``connectx train`` imports torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectx_gym.policy import IllegalMoveError

__all__ = ["build_parser", "main"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

SAFETY_NOTE = (
    "Policy specs: a registered name with parameters (e.g. minimax:depth=3), a weights-only .npz "
    "(safe: never unpickles), an SB3 .zip (unpickles: loading runs code from the file) or a "
    "Kaggle agent .py (runs its code). Load .zip and .py files only from sources you trust."
)


class CommandError(Exception):
    """A problem with the user's input, reported as one line on stderr."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_board(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=_positive_int, default=6, help="board rows (default 6)")
    parser.add_argument("--columns", type=_positive_int, default=7, help="board columns (7)")
    parser.add_argument("--inarow", type=_positive_int, default=4, help="discs to win (4)")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``connectx``."""
    parser = argparse.ArgumentParser(
        prog="connectx",
        description="ConnectX: train MaskablePPO agents, evaluate and export them.",
        epilog=SAFETY_NOTE,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="train a MaskablePPO agent (curriculum, self-play, reports)",
        description="Train a MaskablePPO agent; with no arguments, the README's default run.",
    )
    from train.config import add_arguments  # train.config needs no torch

    add_arguments(train)

    evaluate = commands.add_parser(
        "evaluate", help="play A against B, seats alternating", epilog=SAFETY_NOTE
    )
    evaluate.add_argument("player_a", metavar="A", help="policy spec or saved agent")
    evaluate.add_argument("player_b", metavar="B", help="policy spec or saved agent")
    evaluate.add_argument("--games", type=_positive_int, default=100, help="games (default 100)")
    evaluate.add_argument("--seed", type=int, default=0, help="seed of the match (default 0)")
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_board(evaluate)

    tournament = commands.add_parser(
        "tournament", help="round robin with Elo ratings", epilog=SAFETY_NOTE
    )
    tournament.add_argument("players", nargs="+", metavar="SPEC", help="two or more players")
    tournament.add_argument("--games", type=_positive_int, default=20, help="games per pairing")
    tournament.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    tournament.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    tournament.add_argument("--png", default="tournament.png", help="ratings plot ('' for none)")
    tournament.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_board(tournament)

    play = commands.add_parser("play", help="play against a policy in the terminal")
    play.add_argument("--opponent", default="minimax:depth=3", help="policy spec or saved agent")
    play.add_argument(
        "--first", choices=("you", "opponent", "random"), default="you", help="who starts"
    )
    play.add_argument("--seed", type=int, default=None, help="seed of the opponent's randomness")
    _add_board(play)

    export = commands.add_parser(
        "export-kaggle", help="write a self-contained Kaggle main.py from a model"
    )
    export.add_argument("model", help="weights-only .npz or SB3 .zip (needs the train extra)")
    export.add_argument("-o", "--output", default="main.py", help="output file (main.py)")

    accuracy = commands.add_parser(
        "accuracy", help="share of a policy's moves that keep the exact game value"
    )
    accuracy.add_argument("policy", help="policy spec or saved agent")
    accuracy.add_argument("--pons", default=None, help="a Pons benchmark file of positions")
    accuracy.add_argument("--limit", type=_positive_int, default=200, help="positions (200)")
    accuracy.add_argument("--opponent", default="random", help="opponent in generated games")
    accuracy.add_argument("--games", type=_positive_int, default=10, help="generated games (10)")
    accuracy.add_argument("--time-limit", type=float, default=5.0, help="seconds per position")
    accuracy.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    accuracy.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


# -- commands -------------------------------------------------------------------------------------
def _train(args: argparse.Namespace) -> int:
    try:
        from train.config import TrainConfig, config_from_args
        from train.trainer import RunInterruptedError, train
    except ImportError as error:
        raise CommandError(
            f'training needs the train extra: pip install "connectx-gym[train]" ({error})'
        ) from None
    base = None
    if args.resume:
        saved = Path(args.out or TrainConfig().out) / "config.json"
        if not saved.is_file():
            raise CommandError(f"nothing to resume: {saved} does not exist")
        base = TrainConfig.from_json(json.loads(saved.read_text()))
    config = config_from_args(args, base)
    try:
        report = train(config)
    except RunInterruptedError as stop:
        print(f"connectx: {stop}", file=sys.stderr)
        return EXIT_INTERRUPTED
    for spec, result in report["panel"].items():
        low, high = result["ci95"]
        print(f"  {spec:<20} score {result['score']:.3f} [95% CI {low:.3f}-{high:.3f}]")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from connectx_gym.match import play_match

    result = play_match(
        args.player_a, args.player_b, args.games, args.seed, args.rows, args.columns, args.inarow
    )
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        low, high = result.interval
        print(f"{result.player_a} vs {result.player_b}, {result.games} games, seats alternating")
        print(f"  wins {result.wins}  draws {result.draws}  losses {result.losses}")
        print(f"  score {result.score:.3f}  95% CI {low:.3f}-{high:.3f}")
        print(f"  illegal moves: A {result.illegal_a}, B {result.illegal_b}")
        print(f"  ms per move: A {result.ms_per_move_a:.3f}, B {result.ms_per_move_b:.3f}")
    return 0


def _tournament(args: argparse.Namespace) -> int:
    from connectx_gym.tournament import run_tournament

    def progress(done: int, total: int, match: Any) -> None:
        if not args.json:
            print(f"[{done}/{total}] {match.summary()}", file=sys.stderr)

    result = run_tournament(
        args.players,
        args.games,
        args.seed,
        args.rows,
        args.columns,
        args.inarow,
        bootstrap=args.bootstrap,
        progress=progress,
    )
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(result.table())
    if args.png:
        try:
            path = result.plot(args.png)
        except ImportError:
            print("connectx: matplotlib is not installed: no PNG written", file=sys.stderr)
        else:
            print(f"plot: {path}", file=sys.stderr)
    return 0


def _play(args: argparse.Namespace) -> int:
    import numpy as np

    from connectx_gym.bitboard import Board
    from connectx_gym.registry import make_policy
    from connectx_gym.render import board_to_ansi

    opponent = make_policy(args.opponent)
    rng = np.random.default_rng(args.seed)
    first = args.first if args.first != "random" else ("you", "opponent")[rng.integers(2)]
    you = 1 if first == "you" else 2
    board = Board.empty(args.rows, args.columns, args.inarow)
    opponent.reset()
    symbol = "X" if you == 1 else "O"
    print(
        f"You play {symbol} against {args.opponent}. Type a column 0-{args.columns - 1}, "
        "or q to quit."
    )
    while not board.is_terminal():
        print(board_to_ansi(board.to_array()), end="")
        if board.mark == you:
            line = input("your move: ").strip().lower()
            if line in ("q", "quit", "exit"):
                print("bye")
                return 0
            if not line.lstrip("-").isdigit() or not board.can_play(int(line)):
                print(f"not a legal column; legal: {board.legal_moves()}")
                continue
            board = board.play(int(line))
        else:
            column = opponent.act(board, rng)
            if not board.can_play(int(column)):
                raise IllegalMoveError(f"{args.opponent} played illegal column {column}")
            print(f"{args.opponent} plays {column}")
            board = board.play(int(column))
    print(board_to_ansi(board.to_array()), end="")
    winner = board.winner()
    print("draw" if winner is None else ("you win!" if winner == you else "you lose"))
    return 0


def _export(args: argparse.Namespace) -> int:
    from train.export import export_kaggle

    path = export_kaggle(args.model, args.output)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB): submit it as your Kaggle agent")
    return 0


def _accuracy(args: argparse.Namespace) -> int:
    try:
        from baselines.solver import load_pons, move_accuracy, positions_from_games
    except ImportError as error:
        raise CommandError(f"the exact solver is not available ({error})") from None
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
        print(
            json.dumps(
                {
                    "policy": args.policy,
                    "positions": result.positions,
                    "correct": result.correct,
                    "unsolved": result.unsolved,
                    "accuracy": result.accuracy,
                    "ci95": [result.low, result.high],
                }
            )
        )
    else:
        print(f"{args.policy}: {result}")
    return 0


COMMANDS = {
    "train": _train,
    "evaluate": _evaluate,
    "tournament": _tournament,
    "play": _play,
    "export-kaggle": _export,
    "accuracy": _accuracy,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``connectx`` with ``argv`` (default: the command line); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("\nconnectx: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except EOFError:
        print("\nconnectx: end of input", file=sys.stderr)
        return EXIT_ERROR
    except (
        CommandError,
        ValueError,
        TypeError,
        FileNotFoundError,
        FileExistsError,
        OSError,
        ImportError,
        IllegalMoveError,
    ) as error:
        print(f"connectx {args.command}: error: {error}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, (ValueError, TypeError)) else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
