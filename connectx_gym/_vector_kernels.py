"""Kernels of the batched env: loops over boards built on the rules of :mod:`connectx_gym.bitboard`.

Each board ``i`` is two integers, as in :mod:`connectx_gym.bitboard`: ``agent[i]`` holds the
agent's stones and ``mask[i]`` every stone (the opponent's stones are ``agent[i] ^ mask[i]``), in
Pons' layout (bit ``column * height + h``, a sentinel bit on top of each column). ``winner[i]`` is
-1 while the game goes on, then 0 (draw) or the winning mark.

The functions are plain Python on integer arrays. :func:`connectx_gym.vector.kernels` runs them
compiled by numba (``int64`` arrays, ``prange`` over boards) when the board fits in 64 bits, the
win check being the very :func:`~connectx_gym.bitboard.has_line` compiled for the single env, and
as they are on ``object`` arrays of Python integers for larger boards.
"""

from __future__ import annotations

import importlib.util
import sys
from types import FunctionType, ModuleType

import numpy as np
from numba import prange

from connectx_gym._jit import jit
from connectx_gym.bitboard import has_line

KERNELS = (
    "drop_stone",
    "play_columns",
    "agent_moves",
    "legal_masks",
    "write_planes",
    "random_columns",
    "random_replies",
    "clear_boards",
)
#: Compile with ``parallel=True``: ``prange`` spreads the boards of a kernel over numba's threads.
PARALLEL = False
_compiled: list[ModuleType] = []


def compiled() -> ModuleType:
    """A second copy of this module whose kernels are numba-compiled and call the compiled
    :func:`has_line` of the single env (the very same dispatcher)."""
    if not _compiled:
        import numba

        spec = importlib.util.spec_from_file_location(f"{__name__}.__jit__", __file__)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module.__name__] = module  # numba's cache finds the module by name
        spec.loader.exec_module(module)
        module.has_line = jit(has_line)
        for name in KERNELS:
            function: FunctionType = getattr(module, name)
            setattr(module, name, numba.njit(cache=True, parallel=PARALLEL)(function))
        _compiled.append(module)
    return _compiled[0]


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
    rows: int,
    height: int,
    inarow: int,
    size: int,
    cells: int,
) -> None:
    """Drop a stone in ``column`` (legal: checked by the caller) on board ``i``, for the agent
    (``by_agent``) or its opponent; end the game on a line (``winner`` the mover's mark,
    ``rewards[i]`` +1 or -1 for the agent) or on a full board (``winner`` 0). The observation
    ``planes`` and the ``legal`` mask are updated in place: one cell, and the column when it fills
    (every column when the game ends). Nobody has ``inarow`` stones before ply
    ``2 * inarow - 1``."""
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
    if played >= 2 * inarow - 1 and has_line(stones, height, inarow, size):
        winner[i] = mark
        rewards[i] = 1.0 if by_agent else -1.0
        legal[i, :] = 0
    elif played == cells:
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
    rows: int,
    height: int,
    inarow: int,
    size: int,
    cells: int,
) -> None:
    """:func:`drop_stone` in ``columns[k]`` on board ``boards[k]`` for every ``k``."""
    for k in prange(boards.shape[0]):
        drop_stone(
            agent, mask, moves, agent_mark, winner, rewards, planes, legal, boards[k],
            int(columns[k]), by_agent, rows, height, inarow, size, cells,
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
    rows: int,
    height: int,
    inarow: int,
    size: int,
    cells: int,
) -> int:
    """The agent's move ``columns[i]`` on every board ``i``; returns the number of illegal ones
    (off the board or full), flagged in ``illegal``. With ``only_check`` and an illegal move,
    nothing changes. Otherwise an illegal move loses (``winner`` the opponent's mark, reward -1),
    a board whose opponent's opening ended the game reports its end (reward -1 on a loss), legal
    moves are played, and ``reply[i]`` says whether the opponent moves next."""
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
                int(columns[i]), True, rows, height, inarow, size, cells,
            )  # fmt: skip
            reply[i] = winner[i] < 0
    return count


def legal_masks(
    mask: np.ndarray, winner: np.ndarray, rows: int, height: int, out: np.ndarray
) -> None:
    """``out[i, c]`` = 1 when column ``c`` of board ``i`` is open and the game goes on, else 0."""
    columns = out.shape[1]
    for i in prange(mask.shape[0]):
        playing = winner[i] < 0
        for c in range(columns):
            top = (mask[i] >> (c * height + rows - 1)) & 1
            out[i, c] = 1 if playing and top == 0 else 0


def write_planes(
    agent: np.ndarray, mask: np.ndarray, boards: np.ndarray, rows: int, height: int, out: np.ndarray
) -> None:
    """``out[i]`` = the ``(2, rows, columns)`` planes of board ``i`` for each ``i`` in ``boards``:
    plane 0 the agent's stones, plane 1 the opponent's, row 0 at the top."""
    columns = out.shape[3]
    for k in prange(boards.shape[0]):
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
    rows: int,
    height: int,
    columns: int,
    out: np.ndarray,
) -> None:
    """``out[k]``: the open column of board ``boards[k]`` at index ``int(uniforms[k] * open)``
    among its open ones, as :class:`~connectx_gym.policy.RandomPolicy` picks it."""
    for k in prange(boards.shape[0]):
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
    rows: int,
    height: int,
    inarow: int,
    size: int,
    cells: int,
) -> None:
    """A random opponent's move on each board of ``boards`` (:func:`random_columns` then
    :func:`drop_stone`, in one pass); ``played[i]`` gets the column."""
    columns = legal.shape[1]
    picked = np.empty(1, dtype=np.int64)
    for k in range(boards.shape[0]):
        random_columns(mask, boards[k : k + 1], uniforms[k : k + 1], rows, height, columns, picked)
        played[boards[k]] = picked[0]
        drop_stone(
            agent, mask, moves, agent_mark, winner, rewards, planes, legal, boards[k],
            int(picked[0]), False, rows, height, inarow, size, cells,
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
    for k in prange(boards.shape[0]):
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
    return sys.modules[__name__]
