"""Kernels of the batched env: loops over boards built on the rules of :mod:`connectx_gym.bitboard`.

Each board ``i`` is two integers, as in :mod:`connectx_gym.bitboard`: ``agent[i]`` holds the
agent's stones and ``mask[i]`` every stone (the opponent's stones are ``agent[i] ^ mask[i]``), in
Pons' layout (bit ``column * height + h``, a sentinel bit on top of each column). ``winner[i]`` is
-1 while the game goes on, then 0 (draw) or the winning mark.

The functions are plain Python on integer arrays. :func:`for_geometry` gives them
compiled by numba (``int64`` arrays) when the board fits in 64 bits, the win check being the very
:func:`~connectx_gym.bitboard.has_line` compiled for the single env, and as they are on ``object``
arrays of Python integers for larger boards. ``dims`` is the geometry's
:class:`~connectx_gym._dims.Dims` (or its array, :func:`~connectx_gym._dims.dims_arg`).

The kernels run on one thread: a step is a few short kernel calls, and starting numba's threads
costs more than these loops (measured: ``benchmarks/bench_vector.py``). The searching opponents,
whose work per board is long, spread their boards over the cores themselves.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from connectx_gym._dims import as_dims
from connectx_gym._jit import jit_module
from connectx_gym.bitboard import column_mask, has_line, popcount, possible_moves, winning_cells

if TYPE_CHECKING:
    from connectx_gym._dims import DimsArg


def compiled() -> ModuleType:
    """The numba-compiled copy of this module (:func:`connectx_gym._jit.jit_module`), whose
    kernels call the compiled :func:`has_line` of the single env (the very same dispatcher)."""
    return jit_module(__name__)


def drop_stone(
    agent: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    agent_mark: np.ndarray,
    winner: np.ndarray,
    rewards: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    i: int,
    column: int,
    by_agent: bool,
    dims: DimsArg,
) -> None:
    """Drop a stone in ``column`` (legal: checked by the caller) on board ``i``, for the agent
    (``by_agent``) or its opponent; end the game on a line (``winner`` the mover's mark,
    ``rewards[i]`` +1 or -1 for the agent) or on a full board (``winner`` 0). The observation
    ``planes`` and the ``legal`` mask are updated in place: one cell, and the column when it fills
    (every column when the game ends). Nobody has ``inarow`` stones before ply
    ``2 * inarow - 1``."""
    d = as_dims(dims)
    height, rows = d.height, d.height - 1
    base = column * height
    filled = (mask[i] >> base) & ((1 << (height - 1)) - 1)  # the column's stones, from bit 0
    level = 0
    while filled:
        filled >>= 1
        level += 1
    bit = 1 << (base + level)
    board_mask = mask[i] | bit
    mask[i] = board_mask
    if by_agent:
        stones = agent[i] | bit
        agent[i] = stones
        mark = agent_mark[i]
        planes[i, 0, rows - 1 - level, column] = 1
    else:
        stones = agent[i] ^ board_mask
        mark = 3 - agent_mark[i]
        planes[i, 1, rows - 1 - level, column] = 1
    if level == rows - 1:
        legal[i, column] = 0
    played = moves[i] + 1
    moves[i] = played
    if played >= 2 * d.inarow - 1 and has_line(stones, height, d.inarow, d.size):
        winner[i] = mark
        rewards[i] = 1.0 if by_agent else -1.0
        legal[i, :] = 0
    elif played == d.cells:
        winner[i] = 0
        legal[i, :] = 0


def play_columns(
    agent: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    agent_mark: np.ndarray,
    winner: np.ndarray,
    rewards: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    boards: np.ndarray,
    columns: np.ndarray,
    by_agent: bool,
    dims: DimsArg,
) -> None:
    """:func:`drop_stone` in ``columns[k]`` on board ``boards[k]`` for every ``k``."""
    d = as_dims(dims)
    for k in range(boards.shape[0]):
        drop_stone(
            agent, mask, moves, agent_mark, winner, rewards, planes, legal, boards[k],
            int(columns[k]), by_agent, d,
        )  # fmt: skip


def agent_moves(
    agent: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    agent_mark: np.ndarray,
    winner: np.ndarray,
    rewards: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    opening_ended: np.ndarray,
    columns: np.ndarray,
    illegal: np.ndarray,
    reply: np.ndarray,
    only_check: bool,
    dims: DimsArg,
) -> int:
    """The agent's move ``columns[i]`` on every board ``i``; returns the number of illegal ones
    (off the board or full), flagged in ``illegal``. With ``only_check`` and an illegal move,
    nothing changes. Otherwise an illegal move loses (``winner`` the opponent's mark, reward -1),
    a board whose opponent's opening ended the game reports its end (reward -1 on a loss), legal
    moves are played, and ``reply[i]`` says whether the opponent moves next."""
    d = as_dims(dims)
    count = 0
    n = columns.shape[0]
    width = legal.shape[1]
    for i in range(n):
        column = columns[i]
        bad = not opening_ended[i] and (column < 0 or column >= width or legal[i, column] == 0)
        illegal[i] = bad
        count += bad
    if only_check and count > 0:
        return count
    for i in range(n):
        if opening_ended[i]:
            opening_ended[i] = False
            if winner[i] == 3 - agent_mark[i]:
                rewards[i] = -1.0
        elif illegal[i]:
            winner[i] = 3 - agent_mark[i]
            rewards[i] = -1.0
            legal[i, :] = 0
        else:
            drop_stone(
                agent, mask, moves, agent_mark, winner, rewards, planes, legal, i,
                int(columns[i]), True, d,
            )  # fmt: skip
            reply[i] = winner[i] < 0
    return count


def legal_masks(mask: np.ndarray, winner: np.ndarray, dims: DimsArg, out: np.ndarray) -> None:
    """``out[i, c]`` = 1 when column ``c`` of board ``i`` is open and the game goes on, else 0."""
    d = as_dims(dims)
    height, rows, columns = d.height, d.height - 1, d.columns
    for i in range(mask.shape[0]):
        playing = winner[i] < 0
        for c in range(columns):
            top = (mask[i] >> (c * height + rows - 1)) & 1
            out[i, c] = 1 if playing and top == 0 else 0


def write_planes(
    agent: np.ndarray, mask: np.ndarray, boards: np.ndarray, dims: DimsArg, out: np.ndarray
) -> None:
    """``out[i]`` = the ``(2, rows, columns)`` planes of board ``i`` for each ``i`` in ``boards``:
    plane 0 the agent's stones, plane 1 the opponent's, row 0 at the top."""
    d = as_dims(dims)
    height, rows, columns = d.height, d.height - 1, d.columns
    for k in range(boards.shape[0]):
        i = boards[k]
        mine = agent[i]
        theirs = agent[i] ^ mask[i]
        for c in range(columns):
            for r in range(rows):
                bit = c * height + rows - 1 - r
                out[i, 0, r, c] = (mine >> bit) & 1
                out[i, 1, r, c] = (theirs >> bit) & 1


def random_columns(
    mask: np.ndarray,
    boards: np.ndarray,
    uniforms: np.ndarray,
    dims: DimsArg,
    out: np.ndarray,
) -> None:
    """``out[k]``: the open column of board ``boards[k]`` at index ``int(uniforms[k] * open)``
    among its open ones, as :class:`~connectx_gym.policy.RandomPolicy` picks it."""
    d = as_dims(dims)
    height, rows, columns = d.height, d.height - 1, d.columns
    for k in range(boards.shape[0]):
        board_mask = mask[boards[k]]
        count = 0
        for c in range(columns):
            if (board_mask >> (c * height + rows - 1)) & 1 == 0:
                count += 1
        chosen = int(uniforms[k] * count)
        out[k] = -1
        for c in range(columns):
            if (board_mask >> (c * height + rows - 1)) & 1 == 0:
                if chosen == 0:
                    out[k] = c
                    break
                chosen -= 1


def random_quiet_columns(
    agent: np.ndarray,
    mask: np.ndarray,
    boards: np.ndarray,
    uniforms: np.ndarray,
    by_agent: np.ndarray,
    dims: DimsArg,
    out: np.ndarray,
) -> None:
    """``out[k]``: as :func:`random_columns`, among the open columns of board ``boards[k]`` where
    a stone of its mover (the agent where ``by_agent[k]``) completes no line; -1 when every open
    column does. Where no column can win, the same column as :func:`random_columns`."""
    d = as_dims(dims)
    for k in range(boards.shape[0]):
        i = boards[k]
        stones = agent[i] if by_agent[k] else agent[i] ^ mask[i]
        possible = possible_moves(mask[i], d.bottom, d.board)
        quiet = possible & ~winning_cells(stones, possible, d.height, d.inarow, d.size)
        chosen = int(uniforms[k] * popcount(quiet))
        out[k] = -1
        for c in range(d.columns):
            if quiet & column_mask(c, d.height):
                if chosen == 0:
                    out[k] = c
                    break
                chosen -= 1


def random_replies(
    agent: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    agent_mark: np.ndarray,
    winner: np.ndarray,
    rewards: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    boards: np.ndarray,
    uniforms: np.ndarray,
    played: np.ndarray,
    dims: DimsArg,
) -> None:
    """A random opponent's move on each board of ``boards`` (:func:`random_columns` then
    :func:`drop_stone`, in one pass); ``played[i]`` gets the column."""
    d = as_dims(dims)
    picked = np.empty(1, dtype=np.int64)
    for k in range(boards.shape[0]):
        random_columns(mask, boards[k : k + 1], uniforms[k : k + 1], d, picked)
        played[boards[k]] = picked[0]
        drop_stone(
            agent, mask, moves, agent_mark, winner, rewards, planes, legal, boards[k],
            int(picked[0]), False, d,
        )  # fmt: skip


def clear_boards(
    agent: np.ndarray,
    mask: np.ndarray,
    moves: np.ndarray,
    winner: np.ndarray,
    planes: np.ndarray,
    legal: np.ndarray,
    boards: np.ndarray,
) -> None:
    """Empty the boards ``boards`` for a new game (planes cleared, every column legal)."""
    for k in range(boards.shape[0]):
        i = boards[k]
        agent[i] = 0
        mask[i] = 0
        moves[i] = 0
        winner[i] = -1
        planes[i] = 0
        legal[i] = 1


def for_geometry(fits_64_bits: bool) -> ModuleType:
    """The compiled kernels for boards of up to 64 bits, else this module on Python integers."""
    if fits_64_bits:
        return compiled()
    return importlib.import_module(__name__)
