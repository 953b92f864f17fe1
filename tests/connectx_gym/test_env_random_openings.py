"""``opening_plies``: games of ``ConnectX-v0`` and the batched env that start after random stones.

Every start is checked against an obvious reference (stones fall to the bottom, the marks alternate
from mark 1, nobody has a line, the agent is to move); the number of stones follows the documented
distribution; the seed fixes it; bad values are refused with the bound in the message.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_gym import Geometry
from connectx_gym.bitboard import Board
from connectx_gym.env import ConnectXEnv, check_opening_plies, quiet_random_column
from connectx_gym.vector import ConnectXVectorEnv
from connectx_train.config import TrainConfig

SIZES = [(6, 7, 4), (4, 5, 3), (3, 3, 2), (7, 8, 5), (2, 2, 2)]


def most_plies(rows: int, columns: int, inarow: int) -> int:
    return 0 if inarow == 1 else max(0, rows * columns - 2)


def check_start(planes: np.ndarray, agent_mark: int, inarow: int) -> int:
    """The position in ``planes`` (agent's stones, then the opponent's; row 0 at the top) is one
    a game reaches with the agent to move and nobody's line; returns its number of stones."""
    rows, columns = planes.shape[1:]
    assert set(np.unique(planes)) <= {0, 1}
    assert not (planes[0] & planes[1]).any()
    filled = planes[0] | planes[1]
    for c in range(columns):  # no stone floats: each column is filled from the bottom
        height = int(filled[:, c].sum())
        assert filled[rows - height :, c].all()
    own, other = int(planes[0].sum()), int(planes[1].sum())
    stones = own + other
    to_move = 1 + stones % 2  # mark 1 has moved as often as mark 2, or once more
    assert to_move == agent_mark
    first, second = (own, other) if agent_mark == 1 else (other, own)
    assert first - second == stones % 2
    geometry = Geometry(rows, columns, inarow)
    for plane in planes:  # the same stones as Board bits: column-major, bottom row first
        bits = 0
        for c in range(columns):
            for r in range(rows):
                if plane[rows - 1 - r, c]:
                    bits |= 1 << (c * geometry.height + r)
        assert not geometry.has_line(bits)
    return stones


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from(SIZES), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_single_env_starts_from_a_reachable_open_position(size, data, seed):
    plies = data.draw(st.integers(0, most_plies(*size)))
    env = ConnectXEnv(*size, opening_plies=plies)
    obs, info = env.reset(seed=seed)
    stones = check_start(obs, info["agent_mark"], size[2])
    assert stones <= plies + 1  # the opening, then perhaps the opponent's move
    np.testing.assert_array_equal(info["action_mask"], (obs[0] | obs[1])[0] == 0)
    np.testing.assert_array_equal(env.action_masks(), (obs[0] | obs[1])[0] == 0)


def test_single_env_draws_every_length_from_the_seed():
    env = ConnectXEnv(opening_plies=4, agent_mark=1)
    counts = np.bincount([env.reset(seed=s)[0].sum() for s in range(500)], minlength=5)
    # the agent (mark 1) moves after 0, 2 or 4 stones; after 1 or 3 the opponent answers first
    assert counts[[1, 3]].sum() == 0
    assert counts[0] > 50
    assert counts[2] > 150
    assert counts[4] > 150
    again = [env.reset(seed=s)[0].tobytes() for s in range(50)]
    assert again == [env.reset(seed=s)[0].tobytes() for s in range(50)]
    assert len(set(again)) > 30


def test_single_env_opening_then_whole_games_follow_the_rules():
    env = ConnectXEnv(opening_plies=5, opponent="minimax:depth=1")
    rng = np.random.default_rng(0)
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        check_start(obs, info["agent_mark"], 4)
        done = False
        while not done:
            column = int(rng.choice(np.flatnonzero(env.action_masks())))
            obs, reward, done, _, info = env.step(column)
        winner = info["winner"]
        assert reward == (1.0 if winner == info["agent_mark"] else -1.0 if winner else 0.0)


@pytest.mark.parametrize("size", SIZES)
def test_batched_env_starts_every_board_from_a_reachable_open_position(size):
    plies = most_plies(*size)
    venv = ConnectXVectorEnv(num_envs=300, rows=size[0], columns=size[1], inarow=size[2],
                             opening_plies=plies)  # fmt: skip
    obs, info = venv.reset(seed=5)
    stones = [check_start(obs[i], int(info["agent_mark"][i]), size[2]) for i in range(300)]
    assert max(stones) >= plies - 1  # one fewer where the drawn length leaves the opponent to move
    assert min(stones) <= 1
    np.testing.assert_array_equal(venv.action_masks(), (obs[:, 0] | obs[:, 1])[:, 0] == 0)
    rng = np.random.default_rng(1)
    for _ in range(40):  # games end and restart from new openings on every board
        masks = venv.action_masks()
        obs, rewards, terminated, _, info = venv.step(np.argmax(masks * rng.random(masks.shape), 1))
        for i in range(300):
            if terminated[i]:
                winner = info["final_info"]["winner"][i]
                mark = info["final_info"]["agent_mark"][i]
                assert rewards[i] == (1.0 if winner == mark else -1.0 if winner else 0.0)
            check_start_or_later(obs[i], int(info["agent_mark"][i]))


def check_start_or_later(planes: np.ndarray, agent_mark: int) -> None:
    own, other = int(planes[0].sum()), int(planes[1].sum())
    assert 1 + (own + other) % 2 == agent_mark  # the agent is always the one to move


def test_batched_env_is_reproducible_and_draws_the_documented_lengths():
    def starts(seed: int) -> np.ndarray:
        venv = ConnectXVectorEnv(num_envs=2000, opening_plies=4, agent_mark=1)
        return venv.reset(seed=seed)[0]

    first = starts(3)
    np.testing.assert_array_equal(first, starts(3))
    assert not np.array_equal(first, starts(4))
    counts = np.bincount(first.sum(axis=(1, 2, 3)), minlength=5)
    assert counts[[1, 3]].sum() == 0  # mark 1 to move: an even number of stones
    # lengths 0..4 uniformly: 0 stones 1/5, 2 stones 2/5 (lengths 1 and 2), 4 stones 2/5
    assert abs(counts[0] / 2000 - 0.2) < 0.04
    assert abs(counts[2] / 2000 - 0.4) < 0.05
    assert abs(counts[4] / 2000 - 0.4) < 0.05


@pytest.mark.parametrize(
    ("size", "plies", "message"),
    [
        ((6, 7, 4), 41, "at most 40 on a 6x7 board with inarow=4"),
        ((6, 7, 4), -1, ">= 0"),
        ((6, 7, 4), True, "whole number"),
        ((6, 7, 4), 2.0, "whole number"),
        ((1, 1, 4), 1, "at most 0"),
        ((3, 3, 1), 1, "at most 0"),
        ((2, 2, 4), 3, "at most 2"),
        ((4, 5, 2), 19, "at most 18"),
    ],
)
def test_bad_opening_plies_are_refused_with_the_bound(size, plies, message):
    with pytest.raises(ValueError, match=message):
        check_opening_plies(plies, Geometry(*size))
    with pytest.raises(ValueError, match=message):
        ConnectXEnv(*size, opening_plies=plies)
    with pytest.raises(ValueError, match=message):
        ConnectXVectorEnv(2, *size, opening_plies=plies)
    with pytest.raises(ValueError, match=message):
        TrainConfig(rows=size[0], columns=size[1], inarow=size[2], opening_plies=plies).validate()


@pytest.mark.parametrize(
    ("size", "unset"),
    [((6, 7, 4), 4), ((6, 7, 5), 4), ((4, 5, 3), 3), ((4, 5, 2), 1), ((1, 1, 4), 0)],
)
def test_training_default_is_four_stones_or_the_most_the_board_allows(size, unset):
    config = TrainConfig(rows=size[0], columns=size[1], inarow=size[2])
    config.validate()  # unset never fails on a board that allows fewer than 4
    assert config.opening_plies is None
    assert config.training_opening_plies() == unset
    assert check_opening_plies(unset, Geometry(*size)) == unset
    explicit = dataclasses.replace(config, opening_plies=0)
    assert explicit.training_opening_plies() == 0


def test_training_config_saved_runs_keep_their_openings():
    saved = TrainConfig().to_json()
    assert saved["opening_plies"] is None  # unset: resumes unset, the same 4 stones
    assert TrainConfig.from_json(saved).training_opening_plies() == 4
    del saved["opening_plies"]  # a run saved before the setting existed
    assert TrainConfig.from_json(saved).training_opening_plies() == 0


@pytest.mark.parametrize("agent_mark", [1, 2])
def test_long_openings_leave_the_agent_to_move_and_wins_in_one_unplayed(agent_mark):
    """Past ``2 * inarow - 3`` stones an opening is random play's position, its stones only in
    columns where they complete no line: ``k`` or ``k - 1`` stones (the agent to move), every
    length reached, and positions where the agent can win at once (random play leaves them)."""
    single = ConnectXEnv(opening_plies=20, agent_mark=agent_mark)
    single_stones = []
    can_win = 0
    for seed in range(300):
        obs, info = single.reset(seed=seed)
        single_stones.append(check_start(obs, agent_mark, 4))
        can_win += any(single.board().is_winning_move(c) for c in range(7)
                       if info["action_mask"][c])  # fmt: skip
    venv = ConnectXVectorEnv(num_envs=3000, opening_plies=20, agent_mark=agent_mark)
    obs, info = venv.reset(seed=2)
    assert info["action_mask"].any(axis=1).all()
    batched_stones = [check_start(obs[i], agent_mark, 4) for i in range(3000)]
    for stones in (single_stones, batched_stones):
        counts = np.bincount(stones, minlength=22)
        assert counts[agent_mark % 2 :: 2].sum() == 0  # the agent is to move after every opening
        assert counts[21] == 0
        # lengths 0..20 uniformly; past 5, the lengths that would leave the opponent to move
        # lose a stone, so the lengths left get twice their share
        assert abs(counts[20 - (agent_mark == 2)] / len(stones) - 1.5 / 21) < 0.04
    assert can_win > 20  # wins in one left on the board by random stones


@settings(max_examples=60, deadline=None)
@given(size=st.sampled_from(SIZES), seed=st.integers(0, 2**32 - 1), stones=st.integers(0, 40))
def test_batched_quiet_columns_match_the_single_env_reference(size, seed, stones):
    """The batched env's opening column (a numba kernel over bit boards) is the single env's
    :func:`quiet_random_column` (a list of legal columns, ``Board.is_winning_move``) for the same
    uniform draw, on positions of random play."""
    geometry = Geometry(*size)
    rng = np.random.default_rng(seed)
    board = Board.empty(*size)
    for _ in range(min(stones, geometry.cells - 1)):
        column = quiet_random_column(board, rng)
        if column < 0:
            break
        board = board.play(column)
    uniform = float(rng.random())
    venv = ConnectXVectorEnv(num_envs=1, rows=size[0], columns=size[1], inarow=size[2])
    by_agent = board.mark == 1  # the batched board's agent holds mark 1's stones
    venv._agent[0] = board.current if by_agent else board.current ^ board.mask
    venv._mask[0] = board.mask
    out = np.empty(1, dtype=np.int64)
    venv._kernels.random_quiet_columns(
        venv._agent, venv._mask, np.array([0]), np.array([uniform]), np.array([by_agent]),
        venv._dims, out,
    )  # fmt: skip
    expected = quiet_random_column(board, _Fixed(uniform))
    assert int(out[0]) == expected


class _Fixed:
    """A generator whose ``random()`` is one given number."""

    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value
