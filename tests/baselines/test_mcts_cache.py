"""The search's cache of network answers (:class:`connectx_baselines._mcts_search.EvaluationCache`):
a game asks the network once a position, and what a search finds depends on its own game alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from connectx_baselines._mcts_search import EvaluationCache
from connectx_baselines.mcts import MCTSPolicy
from connectx_gym import Board, Geometry, make_policy


def counting(policy: MCTSPolicy, asked: list[bytes]) -> None:
    """Make ``policy`` note each position its network is asked about in ``asked``."""
    network = policy._evaluate

    def evaluate(planes: np.ndarray) -> Any:
        asked.extend(plane.tobytes() for plane in planes)
        return network(planes)

    policy._evaluate = evaluate  # type: ignore[method-assign]


def test_a_game_asks_the_network_once_a_position() -> None:
    policy = make_policy("mcts:net=ppo,simulations=48")
    assert isinstance(policy, MCTSPolicy)
    asked: list[bytes] = []
    counting(policy, asked)
    rng = np.random.default_rng(0)
    board, cached = Board.from_moves(Geometry(), [3, 2]), 0
    while not board.is_terminal() and board.moves < 20:
        board = board.play(policy.act(board, rng))
        cached += policy.last_info["cached"]
    assert len(asked) == len(set(asked))
    assert cached > 0  # each search after the first meets positions the last one asked about


@pytest.mark.parametrize(
    "before",
    [
        [1, 1, 1],  # another game
        [3, 3, 2, 4, 5],  # the same game a move later: the move taken back
    ],
)
def test_what_a_search_finds_does_not_depend_on_other_games(before: list[int]) -> None:
    position = Board.from_moves(Geometry(), [3, 3, 2, 4])
    fresh = make_policy("mcts:net=ppo,simulations=64")
    used = make_policy("mcts:net=ppo,simulations=64")
    assert isinstance(fresh, MCTSPolicy)
    assert isinstance(used, MCTSPolicy)
    used.scores(Board.from_moves(Geometry(), before), np.random.default_rng(1))
    expected = fresh.scores(position, np.random.default_rng(0))
    np.testing.assert_array_equal(used.scores(position, np.random.default_rng(0)), expected)
    assert used.last_info["cached"] == 0


def test_searching_a_position_again_gives_the_same_visits_from_the_cache() -> None:
    policy = make_policy("mcts:net=ppo,simulations=64")
    assert isinstance(policy, MCTSPolicy)
    position = Board.from_moves(Geometry(), [3, 3, 2])
    first = policy.scores(position, np.random.default_rng(0))
    asked: list[bytes] = []
    counting(policy, asked)  # another evaluator: the cache starts again
    np.testing.assert_array_equal(policy.scores(position, np.random.default_rng(0)), first)
    np.testing.assert_array_equal(policy.scores(position, np.random.default_rng(0)), first)
    assert policy.last_info["cached"] > 0
    assert len(asked) == len(set(asked))


def no_network(planes: np.ndarray) -> Any:
    raise AssertionError("not called")


def other_network(planes: np.ndarray) -> Any:
    raise AssertionError("not called")


def held(cache: EvaluationCache, key: tuple[int, int]) -> np.ndarray | None:
    logits, values = np.zeros((1, 3)), np.zeros(1)
    if cache.look_up([key], logits, values):
        return None
    return np.append(logits[0], values[0])


def test_the_cache_returns_what_it_was_given_and_empties_when_full() -> None:
    cache = EvaluationCache(columns=3, capacity=2)
    cache.store([(1, 1), (2, 3)], np.array([[1.0, 2, 3], [4, 5, 6]]), np.array([0.5, -0.5]))
    np.testing.assert_array_equal(held(cache, (2, 3)), [4, 5, 6, -0.5])
    np.testing.assert_array_equal(held(cache, (1, 1)), [1, 2, 3, 0.5])
    assert cache.hits == 2
    cache.store([(1, 1)], np.array([[7.0, 8, 9]]), np.array([0.25]))  # held: replaced in place
    np.testing.assert_array_equal(held(cache, (1, 1)), [7, 8, 9, 0.25])
    cache.store([(5, 7)], np.zeros((1, 3)), np.zeros(1))  # full: emptied first
    assert len(cache) == 1
    assert held(cache, (1, 1)) is None
    assert held(cache, (5, 7)) is not None


def follow_moves(
    cache: EvaluationCache, moves: list[int], evaluate: Callable[..., Any], mirror: bool = False
) -> None:
    board = Board.from_moves(Geometry(), moves)
    cache.follow(board.current, board.mask, board.moves, evaluate, True, mirror)


@pytest.mark.parametrize(
    ("later", "evaluate", "kept"),
    [
        ([3, 3, 2, 4], no_network, True),  # the same position
        ([3, 3, 2, 4, 1, 1], no_network, True),  # later in the same game
        ([3, 3, 2], no_network, False),  # a move taken back
        ([3, 3, 4, 2, 1], no_network, False),  # the same columns, the stones swapped
        ([2, 3, 3, 4, 1], no_network, False),  # the same cells, other owners
        ([1, 1], no_network, False),  # another game
        ([3, 3, 2, 4, 1, 1], other_network, False),  # another evaluator
    ],
)
def test_the_cache_is_kept_only_along_one_game_and_one_evaluator(
    later: list[int], evaluate: Callable[..., Any], kept: bool
) -> None:
    cache = EvaluationCache(columns=7)
    follow_moves(cache, [3, 3, 2, 4], no_network)
    cache.store([(1, 2)], np.zeros((1, 7)), np.zeros(1))
    follow_moves(cache, later, evaluate)
    assert (len(cache) == 1) is kept


def test_answers_with_mirror_images_are_not_kept_for_a_search_without() -> None:
    cache = EvaluationCache(columns=7)
    follow_moves(cache, [3, 3, 2, 4], no_network, mirror=True)
    cache.store([(1, 2)], np.zeros((1, 7)), np.zeros(1))
    follow_moves(cache, [3, 3, 2, 4, 1, 1], no_network, mirror=True)
    assert len(cache) == 1
    follow_moves(cache, [3, 3, 2, 4, 1, 1, 5], no_network, mirror=False)
    assert len(cache) == 0
