"""connectx_gym.numeric: one rule for whole numbers, one parser for numbers in text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectx_gym.numeric import WholeNumberError, parse_number, player_mark, whole_number


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_integers_read_back_as_ints(value: int) -> None:
    parsed = parse_number(str(value))
    assert parsed == value
    assert type(parsed) is int


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_read_back_as_written(value: float) -> None:
    text = repr(value)
    assert parse_number(text) == float(text)  # Python's own reading of the same text


@pytest.mark.parametrize("text", ["1_0", "0x10", "0b1", "1j", "", "1e", "--1", "1.2.3", "ten"])
def test_anything_else_is_refused_naming_the_value(text: str) -> None:
    with pytest.raises(ValueError, match="depth"):
        parse_number(text, "depth")


def test_special_values() -> None:
    assert math.isnan(parse_number("nan"))
    assert parse_number("-inf") == -math.inf
    assert parse_number("Infinity") == math.inf
    with pytest.raises(ValueError, match="too large"):
        parse_number("1e999")


@pytest.mark.parametrize("value", [6.0, True, "6", None, np.float32(6)])
def test_whole_numbers_are_ints(value: object) -> None:
    with pytest.raises(WholeNumberError, match="rows must be a whole number"):
        whole_number(value, "rows")
    assert whole_number(np.int8(6), "rows") == 6


def test_marks() -> None:
    assert player_mark(np.int64(2)) == 2
    assert player_mark(None, allow_none=True) is None
    for value in (2.0, True, 3, None):
        with pytest.raises(ValueError, match="mark must be 1 or 2"):
            player_mark(value)
