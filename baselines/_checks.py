"""Checks of the limits a search accepts, each a ``ValueError`` naming the parameter."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from connectx_gym.bitboard import Geometry

T = TypeVar("T")


def require_seconds(name: str, value: Any, *, optional: bool = True) -> float | None:
    """``value`` as a finite number of seconds > 0 (``None`` passes when ``optional``)."""
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def require_node_limit(name: str, value: Any) -> int | None:
    """``value`` as a node count >= 1, or ``None`` (no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 (or None: no limit), got {value!r}")
    return int(value)


def require_depth_fits(name: str, depth: int, geometry: Geometry) -> None:
    """``ValueError`` naming ``name`` when ``depth`` exceeds the cells of ``geometry`` (no game
    lasts longer: deeper searches would only waste memory)."""
    if depth > geometry.cells:
        raise ValueError(
            f"{name} must be <= {geometry.cells} (the cells of a {geometry.rows}x"
            f"{geometry.columns} board), got {depth}"
        )


def signal_safe(call: Callable[[], T]) -> T:
    """``call()``, re-raising what a signal handler raised (``KeyboardInterrupt`` on Ctrl-C)
    while compiled code was reading the clock through numba's object mode (numba reports it
    as a ``SystemError`` caused by it)."""
    try:
        return call()
    except SystemError as error:
        if isinstance(error.__cause__, BaseException) and not isinstance(
            error.__cause__, Exception
        ):
            raise error.__cause__ from None
        raise
