"""mkdocs hook: the CLI reference page, generated from ``connectx``'s own argument parsers.

A page holding the line ``<!-- cli-reference -->`` gets, in its place, a table of every
registered command (the core's and those of the installed packages' entry points, as
``connectx --help`` lists them) and, for each, its ``--help`` text. It is built from the parsers
at every site build, so it cannot drift from the code. A command whose package cannot be
imported is a warning, which fails the strict build.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from connectx_gym.cli import build_parser, commands

MARKER = "<!-- cli-reference -->"
#: the help texts' width (argparse reads it from ``COLUMNS``)
WIDTH = 96

log = logging.getLogger("mkdocs.hooks.cli_reference")


def _help_text(command: str) -> str:
    """``connectx COMMAND --help``, as the terminal shows it at :data:`WIDTH` columns."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(WIDTH)
    try:
        parser = build_parser(command)
        action = next(a for a in parser._actions if a.dest == "command")
        return action.choices[command].format_help()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def cli_reference() -> str:
    """The reference's markdown: a table of the commands, then each one's help."""
    found = commands()
    lines = ["| command | what it does |", "| --- | --- |"]
    lines += [f"| [`connectx {name}`](#connectx-{name}) | {c.help} |" for name, c in found.items()]
    for name, command in found.items():
        lines += ["", f"## `connectx {name}` {{#connectx-{name}}}", "", f"{command.help}."]
        try:
            text = _help_text(name)
        except ImportError as error:
            log.warning(f"CLI reference: connectx {name} cannot be imported ({error})")
            continue
        lines += ["", "```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker of the page that holds one with the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
