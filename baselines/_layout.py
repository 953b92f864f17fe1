"""The shapes the search kernels share: board dimensions, stack frames and search state.

* :class:`Dims`: the geometry's integers as one named tuple (numba compiles named tuples of
  integers), passed to a kernel instead of five to seven loose integers.
* A resumable search keeps its explicit stack in two arrays of one row per ply, made by
  :func:`new_frames`: ``frames`` (``int64``; columns :data:`FRAME_CURRENT`, :data:`FRAME_MASK`,
  :data:`FRAME_NEXT`) and ``bounds`` (``float64``; columns :data:`BOUND_ALPHA`,
  :data:`BOUND_BETA`, :data:`BOUND_VALUE`).
* ``state``: an ``int64`` array with named indices (:func:`new_state`): nodes visited, the node
  budget of the current call, the ply of the open frame (-1: none) and the root column being
  searched. A kernel stops when it has spent its budget and carries on from ``state``, frames and
  bounds when called again, so the caller can run a long search in bounded chunks (and Python
  can handle Ctrl-C between them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from connectx_gym.bitboard import Geometry

# Columns of ``frames``: the position of the ply's node and the index (in the move order) of
# its next move to try.
FRAME_CURRENT = 0
FRAME_MASK = 1
FRAME_NEXT = 2
# Columns of ``bounds``: the node's window and its best value so far.
BOUND_ALPHA = 0
BOUND_BETA = 1
BOUND_VALUE = 2

# Indices of ``state``.
STAT_NODES = 0  # nodes visited (all calls)
STAT_BUDGET = 1  # the call returns once STAT_NODES reaches this
STAT_PLY = 2  # ply of the innermost open frame; -1 when no search below the root is open
STAT_ROOT = 3  # index, in the move order, of the root column being searched
STAT_ABORTED = 4  # set to 1 by a search that stopped at its budget or deadline (result void)
STAT_NEXT_CHECK = 5  # node count at which a search under a deadline reads the clock next
STAT_SIZE = 6  # the solver keeps its column order after these


class Dims(NamedTuple):
    """The integers of a :class:`~connectx_gym.Geometry` that the kernels read."""

    bottom: int
    board: int
    height: int
    inarow: int
    size: int
    columns: int
    cells: int


def dims(geometry: Geometry) -> Dims:
    """The :class:`Dims` of ``geometry``."""
    g = geometry
    return Dims(g.bottom, g.board, g.height, g.inarow, g.size, g.columns, g.cells)


def new_frames(depth: int, geometry: Geometry) -> tuple[np.ndarray, np.ndarray]:
    """Empty ``frames`` and ``bounds`` for a search ``depth`` plies deep on ``geometry``
    (``frames`` of Python integers when the board does not fit in 64 bits)."""
    dtype = np.int64 if geometry.fits_64_bits else object
    return np.zeros((depth + 1, 3), dtype=dtype), np.zeros((depth + 1, 3))


def new_state() -> np.ndarray:
    """A fresh ``state``: nothing searched yet."""
    state = np.zeros(STAT_SIZE, dtype=np.int64)
    state[STAT_PLY] = -1
    return state


def node_chunk(geometry: Geometry) -> int:
    """Nodes per kernel call of a chunked search: well under a second of compiled search (or
    of the plain-Python backend on boards beyond 64 bits), so Ctrl-C is handled promptly."""
    return 1 << 16 if geometry.fits_64_bits else 1 << 10


def run_in_chunks(step: Callable[[], bool], state: np.ndarray, chunk: int) -> None:
    """Call ``step`` (a resumable kernel call, True when finished) with ``chunk`` more nodes of
    budget each time until it finishes. Python runs its signal handlers between calls, so a
    ``KeyboardInterrupt`` stops a search within one chunk."""
    state[STAT_BUDGET] = state[STAT_NODES] + chunk
    while not step():
        state[STAT_BUDGET] = state[STAT_NODES] + chunk


def restart(state: np.ndarray) -> np.ndarray:
    """``state`` made fresh again (nothing searched), for reuse by the next search."""
    state[STAT_NODES] = 0
    state[STAT_PLY] = -1
    state[STAT_ROOT] = 0
    return state
