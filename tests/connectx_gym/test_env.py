"""``ConnectX-v0``: API checks, masks and outcomes through whole games, determinism, illegal actions
and views (its opponent: test_env_opponents.py)."""

from __future__ import annotations

import random
import subprocess
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from connectx_gym import Board
from connectx_gym.env import ConnectXEnv
from tests.support.scripted_policies import Column, Script

SIZES = [
    (6, 7, 4),
    (1, 7, 4),
    (6, 1, 4),
    (1, 1, 1),
    (2, 2, 1),
    (3, 3, 5),
    (4, 5, 3),
    (7, 8, 4),
    (9, 9, 5),
    (10, 12, 4),
]


def legal_columns(mask: np.ndarray) -> list[int]:
    return np.flatnonzero(mask).tolist()


def check_state(
    env: gym.Env,
    obs: np.ndarray,
    info: dict[str, Any],
    moves: list[int],
    terminated: bool | None,
) -> Board:
    """The env's observation, masks and views agree with the board after ``moves``."""
    core = env.unwrapped
    board = Board.from_moves(core.geometry, moves)
    mark = info["agent_mark"]
    assert mark == core.agent_mark
    grid = board.to_array()
    assert obs.dtype == np.int8
    assert obs in env.observation_space
    np.testing.assert_array_equal(obs[0], grid == mark)
    np.testing.assert_array_equal(obs[1], grid == 3 - mark)
    legal = board.legal_mask()
    if terminated is not None:  # (None after reset, which cannot say)
        assert terminated == board.is_terminal()
    assert info["action_mask"].dtype == np.int8
    np.testing.assert_array_equal(info["action_mask"], legal.astype(np.int8))
    masks = core.action_masks()
    assert masks.dtype == np.bool_
    np.testing.assert_array_equal(masks, legal)
    assert core.board() == board
    assert core.kaggle_observation() == {"board": board.to_kaggle(), "mark": mark}
    return board


def play_checked_episode(
    env: gym.Env, rnd: random.Random, seed: int | None = None, **options: Any
) -> tuple[float, int]:
    """One episode with random masked moves, checking every state; returns (reward, winner)."""
    obs, info = env.reset(seed=seed, options=options or None)
    moves: list[int] = [] if info["opponent_action"] == -1 else [info["opponent_action"]]
    opening_ended_game = check_state(env, obs, info, moves, None).is_terminal()
    while True:
        if opening_ended_game:  # the opponent's first move ended the game: step reports it
            assert not info["action_mask"].any()
            obs, reward, terminated, truncated, info = env.step(0)
            opening_ended_game = False
        else:
            action = rnd.choice(legal_columns(info["action_mask"]))
            obs, reward, terminated, truncated, info = env.step(action)
            moves.append(action)
        if info["opponent_action"] != -1:
            moves.append(info["opponent_action"])
        board = check_state(env, obs, info, moves, terminated)
        assert truncated is False
        if not terminated:
            assert reward == 0.0
            assert "winner" not in info
            continue
        winner = board.winner() or 0
        assert info["winner"] == winner
        mark = info["agent_mark"]
        assert reward == (0.0 if winner == 0 else 1.0 if winner == mark else -1.0)
        assert type(reward) is float
        with pytest.raises(RuntimeError, match="reset"):
            env.step(0)
        return reward, winner


# -- API checkers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [(6, 7, 4), (1, 5, 2), (4, 1, 2), (1, 1, 1), (9, 9, 5)])
@pytest.mark.parametrize("render_mode", ["ansi", "rgb_array"])
def test_gymnasium_check_env(size: tuple[int, int, int], render_mode: str) -> None:
    from gymnasium.utils.env_checker import check_env

    rows, columns, inarow = size
    env = gym.make(
        "ConnectX-v0", rows=rows, columns=columns, inarow=inarow, render_mode=render_mode
    )
    check_env(env.unwrapped)


@pytest.mark.parametrize("size", [(6, 7, 4), (1, 5, 2), (10, 12, 4)])
def test_sb3_check_env(size: tuple[int, int, int]) -> None:
    env_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    rows, columns, inarow = size
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # int8 (2, rows, columns) is "not an image": fine
        env_checker.check_env(gym.make("ConnectX-v0", rows=rows, columns=columns, inarow=inarow))


def test_make_by_module_path_in_a_fresh_interpreter() -> None:
    code = (
        "import sys, gymnasium\n"
        "assert 'connectx_gym' not in sys.modules\n"
        "import connectx_gym.registry\n"
        "assert not {'numba', 'torch', 'baselines', 'train'} & set(sys.modules)\n"
        "env = gymnasium.make('connectx_gym:ConnectX-v0', rows=5, columns=6, inarow=4)\n"
        "obs, info = env.reset(seed=1)\n"
        "assert obs.shape == (2, 5, 6), obs.shape\n"
        "env.step(int(info['action_mask'].argmax()))\n"
        "assert 'connectx_gym' in sys.modules\n"
        "assert 'torch' not in sys.modules and 'baselines' not in sys.modules\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_spaces() -> None:
    env = gym.make("ConnectX-v0", rows=5, columns=8, inarow=3)
    assert env.action_space == gym.spaces.Discrete(8)
    assert env.observation_space == gym.spaces.Box(0, 1, (2, 5, 8), np.int8)


# -- whole games ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("agent_mark", [1, 2, None])
def test_masks_observations_and_rewards_through_whole_games(
    size: tuple[int, int, int], agent_mark: int | None
) -> None:
    rows, columns, inarow = size
    env = gym.make("ConnectX-v0", rows=rows, columns=columns, inarow=inarow, agent_mark=agent_mark)
    rnd = random.Random(sum(size))
    outcomes = set()
    for episode in range(6):
        reward, _ = play_checked_episode(env, rnd, seed=episode if episode < 3 else None)
        outcomes.add(reward)
    if size == (6, 7, 4):
        assert outcomes & {1.0, -1.0}


@pytest.mark.parametrize(
    ("size", "agent_actions", "opponent", "reward", "winner"),
    [
        ((1, 3, 2), [1, 2], [0], 1.0, 1),  # the agent's win fills the board: a win
        ((1, 2, 2), [0], [1], 0.0, 0),  # the opponent's move fills the board: a draw
        ((1, 1, 2), [0], [0], 0.0, 0),  # the agent's move fills the board: a draw
        ((1, 1, 1), [0], [0], 1.0, 1),  # inarow 1: the first disc wins
        ((2, 3, 2), [0, 2], [1, 1], -1.0, 2),  # the opponent lines up two in column 1
    ],
)
def test_outcomes(
    size: tuple[int, int, int],
    agent_actions: list[int],
    opponent: list[int],
    reward: float,
    winner: int,
) -> None:
    rows, columns, inarow = size
    env = ConnectXEnv(rows, columns, inarow, opponent=Script(opponent), agent_mark=1)
    env.reset(seed=0)
    for action in agent_actions[:-1]:
        _, step_reward, terminated, _, _ = env.step(action)
        assert (step_reward, terminated) == (0.0, False)
    _, step_reward, terminated, truncated, info = env.step(agent_actions[-1])
    assert (step_reward, terminated, truncated) == (reward, True, False)
    assert info["winner"] == winner
    assert not info["action_mask"].any()
    assert not env.action_masks().any()


@pytest.mark.parametrize(("size", "reward", "winner"), [((1, 1, 1), -1.0, 1), ((1, 1, 2), 0.0, 0)])
def test_opening_move_that_ends_the_game_is_reported_by_the_next_step(
    size: tuple[int, int, int], reward: float, winner: int
) -> None:
    env = gym.make("ConnectX-v0", rows=size[0], columns=size[1], inarow=size[2], agent_mark=2)
    obs, info = env.reset(seed=0)
    assert info["opponent_action"] == 0
    assert not info["action_mask"].any()
    assert not env.unwrapped.action_masks().any()
    after, step_reward, terminated, truncated, info = env.step(0)
    np.testing.assert_array_equal(after, obs)
    assert (step_reward, terminated, truncated) == (reward, True, False)
    assert info["winner"] == winner
    assert info["opponent_action"] == -1
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)


def test_step_after_the_end_raises_until_reset() -> None:
    env = ConnectXEnv(1, 1, 1, agent_mark=1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)  # before the first reset
    env.reset(seed=0)
    assert env.step(0)[2]
    for _ in range(2):
        with pytest.raises(RuntimeError, match="reset"):
            env.step(0)
    env.reset()
    assert env.step(0)[1] == 1.0


# -- determinism ----------------------------------------------------------------------------------


def kaggle_global_random_agent(obs: Any, config: Any) -> int:
    """A Kaggle-style agent drawing from Python's global ``random``, as Kaggle's own does."""
    return random.choice([c for c in range(config.columns) if obs.board[c] == 0])


def transcript(seed: int, episodes: int = 4, **kwargs: Any) -> list[tuple[Any, ...]]:
    env = gym.make("ConnectX-v0", **kwargs)
    rnd = random.Random(1234)  # the agent's choices: the same in every run
    record: list[tuple[Any, ...]] = []
    for episode in range(episodes):
        obs, info = env.reset(seed=seed if episode == 0 else None)
        record.append((obs.tobytes(), info["agent_mark"], info["opponent_action"]))
        terminated = False
        while not terminated:
            action = rnd.choice(legal_columns(info["action_mask"]))
            obs, reward, terminated, _, info = env.step(action)
            record.append((obs.tobytes(), reward, terminated, info["opponent_action"]))
    return record


@pytest.mark.parametrize(
    "kwargs",
    [
        {"agent_mark": None},
        {"agent_mark": 2, "rows": 9, "columns": 9, "inarow": 5},
        {"agent_mark": None, "opponent": kaggle_global_random_agent},
    ],
    ids=["random-opponent", "big-board", "kaggle-callable"],
)
def test_same_seed_same_episodes(kwargs: dict[str, Any]) -> None:
    state = random.getstate()
    first = transcript(7, **kwargs)
    assert random.getstate() == state  # a Kaggle agent's use of `random` leaves no trace
    assert transcript(7, **kwargs) == first
    others = [transcript(seed, **kwargs) for seed in (8, 9, 10)]
    assert any(other != first for other in others)


def test_agent_mark_none_draws_both_marks_from_the_seed() -> None:
    env = ConnectXEnv(agent_mark=None)
    marks = [env.reset(seed=seed)[1]["agent_mark"] for seed in range(20)]
    assert set(marks) == {1, 2}
    assert marks == [env.reset(seed=seed)[1]["agent_mark"] for seed in range(20)]


# -- agent_mark -----------------------------------------------------------------------------------


def test_agent_mark_one_starts_on_an_empty_board() -> None:
    env = ConnectXEnv(agent_mark=1)
    obs, info = env.reset(seed=3)
    assert not obs.any()
    assert info["opponent_action"] == -1
    assert info["agent_mark"] == 1
    assert env.kaggle_observation() == {"board": [0] * 42, "mark": 1}


def test_agent_mark_two_sees_the_opening_move() -> None:
    env = ConnectXEnv(agent_mark=2, opponent=Column(5))
    obs, info = env.reset(seed=3)
    assert info["opponent_action"] == 5
    assert info["agent_mark"] == 2
    assert not obs[0].any()
    assert obs[1].sum() == 1
    assert obs[1, 5, 5] == 1
    assert env.kaggle_observation()["board"][35 + 5] == 1


def test_reset_options() -> None:
    env = ConnectXEnv(agent_mark=1)
    assert env.reset(options={"agent_mark": 2})[1]["agent_mark"] == 2
    assert env.reset()[1]["agent_mark"] == 1  # options last one episode
    _, info = env.reset(options={"opponent": Column(3), "agent_mark": 2})
    assert info["opponent_action"] == 3
    with pytest.raises(ValueError, match="agent_mark"):
        env.reset(options={"agent_mark": 3})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"opponnent": "random"})


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"agent_mark": 0}, ValueError),
        ({"agent_mark": "1"}, ValueError),
        ({"render_mode": "rgb"}, ValueError),
        ({"illegal_action": "ignore"}, ValueError),
        ({"rows": 0}, ValueError),
        ({"inarow": 2.5}, TypeError),
        ({"opponent": "no-such-policy"}, ValueError),
        ({"opponent": 42}, TypeError),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ConnectXEnv(**kwargs)


# -- illegal actions ------------------------------------------------------------------------------


def test_illegal_action_lose() -> None:
    env = ConnectXEnv(2, 3, 3, opponent=Script([0]), agent_mark=1)
    obs, _ = env.reset(seed=0)
    obs, _, _, _, info = env.step(0)  # the opponent answers 0: column 0 is full
    assert info["action_mask"].tolist() == [0, 1, 1]
    after, reward, terminated, truncated, info = env.step(0)
    assert (reward, terminated, truncated) == (-1.0, True, False)
    assert info["illegal_action"] is True
    assert info["winner"] == 2
    assert info["opponent_action"] == -1
    assert not info["action_mask"].any()
    np.testing.assert_array_equal(after, obs)
    with pytest.raises(RuntimeError):
        env.step(1)


@pytest.mark.parametrize("action", [3, -1, np.int64(7), 100])
def test_illegal_action_lose_off_the_board(action: Any) -> None:
    env = ConnectXEnv(2, 3, 3, agent_mark=1)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(action)
    assert (reward, terminated, info["illegal_action"]) == (-1.0, True, True)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (0, r"column 0 is not playable; legal: \[1, 2\]"),
        (np.int64(0), r"column 0 is not playable; legal: \[1, 2\]"),
        (3, r"column 3 is not playable; legal: \[1, 2\]"),
        (-1, r"column -1 is not playable; legal: \[1, 2\]"),
    ],
)
def test_illegal_action_raise_names_column_and_legal_ones(action: Any, message: str) -> None:
    env = ConnectXEnv(2, 3, 3, opponent=Column(0), agent_mark=1, illegal_action="raise")
    env.reset(seed=0)
    obs, *_ = env.step(0)
    with pytest.raises(ValueError, match=message):
        env.step(action)
    # nothing happened: the game goes on
    assert env.board() == Board.from_moves(env.geometry, [0, 0])
    obs, reward, terminated, _, _ = env.step(np.array([1]))
    assert (reward, terminated) == (0.0, False)
    assert obs[0].sum() == 2


@pytest.mark.parametrize("action", [1.0, 1.5, "1", None, True, np.array([0.0]), np.array([1, 2])])
def test_non_integer_actions_are_type_errors(action: Any) -> None:
    env = ConnectXEnv(agent_mark=1)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="integer column"):
        env.step(action)


# -- views ----------------------------------------------------------------------------------------


def test_kaggle_observation_exact_format() -> None:
    env = ConnectXEnv(3, 4, 3, opponent=Column(1), agent_mark=2)
    env.reset(seed=0)
    env.step(1)
    env.step(3)
    kaggle = env.kaggle_observation()
    assert set(kaggle) == {"board", "mark"}
    # Column 1 is full after three stones, so the opponent's third goes to its right (column 2).
    assert kaggle == {"board": [0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 1, 2], "mark": 2}
    assert kaggle.mark == 2
    assert all(type(v) is int for v in kaggle["board"])
    assert type(kaggle["mark"]) is int


def test_returned_arrays_are_copies() -> None:
    env = ConnectXEnv(opponent=Column(0), agent_mark=1)
    obs, info = env.reset(seed=0)
    obs[:] = 1
    info["action_mask"][:] = 0
    env.action_masks()[:] = False
    assert env.action_masks().all()
    obs, _, _, _, info = env.step(3)
    assert obs.sum() == 2
    kept = obs.copy()
    obs[:] = 0
    info["action_mask"][:] = 0
    env.kaggle_observation()["board"][:] = [2] * 42
    assert env.action_masks().all()
    obs, _, _, _, info = env.step(3)
    assert obs.sum() == 4
    assert (obs - kept).sum() == 2
    assert info["action_mask"].all()


def test_render_ansi() -> None:
    env = ConnectXEnv(3, 4, 3, opponent=Column(1), agent_mark=1, render_mode="ansi")
    env.reset(seed=0)
    env.step(1)
    text = env.render()
    assert isinstance(text, str)
    lines = text.splitlines()
    assert lines[:4] == [". . . .", ". O . .", ". X . .", "0 1 2 3"]
    assert lines[4] == "agent plays X (mark 1)"
    env.step(1)  # column 1 is now full
    env.step(1)  # illegal: the agent loses
    assert env.render().splitlines()[-1] == "agent plays X (mark 1), mark 2 wins"


def test_render_rgb_array() -> None:
    env = ConnectXEnv(3, 4, 3, opponent=Column(1), agent_mark=1, render_mode="rgb_array")
    env.reset(seed=0)
    env.step(0)
    image = env.render()
    assert isinstance(image, np.ndarray)
    assert image.shape == (3 * 40, 4 * 40, 3)
    assert image.dtype == np.uint8

    def centre(row: int, column: int) -> list[int]:
        return image[row * 40 + 20, column * 40 + 20].tolist()

    red, yellow, empty = centre(2, 0), centre(2, 1), centre(0, 0)
    assert len({tuple(red), tuple(yellow), tuple(empty)}) == 3
    assert red[0] > red[2]
    assert yellow[0] > yellow[2]
    assert yellow[1] > red[1]
    assert centre(1, 3) == empty
    corner = image[0, 0].tolist()
    assert corner not in (red, yellow, empty)


def test_render_human_prints(capsys: pytest.CaptureFixture[str]) -> None:
    env = gym.make("ConnectX-v0", rows=3, columns=4, inarow=3, agent_mark=1, render_mode="human")
    env.reset(seed=0)
    out = capsys.readouterr().out
    assert ". . . .\n" * 3 + "0 1 2 3" in out
    env.step(2)
    out = capsys.readouterr().out
    assert ". . X ." in out
    assert env.render() is None
    assert ". . X ." in capsys.readouterr().out


def test_render_without_mode_warns() -> None:
    env = ConnectXEnv()
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None


@pytest.mark.parametrize("mark", [2.0, True])
def test_agent_mark_is_a_whole_number(mark: Any) -> None:
    with pytest.raises(ValueError, match="agent_mark must be 1, 2 or None"):
        ConnectXEnv(agent_mark=mark)
    env = ConnectXEnv()
    with pytest.raises(ValueError, match="agent_mark must be 1, 2 or None"):
        env.reset(options={"agent_mark": mark})
