"""Cross-check against kaggle-environments' own ``connectx`` interpreter: same moves, same boards,
same outcomes, same observations."""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest

from connectx_gym import Board, Geometry, as_kaggle_agent, make_policy
from connectx_gym.env import ConnectXEnv

kaggle_environments = pytest.importorskip("kaggle_environments")

SIZES = [
    (6, 7, 4),
    (1, 5, 2),
    (5, 1, 3),
    (1, 1, 1),
    (2, 2, 1),
    (3, 3, 5),
    (4, 5, 3),
    (5, 6, 2),
    (9, 9, 5),
    (10, 12, 4),
]


def make_kaggle(rows: int, columns: int, inarow: int) -> Any:
    configuration = {"rows": rows, "columns": columns, "inarow": inarow}
    return kaggle_environments.make("connectx", configuration=configuration, debug=True)


def kaggle_outcome(env: Any) -> tuple[list[str], list[float]]:
    return [agent.status for agent in env.state], [agent.reward for agent in env.state]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_random_games_give_the_same_boards_and_outcomes(size: tuple[int, int, int]) -> None:
    rows, columns, inarow = size
    geometry = Geometry(rows, columns, inarow)
    env = make_kaggle(rows, columns, inarow)
    rnd = random.Random(sum(size))
    games = 4 if rows * columns > 50 else 8
    for _ in range(games):
        env.reset()
        board = Board(geometry, 0, 0, 0)
        while not env.done:
            kaggle_board = env.state[0].observation.board
            assert kaggle_board == board.to_kaggle()
            active = [agent.status for agent in env.state].index("ACTIVE")
            assert active == board.moves % 2
            assert env.state[active].observation.mark == board.mark
            legal = [c for c in range(columns) if kaggle_board[c] == 0]  # Kaggle's legality
            assert legal == board.legal_moves()
            assert not board.is_terminal()
            column = rnd.choice(legal)
            actions: list[int | None] = [None, None]
            actions[active] = column
            env.step(actions)
            board = board.play(column)
        assert env.state[0].observation.board == board.to_kaggle()
        assert board.is_terminal()
        statuses, rewards = kaggle_outcome(env)
        assert statuses == ["DONE", "DONE"]
        winner = board.winner()
        expected = [0, 0] if winner is None else [1, -1] if winner == 1 else [-1, 1]
        assert rewards == expected


def record_kaggle_game(
    size: tuple[int, int, int], seed: int
) -> tuple[list[tuple[dict, dict]], list[int]]:
    """A game of random agents in Kaggle: every ``(obs, config)`` an agent was given, and the
    columns played."""
    seen: list[tuple[dict, dict]] = []
    rnd = random.Random(seed)

    def agent(obs: Any, config: Any) -> int:
        seen.append((dict(obs), dict(config)))
        return rnd.choice([c for c in range(config.columns) if obs.board[c] == 0])

    env = make_kaggle(*size)
    env.run([agent, agent])
    boards = [obs["board"] for obs, _ in seen] + [env.state[0].observation.board]
    boards = [np.array(board).reshape(size[0], size[1]) for board in boards]
    moves = []
    for before, after in itertools.pairwise(boards):
        moves.append(int(np.flatnonzero((after != before).any(axis=0))[0]))
    return seen, moves


class RecordingKaggleAgent:
    """A Kaggle-style callable that plays the given columns and records what it was shown."""

    def __init__(self, columns: list[int]) -> None:
        self.columns = iter(columns)
        self.views: list[tuple[dict, dict]] = []

    def __call__(self, obs: Any, config: Any) -> int:
        self.views.append((dict(obs), dict(config)))
        return next(self.columns)


@pytest.mark.parametrize("size", [(6, 7, 4), (4, 5, 3), (9, 9, 5)])
@pytest.mark.parametrize("agent_mark", [1, 2])
def test_env_views_match_what_kaggle_hands_its_agents(
    size: tuple[int, int, int], agent_mark: int
) -> None:
    for seed in range(3):
        seen, moves = record_kaggle_game(size, seed)
        agent_moves = moves[agent_mark - 1 :: 2]
        opponent_moves = moves[2 - agent_mark :: 2]
        opponent = RecordingKaggleAgent(opponent_moves)
        env = ConnectXEnv(*size, opponent=opponent, agent_mark=agent_mark)
        env.reset(seed=seed)
        agent_views = [env.kaggle_observation()]
        for column in agent_moves:
            _, _, terminated, _, _ = env.step(column)
            if terminated:
                break
            agent_views.append(env.kaggle_observation())
        kaggle_agent_views = [obs for obs, _ in seen[agent_mark - 1 :: 2]]
        assert len(agent_views) == len(kaggle_agent_views)
        for ours, theirs in zip(agent_views, kaggle_agent_views, strict=True):
            assert ours == {"board": theirs["board"], "mark": theirs["mark"]}
        # a Kaggle-style opponent inside the env sees what Kaggle would show it
        theirs_opponent = seen[2 - agent_mark :: 2]
        assert len(opponent.views) == len(theirs_opponent)
        for (obs, config), (kaggle_obs, kaggle_config) in zip(
            opponent.views, theirs_opponent, strict=True
        ):
            for key in ("board", "mark", "step"):
                assert obs[key] == kaggle_obs[key]
            for key in ("rows", "columns", "inarow"):
                assert config[key] == kaggle_config[key]


def test_as_kaggle_agent_plays_in_kaggle_environments() -> None:
    env = make_kaggle(6, 7, 4)
    for seat in range(2):
        agents: list[Any] = ["random", "random"]
        agents[seat] = as_kaggle_agent("random", seed=seat)
        env.run(agents)
        statuses, rewards = kaggle_outcome(env)
        assert statuses == ["DONE", "DONE"]
        board = Board.from_kaggle(env.state[0].observation.board, env.configuration)
        winner = board.winner()
        assert rewards == ([0, 0] if winner is None else [1, -1] if winner == 1 else [-1, 1])


def test_kaggle_builtin_agents_as_env_opponents() -> None:
    from kaggle_environments.envs.connectx.connectx import negamax_agent, random_agent

    for agent in (random_agent, negamax_agent):
        opponent = make_policy(agent)
        env = ConnectXEnv(4, 5, 3, opponent=opponent, agent_mark=None)
        for episode in range(2):
            _, info = env.reset(seed=episode)
            terminated = False
            while not terminated:
                column = int(np.flatnonzero(info["action_mask"])[0])
                _, _, terminated, _, info = env.step(column)
