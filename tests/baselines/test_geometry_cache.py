"""The per-board-size cache of the search policies: built once per geometry, reused, pickled."""

from __future__ import annotations

import copy
import pickle

import numpy as np

from connectx_baselines._geometry_cache import GeometryCache
from connectx_baselines._layout import center_order
from connectx_baselines.heuristic import MINIMAX_WEIGHTS
from connectx_gym import Board, Geometry, make_policy
from connectx_gym._dims import dims_arg


def test_one_entry_per_geometry_built_once() -> None:
    cache = GeometryCache("connectx_baselines._resumable", MINIMAX_WEIGHTS)
    small, large = Geometry(4, 5, 3), Geometry(6, 7, 4)
    entry = cache.get(small)
    assert cache.get(Geometry(4, 5, 3)) is entry
    assert cache.get(large) is not entry
    assert entry.kernels.module_name == "connectx_baselines._resumable"
    assert entry.kernels.geometry == small
    np.testing.assert_array_equal(entry.order, center_order(5))
    np.testing.assert_array_equal(np.asarray(entry.dims), np.asarray(dims_arg(small)))
    own, other = MINIMAX_WEIGHTS.arrays(3)
    np.testing.assert_array_equal(entry.own_weights, own)
    np.testing.assert_array_equal(entry.other_weights, other)


def test_without_weights_the_arrays_are_a_placeholder() -> None:
    entry = GeometryCache("connectx_baselines._resumable").get(Geometry(4, 5, 3))
    assert entry.own_weights.shape == entry.other_weights.shape == (1,)


def test_one_stack_per_geometry_and_depth() -> None:
    cache = GeometryCache("connectx_baselines._resumable")
    geometry = Geometry(4, 5, 3)
    stack = cache.stack(geometry, 3)
    assert cache.stack(geometry, 3) is stack
    deeper = cache.stack(geometry, 5)
    assert deeper is not stack
    assert len(deeper.frames) > len(stack.frames)
    assert cache.stack(Geometry(5, 5, 3), 3) is not stack


def test_a_policy_with_its_cache_pickles_and_copies_and_plays_the_same() -> None:
    board = Board.from_moves(Geometry(5, 6, 4), [2, 3, 2])
    for spec in ("onestep", "minimax:depth=3", "negamax:depth=3"):
        policy = make_policy(spec)
        scores = policy.scores(board)
        for twin in (pickle.loads(pickle.dumps(policy)), copy.deepcopy(policy)):
            np.testing.assert_array_equal(twin.scores(board), scores, err_msg=spec)
