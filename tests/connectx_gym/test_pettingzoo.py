"""The PettingZoo AEC env: PettingZoo's own API, seed and render tests on many board sizes, and
move-by-move agreement with PettingZoo's ``connect_four_v3`` on 6x7."""

from __future__ import annotations

import functools
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

with warnings.catch_warnings():  # pettingzoo.test imports connect_four_v3 the deprecated way
    warnings.simplefilter("ignore", DeprecationWarning)
    from pettingzoo.test import api_test, render_test, seed_test

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.pettingzoo import env, raw_env

# 6x7 as Kaggle, small boards, 7x8 (exactly 64 bits), a square board where nobody may win, one
# row, a single cell, one column, and 8x8 (72 bits: Python integers past 64 bits).
SIZES = [(6, 7, 4), (5, 4, 3), (7, 8, 4), (4, 4, 4), (1, 5, 3), (1, 1, 1), (3, 1, 2), (8, 8, 4)]


@pytest.fixture(autouse=True)
def _quiet_api_test_warnings():
    # api_test warns about things that are by design in every classic game (dict observations,
    # all-zero observations at the start, all-zero masks for the agent not to move).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("size", SIZES)
def test_pettingzoo_api_seed_and_render_tests_pass(size, capsys):
    api_test(env(*size), num_cycles=200)
    seed_test(functools.partial(env, *size), num_cycles=50)
    render_test(functools.partial(env, *size))
    capsys.readouterr()


def test_raw_env_passes_api_test_too():
    api_test(raw_env(5, 4, 3), num_cycles=200)


@pytest.mark.slow
def test_same_games_as_connect_four_v3():
    pytest.importorskip("pygame")  # connect_four_v3 imports it
    from pettingzoo.classic.connect_four import connect_four as reference

    ours, theirs = env(), reference.env()
    rng = np.random.default_rng(12)
    endings = {"win": 0, "draw": 0}
    for _ in range(300):
        moves = []
        ours.reset()
        theirs.reset()
        for agent in theirs.agent_iter():
            expected = theirs.last()
            got = ours.last()
            assert ours.agent_selection == agent
            obs, reward, termination, truncation, info = got
            np.testing.assert_array_equal(obs["observation"], expected[0]["observation"])
            assert obs["observation"].dtype == expected[0]["observation"].dtype == np.int8
            assert (reward, termination, truncation, info) == expected[1:], moves
            if termination:
                # connect_four_v3 still marks non-full columns after the end; we mark none.
                assert not obs["action_mask"].any()
                action = None
            else:
                np.testing.assert_array_equal(obs["action_mask"], expected[0]["action_mask"])
                action = int(rng.choice(np.flatnonzero(obs["action_mask"])))
                moves.append(action)
            # The other agent's view agrees too.
            other = "player_1" if agent == "player_0" else "player_0"
            if other in theirs.agents:
                np.testing.assert_array_equal(
                    ours.observe(other)["observation"], theirs.observe(other)["observation"]
                )
            theirs.step(action)
            ours.step(action)
        assert not ours.agents
        board = Board.from_moves(Geometry(), moves)
        endings["draw" if board.winner() is None else "win"] += 1
    assert endings["win"] > 250


def test_observation_is_from_the_observers_view_and_mask_only_for_the_mover():
    game = env(4, 5, 3)
    game.reset()
    game.step(2)  # player_0 plays column 2
    first = game.observe("player_0")["observation"]
    second = game.observe("player_1")["observation"]
    assert first.shape == second.shape == (4, 5, 2)
    assert first[3, 2].tolist() == [1, 0]  # bottom row, column 2: "mine" for player_0
    assert second[3, 2].tolist() == [0, 1]  # ... and "the other's" for player_1
    assert first.sum() == second.sum() == 1
    assert game.observe("player_0")["action_mask"].tolist() == [0, 0, 0, 0, 0]
    assert game.observe("player_1")["action_mask"].tolist() == [1, 1, 1, 1, 1]
    assert game.unwrapped.board == Board.from_moves(Geometry(4, 5, 3), [2])


def test_rewards_at_the_end_and_dead_steps():
    game = env(4, 4, 3)
    game.reset()
    for column in (0, 1, 0, 1, 0):  # player_0 stacks three in column 0
        assert game.rewards == {"player_0": 0, "player_1": 0}
        game.step(column)
    assert game.terminations == {"player_0": True, "player_1": True}
    assert game.agent_selection == "player_1"
    assert game.last()[1] == -1
    game.step(None)
    assert game.agent_selection == "player_0"
    assert game.last()[1] == 1
    game.step(None)
    assert game.agents == []


def test_draw_gives_zero_to_both():
    game = env(2, 2, 3, render_mode="ansi")
    game.reset()
    for column in (0, 0, 1, 1):
        game.step(column)
    assert game.terminations == {"player_0": True, "player_1": True}
    assert game.last()[1] == 0
    assert game.rewards == {"player_0": 0, "player_1": 0}
    assert game.render().splitlines()[-1] == "draw"


def test_illegal_move_loses_in_env_and_raises_in_raw_env():
    game = env(2, 3, 3)
    game.reset()
    for column in (0, 0):
        game.step(column)
    game.step(0)  # column 0 is full: player_0 loses (PettingZoo logs a warning)
    _, reward, termination, _, _ = game.last()
    assert game.agent_selection == "player_0"
    assert reward == -1
    assert termination
    assert game.rewards["player_1"] == 0

    raw = raw_env(2, 3, 3)
    raw.reset()
    raw.step(0)
    raw.step(0)
    with pytest.raises(ValueError, match="illegal move by player_0: column 0"):
        raw.step(0)
    with pytest.raises(TypeError, match="integer column"):
        raw.step(1.5)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="render_mode"):
        raw_env(render_mode="rgb")
    with pytest.raises(ValueError, match="rows"):
        raw_env(rows=0)
    with pytest.raises(TypeError, match="columns"):
        raw_env(columns=7.0)


def test_renders_and_seeding():
    game = raw_env(3, 4, 3, render_mode="rgb_array")
    image = game.render()
    assert image.shape == (3 * 40, 4 * 40, 3)
    assert image.dtype == np.uint8
    text = raw_env(3, 4, 3, render_mode="ansi")
    text.step(1)
    assert text.render().splitlines()[2] == ". X . ."
    assert "player_1 (O) to move" in text.render()
    a, b = raw_env(), raw_env()
    a.reset(seed=5)
    b.reset(seed=5)
    assert a.np_random.integers(1 << 30) == b.np_random.integers(1 << 30)
    assert raw_env.metadata["name"] == "connectx_v0"
    assert raw_env.metadata["is_parallelizable"] is False


def test_pickles_with_its_arguments():
    game = pickle.loads(pickle.dumps(raw_env(5, 6, 3)))
    assert game.geometry == Geometry(5, 6, 3)


def test_core_import_does_not_import_pettingzoo():
    code = "import sys, connectx_gym; sys.exit('pettingzoo' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
