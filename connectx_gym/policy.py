"""Policies: anything that picks a column for the player to move.

A :class:`Policy` sees a :class:`~connectx_gym.bitboard.Board` from the mover's point of view and a
seeded ``numpy.random.Generator`` from its caller (the env, a match, a Kaggle adapter); it draws all
its randomness from that generator. Kaggle-style callables ``agent(obs, config)`` are adapted by
:class:`KaggleAgentPolicy`.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from connectx_gym.bitboard import Board, Geometry
from connectx_gym.plugins import check_entry_point

__all__ = [
    "AgentExitError",
    "IllegalMoveError",
    "KaggleAgentPolicy",
    "NoisyPolicy",
    "Policy",
    "PositionExecutor",
    "PositionJob",
    "RandomPolicy",
    "Struct",
    "answer_position",
    "choose_best",
    "kaggle_configuration",
    "kaggle_observation",
    "register_batch_actor",
    "require_depth",
    "require_playable",
]


class IllegalMoveError(ValueError):
    """A player answered a column that is off the board or full."""


class AgentExitError(RuntimeError):
    """Agent code called ``sys.exit`` (raised ``SystemExit``) while loading or choosing a move:
    an error naming the agent, instead of the end of the program that runs it."""


def agent_exit_error(exit_: SystemExit, who: str, when: str) -> AgentExitError:
    """The :class:`AgentExitError` of ``exit_``, raised by ``who`` ``when`` (one line)."""
    code = "" if exit_.code is None else repr(exit_.code)
    return AgentExitError(f"{who} called sys.exit({code}) {when}")


class Struct(dict[str, Any]):
    """A dict whose keys are also attributes, like kaggle-environments' ``Struct``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value


def kaggle_configuration(board: Board) -> Struct:
    """The ``config`` kaggle-environments gives a ConnectX agent for ``board``'s geometry."""
    g = board.geometry
    return Struct(
        rows=g.rows,
        columns=g.columns,
        inarow=g.inarow,
        timeout=2,
        actTimeout=2,
        agentTimeout=60,
        runTimeout=1200,
        episodeSteps=1000,
    )


def kaggle_observation(board: Board) -> Struct:
    """The ``obs`` kaggle-environments gives the player to move: board, mark and step."""
    return Struct(board=board.to_kaggle(), mark=board.mark, step=board.moves)


def require_depth(name: str, value: Any) -> int:
    """``value`` as a search depth: an integer >= 1 (not a bool), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def require_playable(board: Board) -> None:
    """Raise ``ValueError`` when ``board`` is finished: a policy has no move to choose there."""
    if board.is_terminal():
        raise ValueError(f"the game is over on {board!r}: there is no move to choose")


def choose_best(scores: np.ndarray, rng: np.random.Generator) -> int:
    """A column of maximal score, ties broken uniformly by ``rng``; NaN marks illegal columns."""
    scores = np.asarray(scores, dtype=np.float64)
    legal = ~np.isnan(scores)
    if not legal.any():
        raise ValueError("no legal column to choose from")
    best = np.flatnonzero(legal & (scores == np.max(scores[legal])))
    return int(best[0]) if best.size == 1 else int(best[rng.integers(best.size)])


class Policy(ABC):
    """A ConnectX player.

    Subclasses implement :meth:`act`; search agents also implement :meth:`scores`. ``last_info``
    holds whatever the policy wants to report about its latest move (search depth, whether the
    move was proven, ...).
    """

    name: str = "policy"

    def __init__(self) -> None:
        self.last_info: dict[str, Any] = {}

    @abstractmethod
    def act(self, board: Board, rng: np.random.Generator) -> int:
        """The column to play on ``board`` (not terminal), for the player to move."""

    def scores(self, board: Board) -> np.ndarray:
        """Per-column scores for the player to move (higher is better, NaN for illegal columns)."""
        raise NotImplementedError(f"{type(self).__name__} does not score columns")

    def reset(self) -> None:  # noqa: B027 - a no-op default, not an abstract method
        """Forget per-game state before a new game (the default keeps none)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class RandomPolicy(Policy):
    """Plays a uniformly random legal column."""

    name = "random"

    def act(self, board: Board, rng: np.random.Generator) -> int:
        legal = board.open_columns()  # a policy is never asked to move in a finished game
        return legal[int(rng.random() * len(legal))]

    def scores(self, board: Board) -> np.ndarray:
        return np.where(board.legal_mask(), 0.0, np.nan)


class NoisyPolicy(Policy):
    """Plays a uniformly random legal column with probability ``epsilon``, else ``policy``'s move.

    A softer version of a search opponent; spec suffix ``~epsilon`` (``"minimax:depth=3~0.25"``).
    """

    def __init__(self, policy: Policy, epsilon: float) -> None:
        super().__init__()
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.number)):
            raise ValueError(f"noise epsilon must be a number in [0, 1], got {epsilon!r}")
        if not 0.0 <= float(epsilon) <= 1.0:  # NaN fails this too
            raise ValueError(f"noise epsilon must be in [0, 1], got {epsilon!r}")
        self.policy, self.epsilon = policy, float(epsilon)
        self.name = f"{getattr(policy, 'name', 'policy')}~{self.epsilon:g}"

    def act(self, board: Board, rng: np.random.Generator) -> int:
        if rng.random() < self.epsilon:
            legal = board.open_columns()
            return legal[int(rng.integers(len(legal)))]
        return self.policy.act(board, rng)

    def reset(self) -> None:
        self.policy.reset()

    def __repr__(self) -> str:
        return f"NoisyPolicy({self.policy!r}, {self.epsilon:g})"


class KaggleAgentPolicy(Policy):
    """Adapts a Kaggle-style callable ``agent(obs, config) -> column``.

    ``obs`` has ``board`` (flat, row 0 at the top), ``mark`` and ``step``; ``config`` has ``rows``,
    ``columns``, ``inarow`` and Kaggle's timeouts; both allow attribute and key access. Agents that
    draw from Python's ``random`` or ``numpy.random`` global state are made reproducible: both are
    seeded from the caller's generator around each call and restored afterwards.

    An agent that calls ``sys.exit`` raises :class:`AgentExitError` naming it, rather than ending
    the program. ``os._exit`` (and a crash of native code) ends the process at once, beyond any
    protection in-process: run agents you do not trust in a child process.
    """

    def __init__(self, agent: Callable[[Any, Any], Any], name: str | None = None) -> None:
        super().__init__()
        if not callable(agent):
            raise TypeError(f"a Kaggle agent must be callable, got {agent!r}")
        self.agent = agent
        self.name = name or str(getattr(agent, "__name__", type(agent).__name__))

    def act(self, board: Board, rng: np.random.Generator) -> int:
        seed = int(rng.integers(2**32))
        # Kaggle agents use the global generators; seed them for this call only.
        python_state, numpy_state = random.getstate(), np.random.get_state()  # noqa: NPY002
        random.seed(seed)
        np.random.seed(seed)  # noqa: NPY002
        try:
            answer = self.agent(kaggle_observation(board), kaggle_configuration(board))
        except SystemExit as exit_:
            raise agent_exit_error(
                exit_, f"agent {self.name}", "instead of answering a column"
            ) from None
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)  # noqa: NPY002
        return validate_answer(answer, board, self.name)

    def __repr__(self) -> str:
        return f"KaggleAgentPolicy({self.name!r})"


def validate_answer(answer: Any, board: Board, who: str) -> int:
    """``answer`` as a legal column of ``board``, or :class:`IllegalMoveError` naming it."""
    if isinstance(answer, (bool, np.bool_)) or not isinstance(answer, (int, np.integer)):
        if isinstance(answer, (float, np.floating)) and float(answer).is_integer():
            answer = int(answer)
        else:
            raise IllegalMoveError(
                f"{who} answered {answer!r}, not a column; legal columns are {board.legal_moves()}"
            )
    column = int(answer)
    if not board.can_play(column):
        raise IllegalMoveError(
            f"{who} played illegal column {column}; legal columns are {board.legal_moves()}"
        )
    return column


@dataclass(frozen=True)
class PositionJob:
    """Position ``index`` of a set (the columns ``moves`` that reach it) and its own seed."""

    index: int
    moves: tuple[int, ...]
    seed: np.random.SeedSequence


def answer_position(player: Policy, geometry: Geometry, job: PositionJob, who: str) -> int | None:
    """``player``'s legal column in ``job``'s position, or None for an illegal answer.

    The player is reset first and draws from ``default_rng(job.seed)``: the one implementation
    that a local loop and remote workers share, so each answer depends on its own job only.
    """
    board = Board.from_moves(geometry, job.moves)
    player.reset()
    try:
        return validate_answer(player.act(board, np.random.default_rng(job.seed)), board, who)
    except IllegalMoveError:
        return None


class PositionExecutor(Protocol):
    """Answers positions somewhere (e.g. on Ray), yielding :func:`answer_position`'s results in
    job order."""

    def map_positions(
        self, policy: Any, geometry: Geometry, jobs: Sequence[PositionJob], who: str
    ) -> Iterator[int | None]: ...


#: ``"module.QualName"`` of a policy class -> the function answering a whole batch of its boards
#: (or that function's ``"module:attr"``, imported at first use); read by :mod:`connectx_gym.batch`.
BATCH_ACTORS: dict[str, Any] = {}


def register_batch_actor(policy_class: type | str, actor: str | Callable[..., Any]) -> None:
    """Answer the boards of every policy of exactly ``policy_class`` (a class or its
    ``"module.QualName"``) in the batched env with ``actor(policy, batch, rng) -> columns`` (a
    ``"module:attr"`` string: imported at first use). The module that defines a policy class
    registers its actor, so the core names no agent of a package above it."""
    if isinstance(policy_class, type):
        policy_class = f"{policy_class.__module__}.{policy_class.__qualname__}"
    if isinstance(actor, str):
        check_entry_point(actor, f"the batch actor of {policy_class}")
    BATCH_ACTORS[policy_class] = actor
