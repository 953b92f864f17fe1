"""The one-step and minimax agents against the tutorials' grid code (tests/tutorial_reference.py):
same scores, same best columns, on many random positions and board sizes."""

from __future__ import annotations

import importlib
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines._layout import new_frames, new_state, run_in_chunks
from connectx_baselines.heuristic import MINIMAX_WEIGHTS
from connectx_baselines.lookahead import MinimaxPolicy, OneStepPolicy, center_order
from connectx_gym import Board, Geometry, make_policy
from connectx_gym._dims import dims
from connectx_gym._jit import jit_module
from connectx_gym.match import play_match
from tests.support import tutorial_reference as ref

seeds = st.integers(0, 2**32 - 1)


@settings(max_examples=120, deadline=None)
@given(size=st.sampled_from([*ref.SMALL_SIZES, ref.WORD_SIZE, ref.BIG_SIZE]), seed=seeds)
def test_onestep_matches_the_tutorial(size: tuple[int, int, int], seed: int) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    expected = ref.onestep_scores(board.to_array().astype(int), board.mark, geometry.inarow)
    policy = OneStepPolicy()
    np.testing.assert_array_equal(policy.scores(board), ref.as_array(expected, geometry.columns))
    best, _ = ref.best_set(expected)
    rng = np.random.default_rng(seed)
    assert {policy.act(board, rng) for _ in range(8)} <= best


# (board size, depth): the reference costs columns ** depth heuristic calls per position.
MINIMAX_CASES = [
    ((6, 7, 4), 3),
    ((6, 7, 4), 1),
    ((6, 7, 4), 2),
    ((4, 5, 3), 3),
    ((1, 7, 3), 4),
    ((7, 1, 3), 5),
    ((3, 3, 1), 2),
    ((2, 3, 5), 4),
    ((5, 4, 2), 3),
    (ref.WORD_SIZE, 3),
    (ref.BIG_SIZE, 2),
]


@pytest.mark.parametrize(("size", "depth"), MINIMAX_CASES)
@settings(max_examples=20, deadline=None)
@given(seed=seeds)
@pytest.mark.slow
def test_minimax_matches_the_tutorial(size: tuple[int, int, int], depth: int, seed: int) -> None:
    geometry = Geometry(*size)
    board = ref.random_board(geometry, seed)
    expected = ref.minimax_scores(board.to_array().astype(int), board.mark, geometry.inarow, depth)
    policy = MinimaxPolicy(depth=depth)
    np.testing.assert_array_equal(policy.scores(board), ref.as_array(expected, geometry.columns))
    best, best_score = ref.best_set(expected)
    columns, score = policy.best_columns(board)
    assert (set(columns), score) == (best, best_score)
    rng = np.random.default_rng(seed)
    chosen = {policy.act(board, rng) for _ in range(40)}
    assert chosen <= best
    if len(best) <= 3:
        assert chosen == best  # ties are broken at random, every best column comes up


@settings(max_examples=30, deadline=None)
@given(seed=seeds, depth=st.integers(1, 4), chunk=st.sampled_from([1, 7, 1 << 30]))
def test_compiled_and_plain_minimax_agree(seed: int, depth: int, chunk: int) -> None:
    """The compiled kernel in one call and the plain one resumed every ``chunk`` nodes agree."""
    geometry = Geometry(6, 7, 4)
    board = ref.random_board(geometry, seed)
    own, other = MINIMAX_WEIGHTS.arrays(4)
    order = center_order(7)
    results = []
    for module, nodes in (
        (jit_module("connectx_baselines._resumable"), 1 << 30),
        (importlib.import_module("connectx_baselines._resumable"), chunk),
    ):
        out = np.empty(7)
        frames, bounds = new_frames(depth, geometry)
        state = new_state()
        args = (board.current, board.mask, depth, True, own, other, order, dims(geometry), out)
        run_in_chunks(partial(module.minimax_run, *args, frames, bounds, state), state, nodes)
        results.append(out)
    np.testing.assert_array_equal(*results)


def test_seeded_games_repeat() -> None:
    first = play_match("minimax:depth=2", "onestep", games=4, seed=11)
    again = play_match("minimax:depth=2", "onestep", games=4, seed=11)
    other = play_match("minimax:depth=2", "onestep", games=4, seed=12)
    assert [r.moves for r in first.records] == [r.moves for r in again.records]
    assert [r.moves for r in first.records] != [r.moves for r in other.records]


def test_registry_specs() -> None:
    minimax = make_policy("minimax")
    assert isinstance(minimax, MinimaxPolicy)
    assert minimax.depth == 3
    assert make_policy("minimax:depth=5").depth == 5
    assert isinstance(make_policy("onestep"), OneStepPolicy)
    with pytest.raises(ValueError, match="does not take"):
        make_policy("minimax:depht=2")


@pytest.mark.parametrize("depth", [0, -1, 2.5, True])
def test_bad_depth(depth: object) -> None:
    with pytest.raises(ValueError, match="depth"):
        MinimaxPolicy(depth=depth)  # type: ignore[arg-type]


def test_game_over_boards() -> None:
    board = Board.from_moves(Geometry(6, 7, 4), [0, 1, 0, 1, 0, 1, 0])
    assert board.is_terminal()
    for policy in (OneStepPolicy(), MinimaxPolicy(2)):
        assert np.isnan(policy.scores(board)).all()
        with pytest.raises(ValueError, match="game is over"):
            policy.act(board, np.random.default_rng(0))


def test_scores_are_fresh_arrays() -> None:
    board = Board.from_moves(Geometry(6, 7, 4), [3, 3, 2])
    policy = MinimaxPolicy(2)
    first = policy.scores(board)
    kept = first.copy()
    first[:] = -7.0
    np.testing.assert_array_equal(policy.scores(board), kept)
