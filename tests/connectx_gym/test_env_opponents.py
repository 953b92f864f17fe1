"""``ConnectX-v0``'s opponent: specs with parameters, policy objects and Kaggle callables, illegal
answers named, and when ``set_opponent`` takes effect."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import connectx_gym
from connectx_gym import Board, Geometry, IllegalMoveError
from connectx_gym.env import ConnectXEnv
from tests.support.scripted_policies import Column, Script


@pytest.fixture
def fixed_policy_registered(monkeypatch: pytest.MonkeyPatch) -> str:
    """``"fixed"`` registered, with a ``column`` parameter, for this test only."""
    from connectx_gym import registry

    monkeypatch.setattr(registry, "_registry", dict(registry._registry))
    connectx_gym.register_policy("fixed", Column, column=0)
    return "fixed"


def opponent_columns(env: gym.Env, steps: int, seed: int = 0) -> list[int]:
    _, info = env.reset(seed=seed)
    columns = []
    for _ in range(steps):
        action = int(np.flatnonzero(info["action_mask"])[-1])
        _, _, terminated, _, info = env.step(action)
        columns.append(info["opponent_action"])
        if terminated:
            break
    return columns


def test_opponent_spec_with_parameters(fixed_policy_registered: str) -> None:
    env = gym.make("ConnectX-v0", opponent="fixed:column=2", agent_mark=1)
    assert isinstance(env.unwrapped.opponent, Column)
    assert env.unwrapped.opponent.column == 2
    assert opponent_columns(env, 3) == [2, 2, 2]
    env = gym.make("ConnectX-v0", opponent="fixed", agent_mark=1)
    assert opponent_columns(env, 1) == [0]


def test_opponent_policy_object_is_reset_each_episode() -> None:
    opponent = Script([4, 5])
    env = ConnectXEnv(opponent=opponent, agent_mark=1)
    assert opponent_columns(env, 3) == [4, 5, 4]
    assert env.opponent is opponent
    assert opponent.resets == 1
    env.reset()
    assert opponent.resets == 2


def test_opponent_kaggle_callable_attribute_and_key_access() -> None:
    seen: list[tuple[Any, Any]] = []

    def attribute_agent(obs: Any, config: Any) -> int:
        seen.append((obs, config))
        assert obs.board == obs["board"]
        assert (config.rows, config.columns, config.inarow) == (5, 6, 4)
        return next(c for c in range(config.columns) if obs.board[c] == 0)

    def key_agent(obs: Any, config: Any) -> int:
        seen.append((obs, config))
        assert (config["rows"], config["columns"], config["inarow"]) == (5, 6, 4)
        return [c for c in range(config["columns"]) if obs["board"][c] == 0][-1]

    for agent, column in ((attribute_agent, 0), (key_agent, 5)):
        seen.clear()
        env = ConnectXEnv(5, 6, 4, opponent=agent, agent_mark=2)
        _, info = env.reset(seed=0)
        assert info["opponent_action"] == column
        obs, _ = seen[0]
        assert obs.mark == obs["mark"] == 1
        assert obs.board == [0] * 30
        _, _, _, _, info = env.step(2)
        obs, _ = seen[1]
        assert obs.mark == 1
        expected = Board.from_moves(Geometry(5, 6, 4), [column, 2])
        assert obs.board == expected.to_kaggle()
        assert info["opponent_action"] == column


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (0, r"illegal column 0; legal columns are \[1, 2, 3\]"),
        (4, r"illegal column 4; legal columns are \[1, 2, 3\]"),
        (-1, r"illegal column -1"),
        ("2", r"answered '2', not a column"),
        (1.5, r"answered 1.5, not a column"),
        (None, r"answered None, not a column"),
        (True, r"answered True, not a column"),
    ],
)
@pytest.mark.parametrize("kind", ["callable", "policy"])
def test_opponent_illegal_answers_raise_naming_them(answer: Any, message: str, kind: str) -> None:
    if kind == "callable":
        opponent: Any = lambda obs, config: answer  # noqa: E731
    else:
        opponent = Script([answer])
    env = ConnectXEnv(1, 4, 4, opponent=opponent, agent_mark=1)
    env.reset(seed=0)
    with pytest.raises(IllegalMoveError, match=message):
        env.step(0)
    assert issubclass(IllegalMoveError, ValueError)
    with pytest.raises(RuntimeError):
        env.step(1)  # the episode is over: no silent substitute move


def test_opponent_illegal_first_move_raises_at_reset() -> None:
    env = ConnectXEnv(opponent=Script([7]), agent_mark=2)
    with pytest.raises(IllegalMoveError, match="column 7"):
        env.reset(seed=0)


def test_opponent_numpy_integer_answers_are_accepted() -> None:
    env = ConnectXEnv(opponent=Script([np.int64(3), np.int32(4)]), agent_mark=1)
    assert opponent_columns(env, 2) == [3, 4]


def test_set_opponent_takes_effect_at_the_next_reset() -> None:
    env = ConnectXEnv(opponent=Column(1), agent_mark=1)
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(6)
    assert info["opponent_action"] == 1
    env.set_opponent(Column(4))  # mid-game: this game ends against the old one
    _, _, _, _, info = env.step(6)
    assert info["opponent_action"] == 1
    env.reset()
    assert isinstance(env.opponent, Column)
    assert env.opponent.column == 4
    _, _, _, _, info = env.step(6)
    assert info["opponent_action"] == 4
    env.set_opponent("random")
    env.reset(options={"opponent": Column(2)})  # the reset option wins
    assert env.step(6)[4]["opponent_action"] == 2


def test_set_opponent_between_games_is_immediate() -> None:
    env = ConnectXEnv(agent_mark=1)
    env.set_opponent(Column(3))
    assert env.opponent.column == 3
    env.reset(seed=0)
    assert env.step(0)[4]["opponent_action"] == 3
    with pytest.raises(ValueError, match="unknown policy"):
        env.set_opponent("randm")
