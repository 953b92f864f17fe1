"""The clock of the timed searches: ``time.perf_counter()``, also callable from compiled code.

Compiled code cannot call Python without taking the GIL (numba's object mode, about a microsecond
a read on one thread), so searches running at once on numba's threads would take turns at every
read of the clock. On Linux, where ``time.perf_counter()`` is ``clock_gettime(CLOCK_MONOTONIC)``,
compiled code calls that C function directly (tens of nanoseconds, no GIL): :func:`monotonic`.
Elsewhere it reads the clock through object mode, as :func:`interruptible_monotonic` always does:
running Python there lets a pending Ctrl-C raise ``KeyboardInterrupt`` (in the main thread), which
a search of one board on the caller's thread wants. In plain Python (boards beyond 64 bits) both
are ``time.perf_counter()`` itself.
"""

from __future__ import annotations

import sys
import time

from llvmlite import ir
from numba import objmode, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from connectx_gym._jit import plain

#: ``CLOCK_MONOTONIC`` of Linux's ``<time.h>``: the clock of Python's ``time.perf_counter()``.
_CLOCK_MONOTONIC = 1


@plain
def monotonic() -> float:
    """Seconds of ``time.perf_counter()``; compiled code reads the same clock (see above)."""
    return time.perf_counter()


@plain
def interruptible_monotonic() -> float:
    """Seconds of ``time.perf_counter()``, read in compiled code through Python (see above)."""
    return time.perf_counter()


@intrinsic
def _clock_gettime_monotonic(typingctx):
    """``clock_gettime(CLOCK_MONOTONIC)`` in seconds (Linux, 64-bit ``time_t`` and ``long``)."""

    def codegen(context, builder, signature, arguments):
        int32, int64, double = ir.IntType(32), ir.IntType(64), ir.DoubleType()
        timespec = ir.LiteralStructType([int64, int64])  # tv_sec, tv_nsec
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(int32, [int32, timespec.as_pointer()]), "clock_gettime"
        )
        slot = cgutils.alloca_once(builder, timespec)
        builder.call(function, [ir.Constant(int32, _CLOCK_MONOTONIC), slot])
        seconds = builder.sitofp(builder.load(cgutils.gep_inbounds(builder, slot, 0, 0)), double)
        nanoseconds = builder.sitofp(
            builder.load(cgutils.gep_inbounds(builder, slot, 0, 1)), double
        )
        return builder.fadd(seconds, builder.fmul(nanoseconds, ir.Constant(double, 1e-9)))

    return types.float64(), codegen


def _object_mode_clock() -> float:
    with objmode(current="float64"):
        current = time.perf_counter()
    return current


def _c_clock() -> float:
    # compiled code calls an intrinsic without the typing context that numba passes itself
    return _clock_gettime_monotonic()  # type: ignore[call-arg]


@overload(monotonic)
def _compiled_monotonic():
    return _c_clock if sys.platform.startswith("linux") else _object_mode_clock


@overload(interruptible_monotonic)
def _compiled_interruptible_monotonic():
    return _object_mode_clock
