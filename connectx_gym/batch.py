"""Opponents answering many boards at once: the batch protocol of the batched env.

A policy answers a whole :class:`BoardBatch` (the positions of every board that faces it, each seen
from the player to move) in one call when it offers ``act_batch(batch, rng) -> columns``, or when
a batch actor is registered for its class (:func:`register_batch_actor`, a lazy ``"module:attr"``
entry point like the policy registry's, registered by the module that defines the class). Built
in: :class:`~connectx_gym.policy.RandomPolicy` (one numba kernel),
:class:`~connectx_gym.policy.NoisyPolicy` (``spec~epsilon``: a random column with probability
epsilon, the wrapped policy's batch for the rest) and :class:`~connectx_gym.files.NumpyNetPolicy`
(one forward pass for all boards); the search package registers its own (``onestep``,
``minimax``, ``negamax``). Any other policy (Kaggle callables, Python policies) is asked board by
board. All randomness comes from the
caller's generator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from connectx_gym import _vector_kernels
from connectx_gym._dims import dims_arg
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.plugins import load_entry_point
from connectx_gym.policy import (
    BATCH_ACTORS,
    IllegalMoveError,
    NoisyPolicy,
    Policy,
    RandomPolicy,
    register_batch_actor,
    validate_answer,
)

__all__ = [
    "BoardBatch",
    "batch_actor",
    "choose_best_batch",
    "choose_columns",
    "register_batch_actor",
]

BatchActor = Callable[["BoardBatch", np.random.Generator], np.ndarray]


class BoardBatch:
    """Positions of ``len(current)`` boards of one geometry, each from the player to move.

    ``current`` and ``mask`` are as in :class:`~connectx_gym.Board` (``int64`` arrays when the board
    fits in 64 bits, else ``object`` arrays of Python integers); ``moves`` counts stones. None of
    the positions is over.
    """

    def __init__(
        self, geometry: Geometry, current: np.ndarray, mask: np.ndarray, moves: np.ndarray
    ) -> None:
        self.geometry, self.current, self.mask, self.moves = geometry, current, mask, moves
        self._kernels = _vector_kernels.for_geometry(geometry.fits_64_bits)
        self._dims = dims_arg(geometry)

    def __len__(self) -> int:
        return len(self.current)

    def board(self, k: int) -> Board:
        """Board ``k`` as an immutable :class:`~connectx_gym.Board`."""
        return Board(self.geometry, int(self.current[k]), int(self.mask[k]), int(self.moves[k]))

    def legal(self) -> np.ndarray:
        """``(n, columns)`` bool: the open columns of each board."""
        g = self.geometry
        out = np.zeros((len(self), g.columns), dtype=np.int8)
        playing = np.full(len(self), -1, dtype=np.int64)
        self._kernels.legal_masks(self.mask, playing, self._dims, out)
        return out.astype(bool)

    def planes(self) -> np.ndarray:
        """``(n, 2, rows, columns)`` int8: the mover's stones, then the other player's (the env's
        observation from the mover's point of view)."""
        g = self.geometry
        out = np.zeros((len(self), 2, g.rows, g.columns), dtype=np.int8)
        boards = np.arange(len(self), dtype=np.int64)
        self._kernels.write_planes(self.current, self.mask, boards, self._dims, out)
        return out


def batch_actor(policy: Policy) -> BatchActor | None:
    """A function answering a whole batch for ``policy``, or None (then it plays board by board)."""
    own: BatchActor | None = getattr(policy, "act_batch", None)
    if callable(own):
        return own
    if type(policy) is RandomPolicy:
        return _random_act_batch
    if isinstance(policy, NoisyPolicy):
        return lambda batch, rng: _noisy_act_batch(policy, batch, rng)
    cls = type(policy)
    key = f"{cls.__module__}.{cls.__qualname__}"
    if key == "connectx_gym.files.NumpyNetPolicy":
        return lambda batch, rng: _net_act_batch(policy, batch, rng)
    actor = BATCH_ACTORS.get(key)
    if actor is None:
        return None
    if isinstance(actor, str):
        actor = load_entry_point(actor, f"the batch actor of {key}")
        BATCH_ACTORS[key] = actor
    function = actor
    return lambda batch, rng: function(policy, batch, rng)


def choose_columns(
    policy: Policy, batch: BoardBatch, rng: np.random.Generator, who: str
) -> np.ndarray:
    """``policy``'s column on every board of ``batch`` (``int64``), checked legal: an answer off the
    board or in a full column raises :class:`~connectx_gym.IllegalMoveError` naming ``who``."""
    actor = batch_actor(policy)
    if actor is None:
        columns = np.empty(len(batch), dtype=np.int64)
        for k in range(len(batch)):
            board = batch.board(k)
            columns[k] = validate_answer(policy.act(board, rng), board, who)
        return columns
    answer = np.asarray(actor(batch, rng))
    if actor is _random_act_batch:  # legal by construction
        return answer
    if answer.shape != (len(batch),) or answer.dtype.kind not in "iu":
        raise IllegalMoveError(
            f"{who} answered a batch of shape {answer.shape} and dtype {answer.dtype}; "
            f"expected ({len(batch)},) integer columns"
        )
    columns = answer.astype(np.int64)
    on_board = (columns >= 0) & (columns < batch.geometry.columns)
    legal = batch.legal()
    ok = on_board.copy()
    ok[on_board] = legal[np.flatnonzero(on_board), columns[on_board]]
    if not ok.all():
        k = int(np.flatnonzero(~ok)[0])
        validate_answer(
            int(columns[k]), batch.board(k), who
        )  # raises, naming column and legal ones
    return columns


def choose_best_batch(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per row of ``scores`` (NaN: illegal), a column of maximal score, ties broken uniformly by
    ``rng`` (one draw per row): :func:`~connectx_gym.choose_best` for a batch."""
    scores = np.asarray(scores, dtype=np.float64)
    legal = ~np.isnan(scores)
    if not legal.any(axis=1).all():
        raise ValueError("no legal column to choose from")
    filled = np.where(legal, scores, -np.inf)
    ties = legal & (filled == filled.max(axis=1, keepdims=True))
    pick = (rng.random(len(scores)) * ties.sum(axis=1)).astype(np.int64)
    columns: np.ndarray = np.argmax(np.cumsum(ties, axis=1) > pick[:, None], axis=1)
    return columns.astype(np.int64)


def _random_act_batch(batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(len(batch), dtype=np.int64)
    boards = np.arange(len(batch), dtype=np.int64)
    batch._kernels.random_columns(batch.mask, boards, rng.random(len(batch)), batch._dims, out)
    return out


def _subset(batch: BoardBatch, picked: np.ndarray) -> BoardBatch:
    return BoardBatch(
        batch.geometry, batch.current[picked], batch.mask[picked], batch.moves[picked]
    )


def _noisy_act_batch(
    policy: NoisyPolicy, batch: BoardBatch, rng: np.random.Generator
) -> np.ndarray:
    noisy = rng.random(len(batch)) < policy.epsilon
    out = np.empty(len(batch), dtype=np.int64)
    if noisy.any():
        out[noisy] = _random_act_batch(_subset(batch, noisy), rng)
    if not noisy.all():
        rest = ~noisy
        name = getattr(policy.policy, "name", "policy")
        out[rest] = choose_columns(policy.policy, _subset(batch, rest), rng, name)
    return out


def _net_act_batch(policy: Any, batch: BoardBatch, rng: np.random.Generator) -> np.ndarray:
    weights = policy.weights
    trained = weights.geometry  # a Geometry, or anything with rows, columns and inarow
    if (int(trained.rows), int(trained.columns), int(trained.inarow)) != batch.geometry.key:
        raise ValueError(
            f"{policy.name} was trained on {weights.geometry!r}, not {batch.geometry!r}"
        )
    logits = weights.logits(batch.planes()).astype(np.float64)
    legal = batch.legal()
    if policy.deterministic:
        return choose_best_batch(np.where(legal, logits, np.nan), rng)
    masked = np.where(legal, logits, -np.inf)
    weights_ = np.exp(masked - masked.max(axis=1, keepdims=True))
    cumulative = np.cumsum(weights_, axis=1)
    draw = rng.random(len(batch))[:, None] * cumulative[:, -1:]
    columns: np.ndarray = np.argmax(cumulative > draw, axis=1)
    return columns.astype(np.int64)
