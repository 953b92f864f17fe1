"""The bitboard window heuristic against the tutorials' grid code (tests/tutorial_reference.py)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines.heuristic import (
    MINIMAX_WEIGHTS,
    ONESTEP_WEIGHTS,
    WindowWeights,
    count_windows,
)
from connectx_gym import Board, Geometry
from connectx_gym._jit import backend
from connectx_gym.bitboard import popcount
from tests.support import tutorial_reference as ref

# Plus lines of 16 and more (counted by the sorting network instead of the 4-bit counters), one
# of them beyond 64 bits.
ALL_SIZES = [
    *ref.SMALL_SIZES,
    ref.WORD_SIZE,
    ref.BIG_SIZE,
    (1, 20, 16),
    (18, 1, 17),
    (1, 40, 16),
    (3, 18, 15),
]
seeds = st.integers(0, 2**32 - 1)


def kernel_args(geometry: Geometry) -> tuple[int, int, int, int]:
    return geometry.board, geometry.height, geometry.inarow, geometry.size


@settings(max_examples=150, deadline=None)
@given(size=st.sampled_from(ALL_SIZES), seed=seeds)
def test_count_windows_matches_the_tutorial(size: tuple[int, int, int], seed: int) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    grid = board.to_array().astype(int)
    kernels = backend("connectx_baselines.heuristic", geometry)
    for player, other, mark in (
        (board.current, board.opponent, board.mark),
        (board.opponent, board.current, 3 - board.mark),
    ):
        for k in range(geometry.inarow + 1):
            expected = ref.count_windows(grid, k, mark, geometry.inarow)
            assert kernels.count_windows(player, other, k, *kernel_args(geometry)) == expected


@settings(max_examples=100, deadline=None)
@given(
    size=st.sampled_from(ALL_SIZES),
    seed=seeds,
    own=st.dictionaries(st.integers(0, 5), st.integers(-1000, 1000), max_size=4),
    opponent=st.dictionaries(st.integers(0, 5), st.integers(-1000, 1000), max_size=4),
)
def test_weighted_score_matches_the_tutorial(
    size: tuple[int, int, int], seed: int, own: dict, opponent: dict
) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    grid = board.to_array().astype(int)
    own_array, opponent_array = WindowWeights(own, opponent).arrays(geometry.inarow)
    kernels = backend("connectx_baselines.heuristic", geometry)
    score = kernels.window_score(
        board.current, board.opponent, own_array, opponent_array, *kernel_args(geometry)
    )
    in_range = geometry.inarow + 1
    expected = ref.weighted_heuristic(
        grid,
        board.mark,
        geometry.inarow,
        {k: w for k, w in own.items() if k < in_range},
        {k: w for k, w in opponent.items() if k < in_range},
    )
    assert score == expected


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from(ref.SMALL_SIZES), seed=seeds)
def test_tutorial_weights_give_the_tutorial_heuristics(
    size: tuple[int, int, int], seed: int
) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    grid = board.to_array().astype(int)
    kernels = backend("connectx_baselines.heuristic", geometry)
    for weights, reference in (
        (ONESTEP_WEIGHTS, ref.onestep_heuristic),
        (MINIMAX_WEIGHTS, ref.minimax_heuristic),
    ):
        own, other = weights.arrays(geometry.inarow)
        score = kernels.window_score(
            board.current, board.opponent, own, other, *kernel_args(geometry)
        )
        assert score == reference(grid, board.mark, geometry.inarow)


@settings(max_examples=40, deadline=None)
@given(seed=seeds)
def test_compiled_and_plain_backends_agree(seed: int) -> None:
    geometry = Geometry(6, 7, 4)
    board = ref.random_board(geometry, seed)
    compiled = backend("connectx_baselines.heuristic", geometry)
    plain = importlib.import_module("connectx_baselines.heuristic")
    assert compiled is not plain
    own, other = WindowWeights({1: 3.0, 2: 5.0, 4: 7.0}, {0: -1.0, 3: -11.0}).arrays(4)
    args = (board.current, board.opponent, own, other, *kernel_args(geometry))
    assert compiled.window_score(*args) == plain.window_score(*args)


def test_relative_weights_follow_inarow() -> None:
    own, other = ONESTEP_WEIGHTS.arrays(4)
    np.testing.assert_array_equal(own, [0, 0, 0, 1, 1e6])
    np.testing.assert_array_equal(other, [0, 0, 0, -100, 0])
    own, other = MINIMAX_WEIGHTS.arrays(2)
    np.testing.assert_array_equal(own, [0, 1, 1e6])
    np.testing.assert_array_equal(other, [0, -100, -1e4])
    # inarow 1: "inarow - 1" is zero discs, the empty windows.
    own, _ = ONESTEP_WEIGHTS.arrays(1)
    np.testing.assert_array_equal(own, [1, 1e6])


def test_hand_counted_windows() -> None:
    # X X X . on the bottom row, O O on top of the first two X.
    board = Board.from_moves(Geometry(6, 7, 4), [0, 0, 1, 1, 2])
    g = board.geometry
    x, o = board.opponent, board.current
    # Windows with three X and an empty cell: bottom row 0-3 only.
    assert count_windows(x, o, 3, *kernel_args(g)) == 1
    # Windows with exactly two O and two empty cells: row 1, columns 0-3 only.
    assert count_windows(o, x, 2, *kernel_args(g)) == 1
    # One O and three empty cells: row 1 (columns 1-4), columns 0 and 1 (rows 1-4), and the
    # rising diagonals from each O.
    assert count_windows(o, x, 1, *kernel_args(g)) == 5
    assert count_windows(x, o, 4, *kernel_args(g)) == 0


@pytest.mark.parametrize("bits", [0, 1, 0b1011, (1 << 62) - 1, (1 << 130) + 5])
def test_popcount(bits: int) -> None:
    assert popcount(bits) == bin(bits).count("1")
