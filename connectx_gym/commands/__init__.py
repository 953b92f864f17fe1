"""The core's ``connectx`` subcommands (evaluate, tournament, play, serve) and what commands share.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``; the core's are
listed in :data:`connectx_gym.cli.COMMANDS`, the other layers' come through entry points
(:mod:`connectx_gym.plugins`). The options several commands take are declared once here:
:func:`add_result_options` (``--seed``, ``--ray``, ``--json``: every command that plays games or
answers positions, ``accuracy`` among them) and :func:`add_match_options` (those, and ``--games``,
``--openings``, ``--save-games`` and the board: ``evaluate`` and ``tournament``). :func:`add_png`
and :func:`check_png` declare and check ``--png`` (``tournament`` and ``accuracy``). The argument
types here reject bad values with a one-line argparse error, so no number reaches the code outside
its range.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "MAX_GAMES",
    "MAX_SEED",
    "CommandError",
    "add_board",
    "add_match_options",
    "add_png",
    "add_ray",
    "add_result_options",
    "add_seed",
    "bounded_int",
    "check_board",
    "check_png",
    "open_executor",
    "positive_float",
    "positive_int",
]

#: The most games one command plays (per pairing in a tournament).
MAX_GAMES = 10_000_000
#: Seeds are whole numbers in ``[0, MAX_SEED]``.
MAX_SEED = 2**63 - 1


class CommandError(Exception):
    """A problem with the user's input, reported as one line on stderr."""


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {text}")
        return value

    parse.__name__ = "whole number"
    return parse


positive_int = bounded_int(1, MAX_GAMES)


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (seconds, for instance)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


positive_float.__name__ = "number"


def add_board(parser: argparse.ArgumentParser) -> None:
    """``--rows``, ``--columns`` and ``--inarow`` (checked against the env's largest board)."""
    from connectx_gym.bitboard import MAX_SIDE

    side = bounded_int(1, MAX_SIDE)
    parser.add_argument("--rows", type=side, default=6, help="board rows (default 6)")
    parser.add_argument("--columns", type=side, default=7, help="board columns (7)")
    parser.add_argument("--inarow", type=side, default=4, help="discs to win (4)")


def add_result_options(parser: argparse.ArgumentParser, ray: str, seed: str = "") -> None:
    """``--seed`` (help: "seed" + ``seed``), ``--ray [ADDRESS]`` (help: ``ray`` on Ray) and
    ``--json``: the options of every command that plays games or answers positions."""
    add_seed(parser, what=seed)
    add_ray(parser, what=ray)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def add_match_options(parser: argparse.ArgumentParser, games: str, seed: str = "") -> None:
    """The options of every command that plays matches: ``--games`` (help: ``games``; default
    None: every opening from both seats), ``--openings`` (a set of :mod:`connectx_gym.openings`),
    ``--save-games FILE.jsonl``, those of :func:`add_result_options` and the board's."""
    from connectx_gym.openings import DEFAULT_OPENINGS, OPENING_SETS

    parser.add_argument("--games", type=positive_int, default=None, help=games)
    parser.add_argument(
        "--openings",
        choices=tuple(OPENING_SETS),
        default=DEFAULT_OPENINGS,
        help=f"opening set each game starts from, from both seats ({DEFAULT_OPENINGS}; "
        "none: the empty board)",
    )
    parser.add_argument(
        "--save-games", default=None, metavar="FILE", help="write every game to a JSON-lines file"
    )
    add_result_options(parser, ray="play the games", seed=seed)
    add_board(parser)


def add_png(parser: argparse.ArgumentParser, what: str) -> None:
    """``--png FILE``: also draw the result (help: ``what``) with matplotlib (:func:`check_png`)."""
    parser.add_argument(
        "--png",
        default=None,
        metavar="FILE",
        # argparse expands %-formats in help texts: a '95%' in ``what`` is written as it is
        help=f"also write {what.replace('%', '%%')} as a PNG to FILE (needs matplotlib, in the "
        "train extra)",
    )


def check_png(args: argparse.Namespace) -> None:
    """Before any work: ``--png``'s file can be written and matplotlib imports (else one line
    naming the extra to install)."""
    if args.png is None:
        return
    from connectx_gym.outputs import check_output_path

    check_output_path(args.png)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CommandError(
            '--png needs matplotlib: pip install "connectx-gym[train]" (or pip install matplotlib)'
        ) from None


def add_ray(parser: argparse.ArgumentParser, what: str = "play the games") -> None:
    """``--ray [ADDRESS]``: run the work on Ray (a local instance, or the cluster at ADDRESS)."""
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help=f"{what} on Ray (same results as a local run, with a progress bar): a local "
        "instance sized to the machine, or join the cluster at ADDRESS (needs the ray extra)",
    )


def open_executor(args: argparse.Namespace) -> Any:
    """A context manager giving the executor: ``None`` (local) or a Ray executor that shows a
    progress bar on stderr and stops the local instance it started."""
    from contextlib import nullcontext

    if getattr(args, "ray", None) is None:
        return nullcontext(None)
    from connectx_gym.ray_executor import RayExecutor

    return RayExecutor(address=None if args.ray == "local" else args.ray, progress=True)


def add_seed(parser: argparse.ArgumentParser, default: int | None = 0, what: str = "") -> None:
    """``--seed``: a whole number in ``[0, MAX_SEED]``."""
    parser.add_argument(
        "--seed",
        type=bounded_int(0, MAX_SEED),
        default=default,
        help=f"seed{what} (default {default})",
    )


def check_board(args: argparse.Namespace) -> None:
    """Refuse a board larger than the env accepts (one line naming the limit)."""
    from connectx_gym.bitboard import Geometry

    Geometry(args.rows, args.columns, args.inarow)
