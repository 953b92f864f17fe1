"""Progress and status messages through :mod:`logging`: stderr for the ``connectx`` command, a
file beside a training run.

The packages log through ``logging.getLogger(__name__)`` and set nothing up themselves (a script
that imports them decides, e.g. with ``logging.basicConfig(level=logging.INFO)``). The one place
that sets logging up for the command line is :func:`console`, which :func:`connectx_gym.cli.main`
enters around the command it runs::

    with console(VERBOSE):        # QUIET: warnings and errors; NORMAL: also progress (INFO)
        ...                       # the packages' records go to stderr, one a line

Results (tables, JSON) are the commands' output on stdout; everything here goes to stderr. On a
terminal the lines go through rich's ``RichHandler`` (time, level, colours) where rich is
installed; elsewhere (a pipe, a file, rich absent) each record is one plain line, its message
alone at INFO and ``level: message`` otherwise, so logs stay one record a line for ``grep``.
A tqdm progress bar on stderr is cleared before a line is written and drawn again after it.

:func:`log_file` appends the records of a block to a file (``connectx train``'s ``train.log``),
the INFO lines included when the console shows only warnings. A function that takes its progress
lines' destination (a ``log`` callable, a logger's ``info`` by default) says a warning with
:func:`warn`, which logs it at WARNING, so that a quiet console shows it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any

__all__ = [
    "NORMAL",
    "QUIET",
    "VERBOSE",
    "console",
    "console_handler",
    "log_file",
    "packages",
    "warn",
]

#: verbosity: warnings and errors only (``--quiet``)
QUIET = -1
#: verbosity: progress and status too (INFO, the default)
NORMAL = 0
#: verbosity: debugging details too (``--verbose``)
VERBOSE = 1
#: the level the console shows at each verbosity
LEVELS = {QUIET: logging.WARNING, NORMAL: logging.INFO, VERBOSE: logging.DEBUG}
#: the format of a log file's lines
FILE_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def packages() -> tuple[str, ...]:
    """The packages whose loggers the command shows at its verbosity: the core and every package
    that plugs into it (the top-level modules its entry points name, :mod:`connectx_gym.plugins`);
    other libraries show their warnings only."""
    from connectx_gym.plugins import COMMANDS_GROUP, LOADERS_GROUP, POLICIES_GROUP, plugins

    groups = (POLICIES_GROUP, COMMANDS_GROUP, LOADERS_GROUP)
    found = {entry.module.partition(".")[0] for g in groups for entry in plugins(g).values()}
    return ("connectx_gym", *sorted(found - {"connectx_gym"}))


def warn(log: Callable[[str], None], message: str) -> None:
    """``message`` as a warning through a function that takes progress lines (``log``): where
    ``log`` is a logger's method (the training functions' default, a module logger's ``info``),
    that logger's ``warning``, so that ``--quiet`` still shows it; any other function (a test's
    ``list.append``) gets the message as it is."""
    owner = getattr(log, "__self__", None)
    if isinstance(owner, logging.Logger | logging.LoggerAdapter):
        owner.warning("%s", message)
    else:
        log(message)


def _bars_cleared() -> AbstractContextManager[Any]:
    """Within the block, tqdm's bars on stderr are cleared (drawn again after it); nothing where
    tqdm was never imported."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is None:
        return nullcontext()
    return tqdm.tqdm.external_write_mode(file=sys.stderr)  # type: ignore[no-any-return]


class _PlainFormatter(logging.Formatter):
    """The message alone at INFO; ``level: message`` at the other levels."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno == logging.INFO:
            return text
        return f"{record.levelname.lower()}: {text}"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler writing to whatever ``sys.stderr`` is when a record comes (a test's
    capture, a progress bar's redirection), around the progress bars."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: IO[str]) -> None:
        pass  # always the current sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        with _bars_cleared():
            super().emit(record)


def _rich_handler() -> logging.Handler:
    """rich's handler on stderr (ImportError without rich)."""
    from rich.console import Console
    from rich.logging import RichHandler

    class Handler(RichHandler):
        def emit(self, record: logging.LogRecord) -> None:
            with _bars_cleared():
                super().emit(record)

    return Handler(
        console=Console(stderr=True), show_path=False, markup=False, log_time_format="[%X]"
    )


def console_handler() -> logging.Handler:
    """The handler of the console: rich's where stderr is a terminal and rich is installed, else
    plain lines on stderr."""
    if sys.stderr.isatty():
        try:
            return _rich_handler()
        except ImportError:
            pass
    handler = _StderrHandler()
    handler.setFormatter(_PlainFormatter())
    return handler


@contextmanager
def console(verbosity: int = NORMAL) -> Iterator[logging.Handler]:
    """Within the block, the packages' records at ``verbosity``'s level and above, and other
    libraries' warnings, go to stderr (:func:`console_handler`); the handler and the loggers'
    levels are put back as they were after it."""
    if verbosity not in LEVELS:
        raise ValueError(f"verbosity must be one of {sorted(LEVELS)}, got {verbosity}")
    level = LEVELS[verbosity]
    handler = console_handler()
    handler.setLevel(level)
    loggers = [logging.getLogger(name) for name in packages()]
    saved = [logger.level for logger in loggers]
    root = logging.getLogger()
    root.addHandler(handler)
    for logger in loggers:  # INFO at least, for a log file beside a quiet console
        logger.setLevel(min(level, logging.INFO))
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        handler.close()
        for logger, previous in zip(loggers, saved, strict=True):
            logger.setLevel(previous)


@contextmanager
def log_file(path: str | Path) -> Iterator[Path]:
    """Within the block, append every record logged (through the root logger) to ``path``, one
    line each with its time and level. The packages log INFO and above there at least, also where
    nothing else was set up (their levels are put back after the block)."""
    path = Path(path)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter(FILE_FORMAT))
    lowered = [
        logger
        for logger in (logging.getLogger(name) for name in packages())
        if not logger.isEnabledFor(logging.INFO)
    ]
    saved = [logger.level for logger in lowered]
    root = logging.getLogger()
    # where nothing was set up, warnings still reach stderr as they would without the file
    handlers = (
        [handler] if root.handlers or logging.lastResort is None else [handler, logging.lastResort]
    )
    for added in handlers:
        root.addHandler(added)
    for logger in lowered:
        logger.setLevel(logging.INFO)
    try:
        yield path
    finally:
        for added in handlers:
            root.removeHandler(added)
        handler.close()
        for logger, previous in zip(lowered, saved, strict=True):
            logger.setLevel(previous)
