"""One rule for the numbers the package reads, wherever they come from.

- **Whole numbers** (board sizes, marks, counts) are ``int`` or numpy integers: ``bool`` and every
  float are refused, ``6.0`` included, so ``rows=6.0`` and ``mark=2.0`` get the same one-line
  :class:`WholeNumberError` (both a ``TypeError`` and a ``ValueError``).
- **Numbers in text** (policy spec values such as ``minimax:depth=4``, noise, mixture weights) are
  read by :func:`parse_number`: digits with an optional sign, point and exponent, or ``nan`` /
  ``inf``; no underscores (``1_0`` is not 10), no hexadecimal, no complex numbers.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["WholeNumberError", "looks_numeric", "parse_number", "player_mark", "whole_number"]

_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SPECIAL = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}
#: digits a whole number in text may have (Python refuses longer int conversions anyway)
_MAX_DIGITS = 4000


class WholeNumberError(TypeError, ValueError):
    """A value that should be a whole number (an ``int``) and is not."""


def whole_number(value: Any, name: str) -> int:
    """``value`` as an ``int`` if it is an ``int`` or a numpy integer (not a ``bool``, not a
    float, even ``6.0``); :class:`WholeNumberError` naming ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise WholeNumberError(f"{name} must be a whole number (an int), got {value!r}")
    return int(value)


def player_mark(value: Any, name: str = "mark", allow_none: bool = False) -> int | None:
    """``value`` if it is mark 1 or 2 (a whole number; ``None`` too where ``allow_none``);
    ``ValueError`` naming ``name`` otherwise."""
    if value is None and allow_none:
        return None
    choices = "1, 2 or None" if allow_none else "1 or 2"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value not in (1, 2):
        raise WholeNumberError(f"{name} must be {choices}, got {value!r}")
    return int(value)


def looks_numeric(text: str) -> bool:
    """Whether ``text`` is meant as a number: it starts like one (a sign, a digit or a point
    followed by a digit) or is ``nan`` / ``inf``."""
    stripped = text.strip().lower()
    return stripped in _SPECIAL or bool(re.match(r"[+-]?\.?[0-9]", stripped))


def parse_number(text: str, name: str = "value") -> int | float:
    """The number ``text`` writes: an ``int`` for digits alone (``"10"``, ``"-3"``), a ``float``
    for a point or exponent (``"0.5"``, ``"1e-3"``) and for ``nan`` / ``inf``. ``ValueError``
    naming ``name`` for anything else (``"1_0"``, ``"0x10"``, ``"1j"``, ``""``)."""
    stripped = text.strip()
    shown = repr(stripped if len(stripped) <= 40 else stripped[:37] + "...")
    if stripped.lower() in _SPECIAL:
        return float(stripped.lower().replace("infinity", "inf"))
    if len(stripped) > _MAX_DIGITS:
        raise ValueError(f"{name} {shown} has more than {_MAX_DIGITS} characters")
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    if _DECIMAL.fullmatch(stripped):
        value = float(stripped)
        if math.isinf(value):
            raise ValueError(f"{name} {shown} is too large")
        return value
    raise ValueError(
        f"{name} {shown} is not a number: write digits, with an optional sign, point and "
        "exponent (no underscores)"
    )
