"""The page's script puts text into the page only as text: no markup is built from data."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "connectx_gym" / "serve" / "static" / "app.js"
#: Ways of turning a string into markup.
MARKUP_SINKS = re.compile(
    r"\.(innerHTML|outerHTML)\s*\+?=\s*(?P<value>[^;]*)|insertAdjacentHTML|document\.write"
)
CONSTANT = re.compile(r"""^\s*(?:"[^"$\\]*"|'[^'$\\]*'|`[^`$\\]*`)\s*$""")


def markup_from_data(script: str) -> list[str]:
    """The statements of ``script`` that may turn data into markup (constant markup is fine)."""
    found = []
    for match in MARKUP_SINKS.finditer(script):
        value = match.group("value")
        if value is None or not CONSTANT.match(value):
            found.append(match.group(0))
    return found


def test_the_page_builds_no_markup_from_data() -> None:
    assert markup_from_data(SCRIPT.read_text()) == []


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        ('$("x").innerHTML = "";', False),
        ('$("x").innerHTML = "<br>";', False),
        ('$("x").innerHTML = `<option>${g.game}</option>`;', True),
        ('$("x").innerHTML = parts.join("");', True),
        ('$("x").innerHTML += name;', True),
        ('node.insertAdjacentHTML("beforeend", "<b>")', True),
    ],
)
def test_the_check_flags_markup_built_from_data(line: str, flagged: bool) -> None:
    assert bool(markup_from_data(line)) is flagged
