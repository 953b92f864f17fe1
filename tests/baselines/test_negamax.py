"""The negamax agent against the ConnectX notes' recursion written on grids in
tests/tutorial_reference.py: same per-column scores on many random positions and board sizes."""

from __future__ import annotations

import importlib
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines._layout import new_frames, new_state, run_in_chunks
from connectx_baselines.lookahead import center_order
from connectx_baselines.negamax import NegamaxPolicy
from connectx_gym import Board, Geometry, make_policy
from connectx_gym._dims import dims
from connectx_gym._jit import jit_module
from tests.support import tutorial_reference as ref

seeds = st.integers(0, 2**32 - 1)

NEGAMAX_CASES = [
    ((6, 7, 4), 4),
    ((6, 7, 4), 1),
    ((6, 7, 4), 2),
    ((4, 5, 3), 5),
    ((1, 7, 3), 6),
    ((7, 1, 3), 4),
    ((3, 3, 1), 3),
    ((2, 3, 5), 4),
    ((5, 4, 2), 4),
    (ref.WORD_SIZE, 3),
    (ref.BIG_SIZE, 3),
]


@pytest.mark.parametrize(("size", "depth"), NEGAMAX_CASES)
@settings(max_examples=20, deadline=None)
@given(seed=seeds)
@pytest.mark.slow
def test_negamax_matches_the_notes(size: tuple[int, int, int], depth: int, seed: int) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    expected = ref.negamax_scores(board.to_array().astype(int), board.mark, geometry.inarow, depth)
    policy = NegamaxPolicy(depth=depth)
    np.testing.assert_array_equal(policy.scores(board), ref.as_array(expected, geometry.columns))
    best, _ = ref.best_set(expected)
    rng = np.random.default_rng(seed)
    assert {policy.act(board, rng) for _ in range(8)} <= best


@settings(max_examples=30, deadline=None)
@given(seed=seeds, depth=st.integers(1, 6), chunk=st.sampled_from([1, 5, 1 << 30]))
@pytest.mark.slow
def test_compiled_and_plain_negamax_agree(seed: int, depth: int, chunk: int) -> None:
    """The compiled kernel in one call and the plain one resumed every ``chunk`` nodes agree."""
    geometry = Geometry(6, 7, 4)
    board = ref.random_board(geometry, seed)
    results = []
    for module, nodes in (
        (jit_module("connectx_baselines._resumable"), 1 << 30),
        (importlib.import_module("connectx_baselines._resumable"), chunk),
    ):
        out = np.empty(7)
        frames, bounds = new_frames(depth, geometry)
        state = new_state()
        args = (board.current, board.mask, depth, center_order(7), dims(geometry), out)
        run_in_chunks(partial(module.negamax_run, *args, frames, bounds, state), state, nodes)
        results.append(out)
    np.testing.assert_array_equal(*results)


def test_sees_a_forced_win_within_its_horizon() -> None:
    # X to move: X X . on the bottom row with both ends open, a win in three plies
    # whatever O does (the notes' value is 1 from depth 3 on).
    board = Board.from_moves(Geometry(6, 7, 4), [2, 2, 3, 3])
    assert board.mark == 1
    scores = NegamaxPolicy(depth=3).scores(board)
    assert scores[1] == 1
    assert scores[4] == 1
    assert (NegamaxPolicy(depth=2).scores(board)[[1, 4]] == 0).all()


def test_registry_default_depth() -> None:
    policy = make_policy("negamax")
    assert isinstance(policy, NegamaxPolicy)
    assert policy.depth == 4
    assert make_policy("negamax:depth=2").depth == 2


@pytest.mark.parametrize("depth", [0, 1.5, None])
def test_bad_depth(depth: object) -> None:
    with pytest.raises(ValueError, match="depth"):
        NegamaxPolicy(depth=depth)  # type: ignore[arg-type]
