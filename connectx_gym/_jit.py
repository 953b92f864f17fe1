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


def helper(function: F) -> F:
    """Mark ``function`` as a search helper, called once per node with the search's arrays:
    compiled into its callers by LLVM (``forceinline``) and without numba's reference counting
    (``_nrt=False``), so that it costs what its body costs (a plain call and the atomic updates
    of the arrays' counts cost the solver about a fifth of its time). Only for functions that
    allocate nothing; on Python integers it runs unchanged."""
    function.jit_helper = True  # type: ignore[attr-defined]
    return function


def jit(function: F) -> F:
    """``function`` compiled by ``numba.njit(cache=True)``, compiled once per process
    (without reference counting when marked by :func:`helper`)."""
    if function not in _compiled:
        import numba

        options = {}
        if getattr(function, "jit_helper", False):
            options = {"_nrt": False, "forceinline": True}
        _compiled[function] = numba.njit(cache=True, **options)(function)
    return _compiled[function]
