"""numba compilation of plain-integer functions, imported only when first needed.

The rules in :mod:`connectx_gym.bitboard` are written with integer arithmetic only, so the very
same functions run on Python integers (any board) or compiled by numba on ``int64`` (boards that
fit in 64 bits). Importing this module does not import numba; :func:`jit` does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_compiled: dict[Callable[..., Any], Any] = {}


def jit(function: F) -> F:
    """``function`` compiled by ``numba.njit(cache=True)``, compiled once per process."""
    if function not in _compiled:
        import numba

        _compiled[function] = numba.njit(cache=True)(function)
    return _compiled[function]
