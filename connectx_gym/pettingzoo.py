"""ConnectX as a PettingZoo AEC environment, for multi-agent RL (self-play, RLlib, Tianshou, ...).

Built on the shared rules of :mod:`connectx_gym.bitboard` and shaped like PettingZoo's own
``connect_four_v3``, so that code written for that env runs unchanged on any board size::

    from connectx_gym.pettingzoo import env

    game = env(rows=6, columns=7, inarow=4, render_mode="ansi")
    game.reset(seed=42)
    for agent in game.agent_iter():
        observation, reward, termination, truncation, info = game.last()
        if termination or truncation:
            action = None
        else:
            action = game.action_space(agent).sample(observation["action_mask"])
        game.step(action)

Needs ``pip install "connectx-gym[pettingzoo]"``; ``import connectx_gym`` never imports PettingZoo.

## Agents
``player_0`` moves first (Kaggle's mark 1, drawn ``X``), ``player_1`` second (mark 2, ``O``).

## Action Space
``Discrete(columns)``: the column to drop a disc in (0-indexed).

## Observation Space
``Dict({"observation": Box(0, 1, (rows, columns, 2), int8), "action_mask": Box(0, 1, (columns,),
int8)})``, from the observing agent's point of view: plane 0 of ``observation`` holds that agent's
discs, plane 1 the other agent's, row 0 is the top row (``connect_four_v3``'s layout; the
``ConnectX-v0`` Gymnasium env uses channels first, ``(2, rows, columns)``, so transpose with
``observation.transpose(2, 0, 1)`` to feed the same network). ``action_mask`` marks the legal
columns for the agent to move and is all zeros for the other agent and once the game is over.

## Rewards
At the end of the game: +1 to the winner and -1 to the loser, 0 to both for a draw; 0 on every
other step. With :func:`env`, an illegal move (a full column) ends the game with -1 for the agent
that made it and 0 for the other (PettingZoo's ``TerminateIllegalWrapper``, as in its classic
games); :class:`raw_env` raises ``ValueError`` on an illegal move instead.

## Episode End
Both agents are terminated on a win or a full board; ``truncations`` are always False.

## Differences from ``connect_four_v3``
Any board size (``rows``, ``columns``, ``inarow`` >= 1, up to the limits of
:class:`~connectx_gym.Geometry`); an ``"ansi"`` render mode and a text ``"human"`` mode (numpy and
the terminal, no pygame window); and once the game is over the ``action_mask`` is all zeros (no
move is legal), where ``connect_four_v3`` still marks the non-full columns. With the same actions
the two envs give the same observations, rewards, terminations and agent order.

## Seeding
The rules have no randomness. ``reset(seed=...)`` seeds ``env.unwrapped.np_random`` (Gymnasium's
``seeding.np_random``), for wrappers that draw openings or opponents; seed the action spaces
yourself (``env.action_space(agent).seed(...)``) to sample reproducible random moves.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.utils import EzPickle, seeding

try:
    from pettingzoo import AECEnv
    from pettingzoo.utils import wrappers
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'connectx_gym.pettingzoo needs PettingZoo: pip install "connectx-gym[pettingzoo]" '
        f"({error})"
    ) from None

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.render import board_to_ansi, board_to_rgb

__all__ = ["env", "raw_env"]

AGENTS = ("player_0", "player_1")
SYMBOLS = ("X", "O")


def env(rows: int = 6, columns: int = 7, inarow: int = 4, render_mode: str | None = None) -> AECEnv:
    """The ConnectX AEC env with PettingZoo's classic-game wrappers: an illegal move ends the game
    with reward -1 for its maker (``TerminateIllegalWrapper``), actions outside the action space
    fail an assertion (``AssertOutOfBoundsWrapper``), and calls out of order raise
    (``OrderEnforcingWrapper``)."""
    game: AECEnv = raw_env(rows, columns, inarow, render_mode)
    game = wrappers.TerminateIllegalWrapper(game, illegal_reward=-1)
    game = wrappers.AssertOutOfBoundsWrapper(game)
    return wrappers.OrderEnforcingWrapper(game)


# pettingzoo ships no type hints, so its AECEnv is Any to mypy
class raw_env(AECEnv, EzPickle):  # type: ignore[misc]  # noqa: N801 - PettingZoo's name
    """ConnectX for two agents taking turns; see the module docstring for the specification."""

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["human", "ansi", "rgb_array"],
        "name": "connectx_v0",
        "is_parallelizable": False,
        "render_fps": 2,
    }

    def __init__(
        self, rows: int = 6, columns: int = 7, inarow: int = 4, render_mode: str | None = None
    ) -> None:
        EzPickle.__init__(self, rows, columns, inarow, render_mode)
        super().__init__()
        self.geometry = Geometry(rows, columns, inarow)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, "
                f"got {render_mode!r}"
            )
        self.render_mode = render_mode
        g = self.geometry
        self.possible_agents = list(AGENTS)
        self.agents = self.possible_agents[:]
        self.action_spaces = {agent: spaces.Discrete(g.columns) for agent in self.agents}
        self.observation_spaces = {
            agent: spaces.Dict(
                {
                    "observation": spaces.Box(0, 1, (g.rows, g.columns, 2), dtype=np.int8),
                    "action_mask": spaces.Box(0, 1, (g.columns,), dtype=np.int8),
                }
            )
            for agent in self.agents
        }
        self.np_random, self.np_random_seed = seeding.np_random(None)
        self._board = Board(g, 0, 0, 0)
        self._winner: str | None = None
        self.reset()

    # -- spaces -------------------------------------------------------------------------------
    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.action_spaces[agent]

    # -- the game -----------------------------------------------------------------------------
    @property
    def board(self) -> Board:
        """The current position, an immutable :class:`~connectx_gym.Board` (mover's view)."""
        return self._board

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a new game with ``player_0`` to move; ``seed`` seeds ``np_random``."""
        if seed is not None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
        self._board = Board(self.geometry, 0, 0, 0)
        self._winner = None
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {agent: {} for agent in self.agents}
        self.agent_selection = AGENTS[0]

    def step(self, action: Any) -> None:
        """Drop the selected agent's disc in column ``action``; ``None`` for a finished agent."""
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        column = _column(action)
        board = self._board
        if not board.can_play(column):
            raise ValueError(
                f"illegal move by {agent}: column {column}; legal columns are {board.legal_moves()}"
            )
        wins = board.is_winning_move(column)
        self._board = board.play(column)
        next_agent = AGENTS[1 - AGENTS.index(agent)]
        if wins:
            self._winner = agent
            self.rewards[agent] += 1
            self.rewards[next_agent] -= 1
            self.terminations = dict.fromkeys(self.agents, True)
        elif self._board.is_full():
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = next_agent
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """``agent``'s view: its discs in plane 0, the other agent's in plane 1; its legal
        columns (none unless it is to move)."""
        board = self._board
        player = self.possible_agents.index(agent)
        planes = board.to_planes()  # the mover's discs, then the other player's
        if player != board.moves % 2:  # ``agent`` is not the one to move
            planes = planes[::-1]
        mask = np.zeros(self.geometry.columns, dtype=np.int8)
        if agent == self.agent_selection and not any(self.terminations.values()):
            mask[list(board.open_columns())] = 1
        return {
            "observation": np.ascontiguousarray(planes.transpose(1, 2, 0)),
            "action_mask": mask,
        }

    # -- views --------------------------------------------------------------------------------
    def render(self) -> str | np.ndarray | None:
        """``"ansi"``: the board as text; ``"rgb_array"``: an image; ``"human"``: print the text."""
        if self.render_mode is None:
            gymnasium.logger.warn(
                "You are calling render method without specifying any render mode."
            )
            return None
        grid = self._board.to_array()
        if self.render_mode == "rgb_array":
            return board_to_rgb(grid)
        text = board_to_ansi(grid, self._status())
        if self.render_mode == "human":
            sys.stdout.write(text)
            return None
        return text

    def _status(self) -> str:
        if self._winner is not None:
            return f"{self._winner} ({SYMBOLS[AGENTS.index(self._winner)]}) wins"
        if self._board.is_full():
            return "draw"
        if any(self.terminations.values()):
            return "game over (illegal move)"
        mover = AGENTS[self._board.moves % 2]
        return f"{mover} ({SYMBOLS[self._board.moves % 2]}) to move"

    def close(self) -> None:
        """Nothing to release: rendering uses no window."""

    def __repr__(self) -> str:
        rows, columns, inarow = self.geometry.key
        return f"raw_env(rows={rows}, columns={columns}, inarow={inarow})"


def _column(action: Any) -> int:
    if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
        return int(action)
    if isinstance(action, np.ndarray) and action.shape in ((), (1,)) and action.dtype.kind in "iu":
        return int(action.reshape(()))
    raise TypeError(f"action must be an integer column, got {action!r}")
