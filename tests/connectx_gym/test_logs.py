"""Logging set up once for the command line: levels per verbosity, one plain line per record off
a terminal, rich's handler on one, a log file that keeps INFO lines under a quiet console, and
everything put back as it was after the block."""

from __future__ import annotations

import io
import logging
import re
import sys
from pathlib import Path

import pytest

from connectx_gym.logs import (
    NORMAL,
    QUIET,
    VERBOSE,
    console,
    console_handler,
    log_file,
    packages,
    warn,
)

logger = logging.getLogger("connectx_gym.test_logs")


def emit_each_level() -> None:
    logger.debug("a detail")
    logger.info("a step done")
    logger.warning("something odd")
    logger.error("something wrong")


@pytest.mark.parametrize(
    ("verbosity", "expected"),
    [
        (QUIET, ["warning: something odd", "error: something wrong"]),
        (NORMAL, ["a step done", "warning: something odd", "error: something wrong"]),
        (
            VERBOSE,
            ["debug: a detail", "a step done", "warning: something odd", "error: something wrong"],
        ),
    ],
)
def test_each_verbosity_shows_its_levels_on_stderr_only(
    capsys: pytest.CaptureFixture[str], verbosity: int, expected: list[str]
) -> None:
    with console(verbosity):
        emit_each_level()
    captured = capsys.readouterr()
    assert captured.err.splitlines() == expected
    assert captured.out == ""


def test_the_packages_shown_are_the_core_and_those_plugged_into_it() -> None:
    assert packages() == ("connectx_gym", "connectx_baselines", "connectx_train")


def test_the_block_leaves_logging_as_it_found_it(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), logging.getLogger("connectx_train").level
    with console(VERBOSE) as handler:
        assert handler in root.handlers
        assert logging.getLogger("connectx_train").level == logging.DEBUG
    assert root.handlers == handlers
    assert logging.getLogger("connectx_train").level == level
    logger.info("after the block")
    assert "after the block" not in capsys.readouterr().err


def test_other_libraries_show_their_warnings_not_their_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = logging.getLogger("some_library")
    with console(VERBOSE):
        other.info("their progress")
        other.warning("their warning")
    assert capsys.readouterr().err.splitlines() == ["warning: their warning"]


def test_an_unknown_verbosity_is_refused() -> None:
    with pytest.raises(ValueError, match="verbosity must be one of"), console(3):
        pass


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_the_rich_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    rich_logging = pytest.importorskip("rich.logging")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    handler = console_handler()
    assert isinstance(handler, rich_logging.RichHandler)
    with console(NORMAL):
        logger.info("on the terminal [1/2]")  # brackets are text, not rich markup
    shown = re.sub(r"\x1b\[[0-9;]*m", "", terminal.getvalue())  # without the colours
    assert "INFO" in shown
    assert "on the terminal [1/2]" in shown


def test_a_pipe_gets_plain_lines_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    handler = console_handler()
    assert type(handler).__module__ == "connectx_gym.logs"
    long = "x" * 300
    with console(NORMAL):
        logger.info(long)
    assert sys.stderr.getvalue() == long + "\n"  # one record, one line: never wrapped


def test_log_file_appends_and_keeps_info_under_a_quiet_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "train.log"
    with console(QUIET), log_file(path):
        emit_each_level()
    with console(QUIET), log_file(path):
        logger.info("a second session")
    assert capsys.readouterr().err.splitlines() == [
        "warning: something odd",
        "error: something wrong",
    ]
    lines = path.read_text().splitlines()
    levels_and_messages = [line.split(" ", 2)[2] for line in lines]  # after the date and time
    assert levels_and_messages == [
        "INFO a step done",
        "WARNING something odd",
        "ERROR something wrong",
        "INFO a second session",
    ]


def test_log_file_where_nothing_was_set_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A script that set no logging up: INFO lines go to the file, warnings still to stderr
    (as logging's last resort prints them), and the levels are put back after."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest's own handlers aside
    package = logging.getLogger("connectx_gym")
    level = package.level
    path = tmp_path / "run.log"
    with log_file(path):
        logger.info("progress")
        logger.warning("a warning")
    assert [line.split(" ", 2)[2] for line in path.read_text().splitlines()] == [
        "INFO progress",
        "WARNING a warning",
    ]
    assert capsys.readouterr().err == "a warning\n"
    assert package.level == level
    assert logging.getLogger().handlers == []


def test_a_line_goes_above_a_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    tqdm = pytest.importorskip("tqdm")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with console(NORMAL), tqdm.tqdm(total=10, file=sys.stderr, mininterval=0) as bar:
        bar.update(3)
        logger.info("a step done")
        bar.update(3)
    before, _, after = sys.stderr.getvalue().partition("a step done\n")
    assert "3/10" in before
    assert before.endswith("\r")  # the bar's line cleared before the record
    assert "3/10" in after.split("\r")[1]  # the bar drawn again below it, then going on
    assert "6/10" in after


def test_a_warning_through_a_logger_method_is_logged_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger=logger.name):
        warn(logger.info, "a book is missing")
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (logger.name, logging.WARNING, "a book is missing")
    ]
    lines: list[str] = []
    warn(lines.append, "a book is missing")  # any other function gets the message as it is
    assert lines == ["a book is missing"]
