"""Checks of the limits a search accepts, each a ``ValueError`` naming the parameter, and how a
compiled search meets Ctrl-C (:func:`signal_safe`, :func:`run_stoppable`)."""

from __future__ import annotations

import math
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Literal, TypeVar, overload

import numpy as np

from connectx_gym.bitboard import Geometry

T = TypeVar("T")


@overload
def require_seconds(name: str, value: Any, *, optional: Literal[False]) -> float: ...


@overload
def require_seconds(name: str, value: Any, *, optional: bool = True) -> float | None: ...


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


def _wait_through_signals(finished: threading.Event) -> None:
    """Wait for ``finished``; a further Ctrl-C meanwhile (the call, told to stop, ends within
    milliseconds) does not cut the wait short."""
    while True:
        try:
            finished.wait()
            return
        except BaseException:  # the exception that is already on its way is raised after
            continue


def run_stoppable(call: Callable[[], None], stop: Callable[[], None], poll: float = 0.05) -> None:
    """``call()``, compiled code that releases the GIL, on a helper thread while this one waits,
    so that an exception of a signal handler (Ctrl-C's ``KeyboardInterrupt``, SIGTERM where a
    trainer turns it into one) comes within ``poll`` seconds rather than at the call's end:
    ``stop()`` then asks the call to end, the call is waited for, and the exception goes on.
    What ``call`` raises is raised here. Off the main thread, where no signal handler runs,
    ``call()`` runs on this thread."""
    if threading.current_thread() is not threading.main_thread():
        call()
        return
    failure: list[BaseException] = []
    finished = threading.Event()

    def target() -> None:
        try:
            call()
        except BaseException as error:  # raised again by the waiting thread
            failure.append(error)
        finally:
            finished.set()

    # The wait is on an event, not on ``Thread.join``: a join that a signal interrupts may mark
    # a thread that still runs as ended (CPython before 3.13), and the next call would then
    # share its scratch arrays with a search not yet stopped.
    threading.Thread(target=target, name="connectx-search", daemon=True).start()
    try:
        while not finished.wait(poll):
            pass
    except BaseException:
        stop()
        _wait_through_signals(finished)
        raise
    if failure:
        raise failure[0]


#: The largest share of the machine's RAM the transposition tables of one process may take
#: together (each search's table is counted from its allocation until it is freed).
TABLE_RAM_SHARE = 0.25
_ENTRY_BYTES = 16


def _physical_memory() -> int | None:
    """Bytes of RAM of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def table_bytes(table_bits: int) -> int:
    """The most bytes a table of ``table_bits`` takes: the first prime above ``2 ** table_bits``
    entries of 16 bytes (primes are less than 1024 apart at these sizes)."""
    return _ENTRY_BYTES * ((1 << table_bits) + 1024)


class _TableBudget:
    """The bytes of the transposition tables alive in this process."""

    def __init__(self) -> None:
        # reentrant: a table freed by a garbage collection inside a reservation releases its
        # bytes on the same thread
        self.lock = threading.RLock()
        self.in_use = 0

    def release(self, size: int) -> None:
        with self.lock:
            self.in_use -= size


_TABLES = _TableBudget()


def tables_in_use() -> int:
    """Bytes of the transposition tables this process holds now (:func:`reserve_table`)."""
    return _TABLES.in_use


def max_table_bits(memory: int | None = None, in_use: int = 0) -> int:
    """The largest ``table_bits`` whose table fits in :data:`TABLE_RAM_SHARE` of ``memory``
    bytes (this machine's RAM by default; 30 where it is unknown) beside ``in_use`` bytes of
    tables; 3 when not even a table of 4 bits fits."""
    memory = _physical_memory() if memory is None else memory
    if memory is None:
        return 30
    fits = int(memory * TABLE_RAM_SHARE) - in_use
    for bits in range(30, 3, -1):
        if table_bytes(bits) <= fits:
            return bits
    return 3


def require_table_bits(table_bits: object) -> None:
    """``ValueError`` naming ``table_bits`` unless it is an integer in [4, 30] whose table (16
    bytes an entry) fits, beside the tables this process already holds, in
    :data:`TABLE_RAM_SHARE` of this machine's RAM."""
    if isinstance(table_bits, bool) or not isinstance(table_bits, int) or not 4 <= table_bits <= 30:
        raise ValueError(f"table_bits must be an integer in [4, 30], got {table_bits!r}")
    in_use = tables_in_use()
    cap = max_table_bits(in_use=in_use)
    if table_bits > cap:
        memory = _physical_memory() or 0
        held = f" beside the {in_use / 1e9:.1f} GB of tables this process holds" if in_use else ""
        room = f"at most table_bits={cap} here now" if cap >= 4 else "no room for another table"
        raise ValueError(
            f"table_bits={table_bits} needs {table_bytes(table_bits) / 1e9:.1f} GB, more "
            f"than {TABLE_RAM_SHARE:.0%} of this machine's {memory / 1e9:.1f} GB of RAM allows"
            f"{held}: {room}"
        )


def reserve_table(owner: object, table_bits: int, *, checked: bool = True) -> None:
    """Count the table of ``owner`` (about ``2 ** table_bits`` entries) in the process's budget
    until ``owner`` is freed; when ``checked``, first refuse (``ValueError`` naming
    ``table_bits``, :func:`require_table_bits`) a table the budget left cannot hold. Called
    before the table is allocated."""
    size = table_bytes(table_bits)
    with _TABLES.lock:
        if checked:
            require_table_bits(table_bits)
        _TABLES.in_use += size
    weakref.finalize(owner, _TABLES.release, size)
