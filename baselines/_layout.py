"""The shapes the search kernels share: board dimensions, stack frames and search state.

* The board's dimensions: :class:`connectx_gym._dims.Dims` (the core's, shared with the batched
  env's kernels).
* Every search (minimax, negamax, alpha-beta, solver) keeps its explicit stack in two arrays of
  one row per ply, made by :func:`new_frames`: ``frames`` (integers; columns :data:`FRAME_CURRENT`,
  :data:`FRAME_MASK`, :data:`FRAME_NEXT`, :data:`FRAME_COUNT`, :data:`FRAME_BEST`, then from
  :data:`FRAME_MOVES` the node's sorted move list) and ``bounds`` (``float64``; columns
  :data:`BOUND_ALPHA`, :data:`BOUND_BETA`, :data:`BOUND_VALUE`).
* ``state`` (``stats``): an ``int64`` array with named indices (:func:`new_state`): nodes visited,
  the node budget of the current call, the ply of the open frame (-1: none), the root column
  being searched, whether the search was aborted, the next clock read, whether its clock reads
  let Ctrl-C in. A resumable kernel stops
  when it has spent its budget and carries on from ``state``, frames and bounds when called
  again, so the caller can run a long search in bounded chunks (and Python can handle Ctrl-C
  between them).
* A transposition table is one 2-D array of one row per slot: the position's key
  (:data:`TABLE_KEY`, 0: empty) and the search's own data in the next columns.
* A kernel shared by several searches (the batch kernels, the resumable loop) is told which one
  to run by an argument ``search``: :data:`SEARCH_ONESTEP`, :data:`SEARCH_MINIMAX` or
  :data:`SEARCH_NEGAMAX`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from connectx_gym.bitboard import Geometry
from connectx_gym.deadline import check_deadline

# Columns of ``frames``: the position of the ply's node, the index of its next move to try (in
# the column order, or in its sorted move list), the length of that list and the best column so
# far (-1: none raised alpha). From FRAME_MOVES on, the sorting searches keep three runs of
# ``columns`` cells: the sorted columns, their sort keys, and the winning cells each move gives
# the mover (-1: not computed), which are the opponent's threats in the child.
FRAME_CURRENT = 0
FRAME_MASK = 1
FRAME_NEXT = 2
FRAME_COUNT = 3
FRAME_BEST = 4
FRAME_MOVES = 5
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
STAT_INTERRUPTIBLE = 6  # 1: read the clock through Python, which runs a pending Ctrl-C's handler
STAT_HALT = 7  # set to 1 by another thread: a search under a deadline stops as if it had passed
STAT_SIZE = 8

# Why an iterative deepening stopped: its depth limit (or the game's end) reached, a proven
# result, the clock (the next depth would most likely not finish, or the deadline passed).
STOPPED_LIMIT = 0
STOPPED_PROVEN = 1
STOPPED_TIME = 2

# Column of a transposition table row holding the key of the position stored there.
TABLE_KEY = 0


# The searches a shared kernel runs, given as its argument ``search`` (plain integers: a compiled
# function passed as a value would not be cached, and an enum member costs the searches time).
SEARCH_ONESTEP = 0  # the one-step lookahead: the heuristic after each move, no search
SEARCH_MINIMAX = 1  # the tutorials' minimax (connectx_baselines._minimax.evaluate)
SEARCH_NEGAMAX = 2  # the ConnectX notes' negamax (connectx_baselines._negamax.evaluate)


def center_order(columns: int) -> np.ndarray:
    """Columns from the centre outwards (left first on ties): a good alpha-beta move order."""
    center = (columns - 1) / 2
    return np.array(sorted(range(columns), key=lambda c: (abs(c - center), c)), dtype=np.int64)


def frame_width(columns: int) -> int:
    """Columns of a ``frames`` row on a board of ``columns`` columns."""
    return FRAME_MOVES + 3 * columns


def new_frames(depth: int, geometry: Geometry) -> tuple[np.ndarray, np.ndarray]:
    """Empty ``frames`` and ``bounds`` for a search ``depth`` plies deep on ``geometry``
    (``frames`` of Python integers when the board does not fit in 64 bits)."""
    dtype = np.int64 if geometry.fits_64_bits else object
    rows = depth + 1
    return np.zeros((rows, frame_width(geometry.columns)), dtype=dtype), np.zeros((rows, 3))


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
    ``KeyboardInterrupt`` stops a search within one chunk, and so does the thread's
    :func:`~connectx_gym.deadline.search_deadline` (a ``DeadlineExceededError``)."""
    check_deadline()
    state[STAT_BUDGET] = state[STAT_NODES] + chunk
    while not step():
        check_deadline()
        state[STAT_BUDGET] = state[STAT_NODES] + chunk


def restart(state: np.ndarray) -> np.ndarray:
    """``state`` made fresh again (nothing searched), for reuse by the next search."""
    state[STAT_NODES] = 0
    state[STAT_PLY] = -1
    state[STAT_ROOT] = 0
    return state
