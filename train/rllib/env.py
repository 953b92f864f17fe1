"""ConnectX as an RLlib ``MultiAgentEnv`` that plays the opponents of ``connectx train``.

Two agents, ``player_0`` (mark 1, moves first) and ``player_1`` (mark 2), both mapped to one
RLModule by :mod:`connectx_train.rllib.selfplay`; only the agent to move gets an observation.
Each episode plays one opponent drawn from the env's mixture, the ``(label, probability)`` items
of :meth:`connectx_train.state.Curriculum.mixture` (the same specs and weights as a
``connectx train`` run at that stage, built by :func:`connectx_gym.registry.make_policy`):

- a policy spec (``"onestep~0.25"``, ``"minimax:depth=2"``, a saved agent): it plays one seat
  inside ``step()``, the learner the other, the seat drawn per episode, as ``ConnectX-v0`` draws
  its ``agent_mark``;
- :data:`~connectx_train.state.SELF_LABEL`: both seats are the learner (self-play against
  the live module rather than against a snapshot of it).

Each game starts after 0 to ``opening_plies`` random stones, as ``ConnectX-v0``'s
``opening_plies`` (``TrainConfig.training_opening_plies``). Observations are the project's planes,
``{"observations": (2, rows, columns) float32 (the mover's stones, then the other player's; row 0
on top), "action_mask": (columns,) float32}``: the input of the weights-only format. Rewards: +1
to the winner, -1 to the loser, 0 for a draw; an illegal column loses. Randomness comes from one
generator, seeded from the run's seed and the env's place (runner, index in the runner).

The driver reads each env's finished opponent games with :meth:`ConnectXMultiAgentEnv.drain`
(label, whether the learner won: what the curriculum counts) and the opponents' thinking time
with :meth:`ConnectXMultiAgentEnv.timing`, and moves the curriculum on with
:meth:`ConnectXMultiAgentEnv.set_mixture`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.env import random_opening
from connectx_gym.policy import Policy
from connectx_gym.registry import make_policy
from connectx_train.opponents import TimedPolicy
from connectx_train.state import SELF_LABEL

if TYPE_CHECKING:
    from ray.rllib.utils.typing import MultiAgentDict

__all__ = ["AGENTS", "ConnectXMultiAgentEnv", "observation"]

#: the agents, by mark: ``player_0`` moves first
AGENTS = ("player_0", "player_1")


def observation(board: Board) -> dict[str, np.ndarray]:
    """The mover's observation of ``board``: its planes and legal columns, in float32."""
    return {
        "observations": board.to_planes().astype(np.float32),
        "action_mask": board.legal_mask().astype(np.float32),
    }


def _seed_sequence(config: dict[str, Any]) -> np.random.SeedSequence:
    """The env's seed: the run's ``seed`` and the env's place (RLlib's ``EnvContext`` gives the
    runner's ``worker_index`` and the env's ``vector_index``; 0 outside RLlib)."""
    place = [getattr(config, "worker_index", 0), getattr(config, "vector_index", 0)]
    return np.random.SeedSequence([int(config.get("seed", 0)), *place])


class ConnectXMultiAgentEnv(MultiAgentEnv):
    """ConnectX for RLlib against a mixture of opponents (see the module docstring).

    ``config``: ``rows``, ``columns``, ``inarow`` (6, 7, 4), ``mixture`` (``(label,
    probability)`` items; default: self-play only), ``opening_plies`` (0) and ``seed`` (0).
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        config = config if config is not None else {}
        self.geometry = Geometry(
            config.get("rows", 6), config.get("columns", 7), config.get("inarow", 4)
        )
        self.opening_plies = int(config.get("opening_plies", 0))
        self.rng = np.random.default_rng(_seed_sequence(config))
        self.labels: list[str] = []
        self.weights = np.ones(1)
        self.set_mixture(config.get("mixture") or [(SELF_LABEL, 1.0)])
        self.possible_agents = list(AGENTS)
        self.agents = list(AGENTS)
        rows, columns = self.geometry.rows, self.geometry.columns
        space = gym.spaces.Dict(
            {
                "observations": gym.spaces.Box(0.0, 1.0, (2, rows, columns), np.float32),
                "action_mask": gym.spaces.Box(0.0, 1.0, (columns,), np.float32),
            }
        )
        self.observation_spaces = dict.fromkeys(AGENTS, space)
        self.action_spaces = dict.fromkeys(AGENTS, gym.spaces.Discrete(columns))
        self.board = Board.empty(*self.geometry.key)
        self.label = SELF_LABEL
        self.learners: frozenset[int] = frozenset((1, 2))
        self.opponents: dict[str, Policy] = {}
        self.ledger: dict[str, list[float]] = {}
        self.outcomes: list[tuple[str, bool]] = []
        self.env_seconds = 0.0

    def set_mixture(self, mixture: Sequence[tuple[str, float]]) -> None:
        """Draw the opponent of each next episode from ``mixture``'s ``(label, probability)``
        items (the probabilities are normalised; ``ValueError`` unless some are > 0)."""
        weights = np.array([float(p) for _, p in mixture], dtype=np.float64)
        if not len(weights) or (weights < 0).any() or not weights.sum() > 0:
            raise ValueError(f"an opponent mixture needs probabilities > 0, got {list(mixture)}")
        self.labels, self.weights = [label for label, _ in mixture], weights / weights.sum()

    def drain(self) -> list[tuple[str, bool]]:
        """The opponent games finished since the last call: ``(label, learner won)`` each, in
        the order they ended (self-play games are not counted: both seats are the learner)."""
        outcomes, self.outcomes = self.outcomes, []
        return outcomes

    def timing(self) -> dict[str, Any]:
        """Seconds spent in the env (opponents included) and each opponent's seconds and moves,
        as :meth:`connectx_train.opponents.OpponentSlot.timing` gives them."""
        return {"env_seconds": self.env_seconds, "opponents": dict(self.ledger)}

    def _opponent(self, label: str) -> Policy:
        if label not in self.opponents:
            self.opponents[label] = TimedPolicy(make_policy(label), label, self.ledger)
        return self.opponents[label]

    # RLlib's reset and step answer for every agent where gymnasium's Env, its base, answers
    # for one
    def reset(  # type: ignore[override]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[MultiAgentDict, MultiAgentDict]:
        started = time.perf_counter()
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.label = self.labels[int(self.rng.choice(len(self.labels), p=self.weights))]
        if self.label == SELF_LABEL:
            self.learners = frozenset((1, 2))
        else:
            self.learners = frozenset((int(self.rng.integers(1, 3)),))
            self._opponent(self.label).reset()
        opening = random_opening(self.geometry, self.opening_plies, self.learners, self.rng)
        board = Board.from_moves(self.geometry, opening)
        self.board = board
        if board.mark not in self.learners:
            self.board = board.play(self._opponent(self.label).act(board, self.rng))
        self.env_seconds += time.perf_counter() - started
        return {AGENTS[self.board.mark - 1]: observation(self.board)}, {}

    def step(  # type: ignore[override]
        self, action_dict: MultiAgentDict
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        started = time.perf_counter()
        mover = self.board.mark
        column = int(action_dict[AGENTS[mover - 1]])
        winner: int | None
        if not self.board.can_play(column):
            winner = 3 - mover  # an illegal column loses
        else:
            self.board = self.board.play(column)
            winner = self._result()
            if winner is None and self.board.mark not in self.learners:
                self.board = self.board.play(self._opponent(self.label).act(self.board, self.rng))
                winner = self._result()
        self.env_seconds += time.perf_counter() - started
        if winner is not None:
            return self._end(winner)
        agent = AGENTS[self.board.mark - 1]
        observations: MultiAgentDict = {agent: observation(self.board)}
        rewards: MultiAgentDict = {agent: 0.0}
        done: MultiAgentDict = {"__all__": False}
        return observations, rewards, done, dict(done), {}

    def _result(self) -> int | None:
        """The winner's mark, 0 for a draw, None while the game goes on."""
        winner = self.board.winner()
        if winner is not None:
            return winner
        return 0 if self.board.is_full() else None

    def _end(
        self, winner: int
    ) -> tuple[MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict, MultiAgentDict]:
        """Every learner's last observation, reward (+1, -1, 0) and ``terminated``."""
        observations: MultiAgentDict = {}
        rewards: MultiAgentDict = {}
        terminated: MultiAgentDict = {}
        for mark in sorted(self.learners):
            agent = AGENTS[mark - 1]
            observations[agent] = observation(self.board)
            observations[agent]["action_mask"][:] = 0.0  # no move left
            rewards[agent] = 0.0 if winner == 0 else (1.0 if winner == mark else -1.0)
            terminated[agent] = True
        if self.label != SELF_LABEL:
            (mark,) = self.learners
            self.outcomes.append((self.label, winner == mark))
        terminated["__all__"] = True
        truncated: MultiAgentDict = dict.fromkeys(terminated, False)
        return observations, rewards, terminated, truncated, {}
