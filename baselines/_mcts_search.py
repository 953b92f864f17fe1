"""The loop of a Monte Carlo tree search: budgets, the tree's memory and the network's batches.

:class:`SearchTree` runs the kernels of :mod:`connectx_baselines._mcts_kernels` (compiled or
plain) under a budget of simulations and seconds. Without a network it runs UCT in chunks timed
to end near the deadline; with one it gathers a batch of leaves, asks the network for their
priors (and, with ``value_leaves``, their values in place of random rollouts) in one call and
backs them up; an :class:`EvaluationCache` keeps the network's answers for the positions of the
game being played, so that a position met again (by another move order, or in the next move's
search) costs no network call. numpy and the standard library only: the Kaggle export
embeds this source in ``main.py``, with the kernels as plain Python.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from connectx_baselines._mcts_kernels import (
    FLOAT_COLUMNS,
    INT_COLUMNS,
    OUTCOME,
    ROOT,
    STATE_NODES,
    STATE_PENDING,
    STATE_RANDOM,
    STATE_SIZE,
    UNKNOWN,
)

#: The most nodes one search's tree may hold (72 bytes a node): a search stops there.
MAX_NODES = 1 << 21
#: The most positions an :class:`EvaluationCache` holds before it empties (a game of Connect
#: Four searched at 50 ms a move asks for a few thousand).
CACHED_POSITIONS = 1 << 15
#: Uniform draws taken from the generator at a time (fewer when a search needs fewer).
RANDOM_DRAWS = 1 << 14
#: The most UCT simulations run in one compiled call.
MAX_CHUNK = 1 << 14
#: The largest logit :func:`tempered_logits` returns: a softmax gap this large is already 0.
TEMPERED_LOGIT_LIMIT = 1e9
#: Why a search stopped, as ``last_info["stopped"]`` says it.
STOPPED_SIMULATIONS, STOPPED_TIME, STOPPED_PROVEN, STOPPED_FULL = (
    "simulations",
    "time",
    "proven",
    "tree full",
)


def bit_indices(rows: int, columns: int, wide: bool) -> np.ndarray:
    """The bit of each cell, rows from the top (Kaggle's order), in the bitboard's layout:
    Python integers when the board does not fit in 64 bits (``wide``)."""
    height = rows + 1
    rows_from_top = np.arange(rows)[:, None]
    bits = np.arange(columns)[None, :] * height + (rows - 1 - rows_from_top)
    return bits.astype(object) if wide else bits.astype(np.int64)


def leaf_planes(currents: np.ndarray, masks: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """``(n, 2, rows, columns)`` float32 planes of ``n`` positions: the mover's discs, then the
    opponent's (the networks' input)."""
    own = (currents[:, None, None] >> bits[None]) & 1
    other = ((currents ^ masks)[:, None, None] >> bits[None]) & 1
    return np.stack([own, other], axis=1).astype(np.float32)


def tempered_logits(logits: np.ndarray, temperature: float) -> np.ndarray:
    """``logits`` divided by ``temperature`` (> 0), whose softmax is a search's priors: above 1
    flatter than the network's probabilities. Finite for any temperature: a tiny one makes the
    priors the network's favourite, not NaN."""
    if temperature == 1.0:
        return logits
    with np.errstate(over="ignore"):
        tempered = np.asarray(logits, dtype=np.float64) / temperature
    return np.clip(tempered, -TEMPERED_LOGIT_LIMIT, TEMPERED_LOGIT_LIMIT)


def masked_softmax(logits: np.ndarray, legal: np.ndarray) -> np.ndarray:
    """Row-wise softmax of ``logits`` over the ``legal`` columns (0 elsewhere)."""
    shifted = np.where(legal, logits, -np.inf)
    shifted = shifted - shifted.max(axis=1, keepdims=True)
    weights = np.where(legal, np.exp(shifted), 0.0)
    return weights / weights.sum(axis=1, keepdims=True)


def network_answers(
    evaluate: Callable[[np.ndarray], Any], planes: np.ndarray, value_leaves: bool, mirror: bool
) -> tuple[np.ndarray, np.ndarray | None]:
    """``evaluate``'s float64 logits of the boards ``planes`` and, with ``value_leaves``, their
    values (NaN read as 0; else None). With ``mirror`` each answer is the mean of the network's
    on the board and on its mirror image (columns reversed, the image's logits reversed back),
    both in one call: an ensemble of two views for the price of a batch twice as long."""
    count = len(planes)
    if mirror:
        planes = np.concatenate([planes, planes[..., ::-1]])
    if value_leaves:
        logits, values = evaluate(planes)
        values = np.asarray(values, dtype=np.float64).reshape(len(planes))
    else:
        logits, values = evaluate(planes), None
    logits = np.asarray(logits, dtype=np.float64)
    if mirror:
        logits = 0.5 * logits[:count] + 0.5 * logits[count:, ::-1]
        values = None if values is None else 0.5 * values[:count] + 0.5 * values[count:]
    return logits, None if values is None else np.nan_to_num(values)


class EvaluationCache:
    """The network's answers (logits, and values where they score the leaves) for the positions
    of one game, by position.

    :meth:`follow` empties it when a search's root does not follow the last root in a game (a
    new game, a move taken back), or the evaluator changes: what a search finds then depends on
    its own game alone, as it does without the cache. It also empties when full.
    """

    def __init__(self, columns: int, capacity: int = CACHED_POSITIONS) -> None:
        self.capacity = capacity
        self.slots: dict[tuple[int, int], int] = {}
        self.logits = np.zeros((capacity, columns))
        self.values = np.zeros(capacity)
        self.evaluator: tuple[Callable[[np.ndarray], Any], bool, bool] | None = None
        self.root = (0, 0, 0)  # the last root: its mask, first player's stones and stones played
        self.hits = 0

    def __len__(self) -> int:
        return len(self.slots)

    def clear(self) -> None:
        self.slots.clear()

    def follow(
        self,
        current: int,
        mask: int,
        moves: int,
        evaluate: Callable[[np.ndarray], Any],
        value_leaves: bool,
        mirror: bool = False,
    ) -> None:
        """Get ready to search ``current``, ``mask`` (``moves`` stones) with ``evaluate``: keep
        the answers only if the position is the last root or follows it in a game, and the
        evaluator (with its ``value_leaves`` and ``mirror``) is the last one."""
        last_mask, last_first, last_moves = self.root
        first = current if moves % 2 == 0 else current ^ mask  # the first player's stones
        follows = (
            moves >= last_moves and (last_mask & ~mask) == 0 and (first & last_mask) == last_first
        )
        if not follows or self.evaluator != (evaluate, value_leaves, mirror):
            self.clear()
        self.root = (mask, first, moves)
        self.evaluator = (evaluate, value_leaves, mirror)
        self.hits = 0

    def look_up(
        self, keys: list[tuple[int, int]], logits: np.ndarray, values: np.ndarray
    ) -> list[int]:
        """Copy the answers held for ``keys`` into the rows of ``logits`` and ``values``; the
        indices of the keys not held."""
        missing = []
        for index, key in enumerate(keys):
            slot = self.slots.get(key)
            if slot is None:
                missing.append(index)
            else:
                logits[index] = self.logits[slot]
                values[index] = self.values[slot]
        self.hits += len(keys) - len(missing)
        return missing

    def store(self, keys: list[tuple[int, int]], logits: np.ndarray, values: np.ndarray) -> None:
        """Hold the answers ``logits[k]``, ``values[k]`` for each ``keys[k]``."""
        for key, row_logits, value in zip(keys, logits, values, strict=True):
            slot = self.slots.get(key)
            if slot is None:
                if len(self.slots) >= self.capacity:
                    self.clear()
                slot = self.slots[key] = len(self.slots)
            self.logits[slot] = row_logits
            self.values[slot] = value


class SearchTree:
    """A reusable tree for one board size, searched by :meth:`search`.

    ``kernels`` is the kernels module (or anything with its functions), ``dims`` the board's
    dimensions as the kernels take them, ``order`` the columns centre first.
    """

    def __init__(
        self, kernels: Any, dims: Any, rows: int, columns: int, order: np.ndarray, wide: bool
    ) -> None:
        self.kernels, self.dims, self.order = kernels, dims, order
        self.columns, self.cells = columns, rows * columns
        self.bits = bit_indices(rows, columns, wide)
        self.position_dtype: Any = object if wide else np.int64
        # Untouched pages of np.zeros cost no memory: a tree takes what its searches use.
        self.ints = np.zeros((MAX_NODES, INT_COLUMNS), dtype=np.int64)
        self.floats = np.zeros((MAX_NODES, FLOAT_COLUMNS), dtype=np.float64)
        self.state = np.zeros(STATE_SIZE, dtype=np.int64)
        self.randoms = np.zeros(0)
        self.cache = EvaluationCache(columns)

    @property
    def nodes(self) -> int:
        return int(self.state[STATE_NODES])

    def _draws(self, needed: int, rng: np.random.Generator) -> None:
        """At least ``needed`` unused uniform draws in ``randoms``."""
        if int(self.state[STATE_RANDOM]) + needed > len(self.randoms):
            self.randoms = rng.random(max(needed, RANDOM_DRAWS))
            self.state[STATE_RANDOM] = 0

    def search(
        self,
        current: int,
        mask: int,
        moves: int,
        rng: np.random.Generator,
        simulations: int | None,
        seconds: float | None,
        exploration: float,
        rollouts: int,
        evaluate: Callable[[np.ndarray], Any] | None = None,
        batch: int = 8,
        value_leaves: bool = False,
        prove: Callable[[int, int], int | None] | None = None,
        fpu_reduction: float | None = None,
        mirror: bool = False,
    ) -> dict[str, Any]:
        """Search the position ``current``, ``mask`` (``moves`` stones, not over) until
        ``simulations`` are run or ``seconds`` pass (at least one simulation either way), the
        root is proven or the tree is full. UCT with random rollouts when ``evaluate`` is None;
        else PUCT whose priors are the softmax of ``evaluate(planes) -> logits``, ``batch``
        leaves a call, the leaves scored by ``rollouts`` random games each; with
        ``value_leaves`` (and ``rollouts`` 0), ``evaluate(planes) -> (logits, values)`` and each
        leaf is scored by its value, for the player to move there, clipped to [-1, 1]. With
        ``prove`` (PUCT only), each leaf is first offered to ``prove(current, mask)``: the game
        value it proves for the player to move there (+1, 0, -1), or None; a proven leaf is
        settled (MCTS-Solver) and backed up with its value, with no network call (the root is
        never offered: its value names no move). PUCT values a child not yet visited as a draw,
        or with ``fpu_reduction`` as its parent's value for the player choosing less
        ``fpu_reduction``. With ``mirror``, the network answers each leaf as the mean of its
        answers on the leaf and on its mirror image (:func:`network_answers`). Returns the
        visits and proven outcomes of the root's moves by column, the simulations run and why
        it stopped."""
        if value_leaves and (evaluate is None or rollouts != 0):
            raise ValueError("value_leaves scores the leaves by a network's values: no rollouts")
        if not value_leaves and rollouts < 1:
            raise ValueError("without value_leaves the leaves need rollouts >= 1")
        if prove is not None and evaluate is None:
            raise ValueError("prove applies to PUCT: give evaluate")
        start = time.perf_counter()
        deadline = math.inf if seconds is None else start + seconds
        target = math.inf if simulations is None else simulations
        k = self.kernels
        k.new_tree(self.ints, self.floats, self.state)
        if evaluate is not None:
            self.cache.follow(current, mask, moves, evaluate, value_leaves, mirror)
        run, stopped = 0, STOPPED_SIMULATIONS
        step_seconds = 0.0  # the last step's time: a chunk's per simulation, or a batch's
        while run < target:
            if self.ints[ROOT, OUTCOME] != UNKNOWN:
                stopped = STOPPED_PROVEN
                break
            chunk = int(min(target - run, MAX_CHUNK if evaluate is None else batch))
            if run and seconds is not None:
                # a step that would most likely pass the deadline is not begun
                left = deadline - time.perf_counter()
                if evaluate is None:
                    chunk = min(chunk, int(0.5 * left / max(step_seconds, 1e-9)))
                if chunk < 1 or (evaluate is not None and 1.25 * step_seconds > left):
                    stopped = STOPPED_TIME
                    break
            elif seconds is not None and evaluate is None:
                chunk = min(chunk, 16)  # a first chunk, to time the next
            if self.nodes + self.columns > MAX_NODES:
                stopped = STOPPED_FULL
                break
            self._draws(rollouts * self.cells * (1 + min(chunk, 64)), rng)
            began = time.perf_counter()
            if evaluate is None:
                done = k.uct_run(
                    current, mask, moves, chunk, exploration, rollouts, self.ints, self.floats,
                    self.state, self.randoms, self.order, self.dims,
                )  # fmt: skip
            else:
                done = self._batch(
                    current, mask, moves, chunk, exploration, rollouts, evaluate, value_leaves,
                    prove, deadline, math.nan if fpu_reduction is None else fpu_reduction, mirror,
                )  # fmt: skip
            if not done:  # cannot happen with room and draws for a simulation; never spin
                stopped = STOPPED_FULL
                break
            run += int(done)
            step_seconds = time.perf_counter() - began
            if evaluate is None:
                step_seconds /= int(done)
        if self.ints[ROOT, OUTCOME] != UNKNOWN:
            stopped = STOPPED_PROVEN
        visits = np.full(self.columns, np.nan)
        outcomes = np.full(self.columns, UNKNOWN, dtype=np.int64)
        k.root_visits(self.ints, visits)
        k.root_outcomes(self.ints, outcomes)
        return {
            "visits": visits,
            "outcomes": outcomes,
            "simulations": run,
            "stopped": stopped,
            "nodes": self.nodes,
            "cached": self.cache.hits if evaluate is not None else 0,
            "seconds": time.perf_counter() - start,
        }

    def _batch(
        self,
        current: int,
        mask: int,
        moves: int,
        batch: int,
        exploration: float,
        rollouts: int,
        evaluate: Callable[[np.ndarray], Any],
        value_leaves: bool,
        prove: Callable[[int, int], int | None] | None,
        deadline: float,
        fpu_reduction: float,
        mirror: bool,
    ) -> int:
        """One batch of PUCT simulations: gather leaves, offer them to ``prove``, evaluate the
        unproven ones together, back them up. A leaf's value is for the player who chose it,
        the opponent of the one the network sees to move there: the network's value changes
        sign."""
        k = self.kernels
        leaves = np.zeros(batch, dtype=np.int64)
        currents = np.zeros(batch, dtype=self.position_dtype)
        masks = np.zeros(batch, dtype=self.position_dtype)
        values = np.zeros(batch)
        done = k.gather_leaves(
            current, mask, moves, batch, exploration, rollouts, self.ints, self.floats,
            self.state, self.randoms, self.order, self.dims, leaves, currents, masks, values,
            fpu_reduction,
        )  # fmt: skip
        pending = int(self.state[STATE_PENDING])
        if pending:
            currents, masks = currents[:pending], masks[:pending]
            outcomes = np.full(pending, UNKNOWN, dtype=np.int64)
            if prove is not None:
                for index in range(pending):
                    if leaves[index] == ROOT:  # its value alone names no move: search it
                        continue
                    if time.perf_counter() >= deadline:
                        break  # the rest go to the network, which answers them at once
                    value = prove(int(currents[index]), int(masks[index]))
                    if value is not None:  # the mover's value there: the chooser's is minus it
                        outcomes[index] = -value
                k.prove_leaves(pending, leaves, outcomes, self.ints)
            logits = np.zeros((pending, self.columns))
            mover_values = np.zeros(pending)
            unproven = np.flatnonzero(outcomes == UNKNOWN)
            if len(unproven):
                logits[unproven], mover_values[unproven] = self._network_answers(
                    currents[unproven], masks[unproven], evaluate, value_leaves, mirror
                )
            if value_leaves:
                values[:pending] = -np.clip(mover_values, -1.0, 1.0)
            proven = outcomes != UNKNOWN
            values[:pending][proven] = outcomes[proven]
            full = (masks[:, None] >> self.bits[0][None, :]) & 1  # top cells
            priors = masked_softmax(logits, full == 0)
            k.finish_leaves(pending, leaves, priors, values, self.ints, self.floats)
        return int(done) + pending

    def _network_answers(
        self,
        currents: np.ndarray,
        masks: np.ndarray,
        evaluate: Callable[[np.ndarray], Any],
        value_leaves: bool,
        mirror: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The network's logits for the positions ``currents``, ``masks``, and its values for
        their movers (zeros unless ``value_leaves``): from the cache where it holds them, else
        from one call of ``evaluate`` (:func:`network_answers`, with ``mirror``)."""
        count = len(currents)
        keys = [(int(c), int(m)) for c, m in zip(currents, masks, strict=True)]
        logits = np.zeros((count, self.columns))
        mover_values = np.zeros(count)
        missing = self.cache.look_up(keys, logits, mover_values)
        if missing:
            # one question a position: two descents of a batch may reach it by two orders
            first_asked = {keys[index]: index for index in reversed(missing)}
            asked = sorted(first_asked.values())
            planes = leaf_planes(currents[asked], masks[asked], self.bits)
            logits[asked], new_values = network_answers(evaluate, planes, value_leaves, mirror)
            if new_values is not None:
                mover_values[asked] = new_values
            self.cache.store([keys[index] for index in asked], logits[asked], mover_values[asked])
            answered = [first_asked[keys[index]] for index in missing]
            logits[missing], mover_values[missing] = logits[answered], mover_values[answered]
        return logits, mover_values
