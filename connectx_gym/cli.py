"""The ``connectx`` command: a thin top layer over the packages, one module per subcommand.

Subcommands are modules named lazily: the core's own in :data:`COMMANDS`, every installed
package's through its ``connectx_gym.commands`` entry points (:mod:`connectx_gym.plugins`; the
training and accuracy commands come that way). ``connectx --help`` lists every command without
importing any of them, and only the command that runs is imported (``connectx evaluate`` never
imports torch).

A subcommand is a module with a one-line ``HELP`` string and two functions::

    HELP = "play agents in the browser"
    def add_arguments(parser: argparse.ArgumentParser) -> None: ...   # its flags
    def run(args: argparse.Namespace) -> int: ...                     # the exit status

Registering one is a single line: in :data:`COMMANDS` for the core, else an entry point::

    [project.entry-points."connectx_gym.commands"]
    serve = "connectx_gym.commands.serve"

Results (tables, JSON) go to stdout; progress and status go through :mod:`logging` to stderr,
set up here once (:func:`connectx_gym.logs.console`): ``-q``/``--quiet`` shows warnings and errors
only, ``-v``/``--verbose`` debugging details too, before or after the command's name. Errors end
with one line on stderr and a non-zero exit status (2 for bad input, 1 for other failures, 130
when interrupted), never a traceback; set ``CONNECTX_DEBUG=1`` to see one.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NamedTuple, NoReturn

from connectx_gym import __version__
from connectx_gym.logs import NORMAL, QUIET, VERBOSE, console
from connectx_gym.plugins import COMMANDS_GROUP, command_help, plugins

__all__ = ["COMMANDS", "Command", "build_parser", "commands", "main"]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: named in full: run as ``python -m connectx_gym.cli`` this module is ``__main__``
logger = logging.getLogger("connectx_gym.cli")

SAFETY_NOTE = (
    "Policy specs: a registered name with parameters (e.g. minimax:depth=3, onestep~0.25 for 25% "
    "random moves), a weights-only .npz (safe: never unpickles), an SB3 .zip (unpickles: loading "
    "runs code from the file) or a Kaggle agent .py (runs its code). Load .zip and .py files only "
    "from sources you trust."
)


class Command(NamedTuple):
    """A subcommand: the module that implements it (imported only when it runs) and its help."""

    module: str
    help: str

    def load(self) -> ModuleType:
        """Import the subcommand's module."""
        return importlib.import_module(self.module)


#: The core's own subcommands: name -> module.
COMMANDS: dict[str, str] = {
    "evaluate": "connectx_gym.commands.evaluate",
    "tournament": "connectx_gym.commands.tournament",
    "play": "connectx_gym.commands.play",
    "serve": "connectx_gym.commands.serve",
}


def commands() -> dict[str, Command]:
    """Every subcommand, in the order ``connectx --help`` lists them: the core's, then those of
    the installed packages by name (a core name wins)."""
    found = {name: Command(module, command_help(module)) for name, module in COMMANDS.items()}
    for name, entry in sorted(plugins(COMMANDS_GROUP).items()):
        if name not in found:
            found[name] = Command(entry.module, command_help(entry.module))
    return found


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _chosen_command(argv: Sequence[str]) -> str | None:
    for argument in argv:
        if not argument.startswith("-"):
            return argument
    return None


def _add_verbosity(parser: argparse.ArgumentParser, dest: str = "verbosity") -> None:
    """``-q``/``--quiet`` and ``-v``/``--verbose``: how much of the log stderr shows. On a
    command's parser (``dest`` ``command_verbosity``, absent unless given) they count after its
    name too."""
    default = NORMAL if dest == "verbosity" else argparse.SUPPRESS
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-q",
        "--quiet",
        dest=dest,
        action="store_const",
        const=QUIET,
        default=default,
        help="show only warnings and errors on stderr (results still go to stdout)",
    )
    group.add_argument(
        "-v",
        "--verbose",
        dest=dest,
        action="store_const",
        const=VERBOSE,
        default=default,
        help="also show debugging details on stderr",
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``connectx``; the flags of ``command`` (or, when None, of every command)."""
    parser = _Parser(
        prog="connectx",
        description="ConnectX: train agents, evaluate, play and export them.",
        epilog=SAFETY_NOTE,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_verbosity(parser)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, entry in commands().items():
        sub = subparsers.add_parser(
            name,
            help=entry.help,
            description=entry.help[:1].upper() + entry.help[1:] + "." if entry.help else None,
            epilog=SAFETY_NOTE,
        )
        if command is None or command == name:
            entry.load().add_arguments(sub)
            _add_verbosity(sub, dest="command_verbosity")
    return parser


def _error_status(error: BaseException) -> int:
    from connectx_gym.commands import CommandError

    if isinstance(error, (ValueError, TypeError, CommandError)):
        return EXIT_USAGE
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``connectx`` with ``argv`` (default: the command line); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen_command(argv)
    available = commands()
    try:
        parser = build_parser(chosen if chosen in available else "")
    except ImportError as error:  # a command whose package or extra is missing
        print(f"connectx {chosen}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    args = parser.parse_args(argv)
    after = vars(args).pop("command_verbosity", args.verbosity)
    if after != args.verbosity and args.verbosity != NORMAL:
        parser.error("argument -q/--quiet: not allowed with argument -v/--verbose")
    args.verbosity = after
    try:
        with console(args.verbosity):
            module = available[args.command].load()
            logger.debug("connectx %s: %s from %s", __version__, args.command, module.__name__)
            return int(module.run(args))
    except KeyboardInterrupt:
        print("\nconnectx: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except EOFError:
        print(f"\nconnectx {args.command}: error: end of input", file=sys.stderr)
        return EXIT_ERROR
    except Exception as error:
        if os.environ.get("CONNECTX_DEBUG"):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        from connectx_gym.commands import CommandError

        plain = (ValueError, TypeError, OSError, ImportError, LookupError, CommandError)
        if not isinstance(error, plain):
            message = f"{type(error).__name__}: {message}"
        if isinstance(error, RecursionError | MemoryError | OverflowError):
            message = f"{type(error).__name__}: {message}"
        print(f"connectx {args.command}: error: {message}", file=sys.stderr)
        return _error_status(error)


def run_program() -> NoReturn:
    """The ``connectx`` program (its console script, and ``python -m connectx_gym.cli``): exit
    with :func:`main`'s status. What the command leaves is first put out of the garbage
    collector's reach (``gc.freeze``): the process's exit frees it all at once, where the
    interpreter's last collections would walk every object of torch and numba, a second of a
    short command's time. (:func:`main` itself, called in a process that goes on, frees as
    usual.)"""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    run_program()
