"""``connectx play``: play against a policy in the terminal."""

from __future__ import annotations

import argparse

from connectx_gym.commands import add_board, add_seed, check_board

__all__ = ["add_arguments", "run"]

#: The one-line help of ``connectx --help`` (read from this source without importing it).
HELP = "play against a policy in the terminal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opponent", default="minimax:depth=3", help="policy spec or saved agent")
    parser.add_argument(
        "--first", choices=("you", "opponent", "random"), default="you", help="who starts"
    )
    add_seed(parser, default=None, what=" of the opponent's randomness")
    add_board(parser)
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the discs (auto: on a terminal, unless NO_COLOR is set)",
    )


def _use_colour(choice: str) -> bool:
    import os
    import sys

    if choice != "auto":
        return choice == "always"
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from connectx_gym.bitboard import Board
    from connectx_gym.policy import IllegalMoveError
    from connectx_gym.registry import make_policy
    from connectx_gym.render import board_to_ansi

    check_board(args)
    opponent = make_policy(args.opponent)
    rng = np.random.default_rng(args.seed)
    first = args.first if args.first != "random" else ("you", "opponent")[rng.integers(2)]
    you = 1 if first == "you" else 2
    board = Board.empty(args.rows, args.columns, args.inarow)
    opponent.reset()
    colour = _use_colour(args.color)
    symbol = ("X (red)" if colour else "X") if you == 1 else ("O (yellow)" if colour else "O")

    def show(board: Board) -> None:
        print(board_to_ansi(board.to_array(), first_column=1, colour=colour), end="")

    print(
        f"You play {symbol} against {args.opponent}. Type a column 1-{args.columns}, or q to quit."
    )
    while not board.is_terminal():
        show(board)
        if board.mark == you:
            line = input("your move: ").strip().lower()  # EOFError on closed stdin: one line
            if line in ("q", "quit", "exit"):
                print("bye")
                return 0
            legal = [c + 1 for c in board.legal_moves()]
            if not line.isdigit() or len(line) > 6 or int(line) not in legal:
                print(f"not a legal column; legal: {' '.join(map(str, legal))}")
                continue
            board = board.play(int(line) - 1)
        else:
            column = opponent.act(board, rng)
            if not board.can_play(int(column)):
                raise IllegalMoveError(f"{args.opponent} played illegal column {column}")
            print(f"{args.opponent} plays {int(column) + 1}")
            board = board.play(int(column))
    show(board)
    winner = board.winner()
    print("draw" if winner is None else ("you win!" if winner == you else "you lose"))
    return 0
