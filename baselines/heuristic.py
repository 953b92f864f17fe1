"""The window heuristic of Kaggle's "Intro to Game AI" tutorials, on bitboards.

A *window* is a run of ``inarow`` cells in a row, a column or either diagonal. The tutorials count
the windows that hold exactly ``k`` discs of one player with every other cell empty, and score a
position by a weighted sum of those counts for the agent and for its opponent, for example (the
one-step agent, ``inarow = 4``)::

    1e6 * own[4] + 1 * own[3] - 100 * opponent[3]

Here the counts come from shifts and popcounts of the bitboards (the layout of
:mod:`connectx_gym.bitboard`): for each direction, the windows free of the other player's discs
are an AND of shifted copies of the free cells, and adding ``inarow`` shifted copies of the
player's discs into bit-sliced counters (a sorting network beyond 15 in a row) gives how many
discs each holds. The kernels are compiled by numba through :func:`connectx_gym._jit.backend` for
boards of up to 64 bits and run on Python integers for larger ones.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from connectx_gym.bitboard import popcount

__all__ = [
    "MINIMAX_WEIGHTS",
    "ONESTEP_WEIGHTS",
    "WindowWeights",
    "count_windows",
    "window_score",
]


def _window_starts(cells: int, step: int, inarow: int, size: int) -> int:
    """Bits ``p`` such that ``p, p + step, ..., p + (inarow - 1) * step`` all lie in ``cells``."""
    starts = cells
    for i in range(1, inarow):
        shift = i * step
        if shift >= size:
            return 0
        starts &= cells >> shift
    return starts


def _sliced_counts(windows: int, player: int, step: int, inarow: int, size: int) -> tuple:
    """Per window start in ``windows``, the number of ``player``'s discs among its ``inarow``
    cells, as four bit-slices ``(ones, twos, fours, eights)`` (``inarow`` must be below 16)."""
    ones = twos = fours = eights = 0
    for i in range(inarow):
        shift = i * step
        carry = (player >> shift) & windows if shift < size else 0
        spill = ones & carry
        ones ^= carry
        carry = spill
        spill = twos & carry
        twos ^= carry
        carry = spill
        spill = fours & carry
        fours ^= carry
        eights ^= spill
    return ones, twos, fours, eights


def _add_window_counts(
    player: int,
    other: int,
    weights: np.ndarray,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> float:
    """Weighted sum over ``k`` of ``weights[k]`` times the windows with exactly ``k`` discs of
    ``player`` and the other cells empty, over the four directions."""
    top = inarow
    while top >= 0 and weights[top] == 0.0:
        top -= 1
    if top < 0:
        return 0.0
    free = board_bits & ~other
    total = 0.0
    for step in (1, height - 1, height, height + 1):
        windows = _window_starts(free, step, inarow, size)
        if windows == 0:
            continue
        if inarow < 16:
            ones, twos, fours, eights = _sliced_counts(windows, player, step, inarow, size)
            for k in range(top + 1):
                if weights[k] != 0.0:
                    exactly = windows
                    exactly &= ones if k & 1 else ~ones
                    exactly &= twos if k & 2 else ~twos
                    exactly &= fours if k & 4 else ~fours
                    exactly &= eights if k & 8 else ~eights
                    total += weights[k] * popcount(exactly)
        else:
            total += _add_long_window_counts(windows, player, weights, top, step, inarow, size)
    return total


def _add_long_window_counts(
    windows: int, player: int, weights: np.ndarray, top: int, step: int, inarow: int, size: int
) -> float:
    """:func:`_add_window_counts` for one direction, any ``inarow``: a sorting network whose
    ``at_least[j]`` holds the windows with at least ``j`` of the player's discs seen so far."""
    depth = min(top + 1, inarow)
    at_least = [0] * (depth + 1)
    at_least[0] = windows
    for i in range(inarow):
        shift = i * step
        cell = player >> shift if shift < size else 0
        for j in range(min(i + 1, depth), 0, -1):
            at_least[j] |= at_least[j - 1] & cell
    total = 0.0
    for k in range(top + 1):
        if weights[k] != 0.0:
            exactly = at_least[k] & ~at_least[k + 1] if k < depth else at_least[k]
            total += weights[k] * popcount(exactly)
    return total


def window_score(
    player: int,
    other: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> float:
    """The heuristic from ``player``'s point of view.

    ``own_weights[k]`` (``k = 0 .. inarow``) weighs the windows with exactly ``k`` of ``player``'s
    discs and the other cells empty, ``other_weights[k]`` the same for ``other``'s discs.
    ``board_bits`` is :attr:`connectx_gym.Geometry.board`.
    """
    score = _add_window_counts(player, other, own_weights, board_bits, height, inarow, size)
    return score + _add_window_counts(
        other, player, other_weights, board_bits, height, inarow, size
    )


def count_windows(
    player: int, other: int, k: int, board_bits: int, height: int, inarow: int, size: int
) -> int:
    """Number of windows with exactly ``k`` of ``player``'s discs and the other cells empty."""
    weights = np.zeros(inarow + 1, dtype=np.float64)
    weights[k] = 1.0
    return int(_add_window_counts(player, other, weights, board_bits, height, inarow, size))


class WindowWeights:
    """Weights of the window heuristic, by the number of discs in a window.

    ``own`` and ``opponent`` map a disc count ``k`` to the weight of the windows holding exactly
    ``k`` discs of the player (of the opponent) with the other cells empty. With
    ``relative=True`` (see :meth:`relative`) the keys count the discs a window *lacks*, so the
    same weights follow any ``inarow``.
    """

    __slots__ = ("_opponent", "_own", "_relative")

    def __init__(
        self,
        own: Mapping[int, float],
        opponent: Mapping[int, float],
        relative: bool = False,
    ) -> None:
        self._own = dict(own)
        self._opponent = dict(opponent)
        self._relative = relative

    @classmethod
    def relative(cls, own: Mapping[int, float], opponent: Mapping[int, float]) -> WindowWeights:
        """Weights keyed by how many discs a window lacks: ``{0: 1e6, 1: 1}`` weighs full windows
        (``inarow`` discs) by ``1e6`` and windows of ``inarow - 1`` discs by ``1``."""
        return cls(own, opponent, relative=True)

    def arrays(self, inarow: int) -> tuple[np.ndarray, np.ndarray]:
        """``(own, opponent)`` float64 arrays of length ``inarow + 1``, indexed by disc count.

        Counts outside ``0 .. inarow`` (possible for relative weights on small ``inarow``) are
        dropped, as the tutorials' code finds no such windows.
        """
        result = []
        for table in (self._own, self._opponent):
            array = np.zeros(inarow + 1, dtype=np.float64)
            for key, weight in table.items():
                count = inarow - key if self._relative else key
                if 0 <= count <= inarow:
                    array[count] += float(weight)
            result.append(array)
        return result[0], result[1]

    def __repr__(self) -> str:
        kind = "relative" if self._relative else "absolute"
        return f"WindowWeights({kind}, own={self._own}, opponent={self._opponent})"


#: The One-Step Lookahead tutorial: own-``inarow`` 1e6, own-(``inarow`` - 1) 1, opponent-(``inarow``
#: - 1) -100.
ONESTEP_WEIGHTS = WindowWeights.relative({0: 1e6, 1: 1.0}, {1: -100.0})

#: The N-Step Lookahead tutorial: as :data:`ONESTEP_WEIGHTS`, plus opponent-``inarow`` -1e4.
MINIMAX_WEIGHTS = WindowWeights.relative({0: 1e6, 1: 1.0}, {1: -100.0, 0: -1e4})
