"""The kernels of Monte Carlo tree search (:mod:`connectx_baselines.mcts`): a tree in arrays.

Written on integer bitboards, like the other search kernels: :mod:`connectx_gym._jit` compiles
this module with numba for boards of up to 64 bits and runs it on Python integers otherwise
(the Kaggle export runs it as plain Python). Only numpy arrays and the core's rules are used.

A tree is one row per node in two arrays: ``ints`` (columns :data:`VISITS`, :data:`FIRST_CHILD`,
:data:`CHILDREN`, :data:`COLUMN`, :data:`PARENT`, :data:`OUTCOME`, :data:`PENDING`) and ``floats``
(:data:`VALUE_SUM`, :data:`PRIOR`). A node's children are consecutive rows, centre column first.
Nodes hold no position: a descent replays the columns from the root.

Values and outcomes are from the point of view of the player who made the move into the node:
the player who chooses it. An outcome is proven: :data:`WIN`, :data:`DRAW`, :data:`LOSS`, or
:data:`UNKNOWN`. Expanding a node proves a child at once when its move wins, fills the board,
lets the opponent win on the next move, or (where no move wins at once) makes a threat the
opponent cannot stop (two cells that win at once, one right below another, or one above every
opponent move). Proofs then climb the tree (MCTS-Solver: a node with a winning child is lost for
the player who chose it, a node whose children are all proven is worth the best of them); the
caller may prove gathered leaves too (:func:`prove_leaves`: the exact solver's values).

``state`` holds the node count (:data:`STATE_NODES`), the next unused number of ``randoms``
(:data:`STATE_RANDOM`: uniform draws in [0, 1) from the caller's generator, refilled by the
caller between calls) and the number of leaves gathered for the network (:data:`STATE_PENDING`).
"""

from __future__ import annotations

import math

from connectx_baselines._kernels_common import non_losing_moves
from connectx_gym._dims import as_dims
from connectx_gym._jit import helper
from connectx_gym.bitboard import column_mask, has_line, popcount, possible_moves, winning_cells

# Columns of ``ints``.
VISITS = 0
FIRST_CHILD = 1  # -1: not expanded
CHILDREN = 2
COLUMN = 3
PARENT = 4  # -1: the root
OUTCOME = 5
PENDING = 6  # 1: gathered for the network, its children's priors not yet set
INT_COLUMNS = 7
# Columns of ``floats``.
VALUE_SUM = 0
PRIOR = 1
FLOAT_COLUMNS = 2
# Outcomes, worth their own value (UNKNOWN is no value).
WIN = 1
DRAW = 0
LOSS = -1
UNKNOWN = 2
# Indices of ``state``.
STATE_NODES = 0
STATE_RANDOM = 1
STATE_PENDING = 2
STATE_SIZE = 3

ROOT = 0
_UNVISITED = 1e300  # UCT's score of a child never visited: tried before any other


@helper
def new_node(ints, floats, state, parent: int, column: int) -> int:
    """A fresh node (its row), child of ``parent`` by ``column``, unexpanded and unproven."""
    node = state[STATE_NODES]
    state[STATE_NODES] = node + 1
    ints[node, VISITS] = 0
    ints[node, FIRST_CHILD] = -1
    ints[node, CHILDREN] = 0
    ints[node, COLUMN] = column
    ints[node, PARENT] = parent
    ints[node, OUTCOME] = UNKNOWN
    ints[node, PENDING] = 0
    floats[node, VALUE_SUM] = 0.0
    floats[node, PRIOR] = 0.0
    return node


def new_tree(ints, floats, state) -> None:
    """Empty the tree and make its root (row :data:`ROOT`)."""
    state[STATE_NODES] = 0
    state[STATE_PENDING] = 0
    new_node(ints, floats, state, -1, -1)


@helper
def wins_next_move(stones: int, mask: int, d) -> bool:
    """Whether the player who owns ``stones`` and has just moved wins on their next move whatever
    the opponent (to move, with no win at once) plays: the opponent has no move that keeps
    :func:`~connectx_baselines._kernels_common.non_losing_moves` (two cells that win at once,
    one right below another, or every move under one)."""
    threats = winning_cells(stones, d.board & ~mask, d.height, d.inarow, d.size)
    return non_losing_moves(mask, threats, d) == 0


@helper
def expand(ints, floats, state, node: int, current: int, mask: int, moves: int, order, d) -> None:
    """Give ``node`` (the position ``current``, ``mask`` after ``moves`` stones, not over) a
    child per legal column in ``order``, each of prior ``1 / children``, and prove the children
    whose move wins, fills the board, lets the opponent win on the next move or, where no move
    wins at once (which is then the one to play), wins on the mover's next move whatever the
    opponent plays (:func:`wins_next_move`)."""
    possible = possible_moves(mask, d.bottom, d.board)
    empty = d.board & ~mask
    own_wins = winning_cells(current, empty, d.height, d.inarow, d.size)
    opponent_wins = winning_cells(current ^ mask, empty, d.height, d.inarow, d.size)
    first = state[STATE_NODES]
    count = 0
    for index in range(d.columns):
        column = int(order[index])
        move = possible & column_mask(column, d.height)
        if move:
            child = new_node(ints, floats, state, node, column)
            if move & own_wins:
                ints[child, OUTCOME] = WIN
            elif moves + 1 == d.cells:
                ints[child, OUTCOME] = DRAW
            elif opponent_wins & ~move & possible_moves(mask | move, d.bottom, d.board):
                ints[child, OUTCOME] = LOSS
            elif not possible & own_wins and wins_next_move(current | move, mask | move, d):
                ints[child, OUTCOME] = WIN
            count += 1
    ints[node, FIRST_CHILD] = first
    ints[node, CHILDREN] = count
    for child in range(first, first + count):
        floats[child, PRIOR] = 1.0 / count


@helper
def settle(ints, node: int) -> None:
    """Prove ``node`` from its children where they decide it, and its ancestors in turn."""
    while node >= 0 and ints[node, OUTCOME] == UNKNOWN and ints[node, FIRST_CHILD] >= 0:
        first = ints[node, FIRST_CHILD]
        best = LOSS - 1
        all_known = True
        for child in range(first, first + ints[node, CHILDREN]):
            outcome = ints[child, OUTCOME]
            if outcome == UNKNOWN:
                all_known = False
            elif outcome > best:
                best = outcome
        if best == WIN:
            ints[node, OUTCOME] = LOSS
        elif all_known:
            ints[node, OUTCOME] = -best
        else:
            return
        node = ints[node, PARENT]


@helper
def backup(ints, floats, node: int, value: float) -> None:
    """Add a visit and ``value`` (for the player who chose ``node``) up to the root, the value
    changing sides at each level."""
    while node >= 0:
        ints[node, VISITS] += 1
        floats[node, VALUE_SUM] += value
        value = -value
        node = ints[node, PARENT]


@helper
def virtual_loss(ints, floats, node: int, sign: int) -> None:
    """Count (``sign`` 1) or withdraw (-1) a lost visit on ``node`` and its ancestors, for the
    player choosing each: the next descents of a batch then prefer other paths."""
    while node >= 0:
        ints[node, VISITS] += sign
        floats[node, VALUE_SUM] -= sign
        node = ints[node, PARENT]


@helper
def select_child(
    ints, floats, node: int, exploration: float, puct: bool, fpu_reduction: float
) -> int:
    """The child of ``node`` of highest score: UCT (``Q + c sqrt(ln N / n)``, unvisited
    children first) or PUCT (``Q + c P sqrt(N) / (1 + n)``). An unvisited child's Q in PUCT (its
    first-play urgency) is 0, a draw, when ``fpu_reduction`` is NaN, else ``node``'s own Q for
    the player choosing there less ``fpu_reduction``. Proven children count their outcome as Q;
    lost ones are never chosen while another is not."""
    first = ints[node, FIRST_CHILD]
    parent_visits = max(ints[node, VISITS], 1)
    log_visits = math.log(parent_visits)
    root_visits = math.sqrt(parent_visits)
    unvisited = 0.0
    if puct and not math.isnan(fpu_reduction):
        # node's value sum is for the player who chose node: the chooser here is the other one
        unvisited = -floats[node, VALUE_SUM] / parent_visits - fpu_reduction
    best = first
    best_score = -math.inf
    for child in range(first, first + ints[node, CHILDREN]):
        outcome = ints[child, OUTCOME]
        visits = ints[child, VISITS]
        if outcome == LOSS:
            score = -1e300
        else:
            if outcome != UNKNOWN:
                value = float(outcome)
            elif visits > 0:
                value = floats[child, VALUE_SUM] / visits
            else:
                value = unvisited
            if puct:
                score = value + exploration * floats[child, PRIOR] * root_visits / (1 + visits)
            elif visits == 0:
                score = _UNVISITED
            else:
                score = value + exploration * math.sqrt(log_visits / visits)
        if score > best_score:
            best, best_score = child, score
    return best


@helper
def rollout(current: int, mask: int, moves: int, randoms, state, d) -> float:
    """The result of random play from ``current``, ``mask`` (not over) to the end, for the
    player to move there: 1 won, 0 drawn, -1 lost (one draw of ``randoms`` per move)."""
    sign = 1.0
    while moves < d.cells:
        possible = possible_moves(mask, d.bottom, d.board)
        pick = int(randoms[state[STATE_RANDOM]] * popcount(possible))
        state[STATE_RANDOM] += 1
        for _ in range(pick):
            possible &= possible - 1
        move = possible & -possible
        if has_line(current | move, d.height, d.inarow, d.size):
            return sign
        current, mask = current ^ mask, mask | move
        moves += 1
        sign = -sign
    return 0.0


@helper
def leaf_value(current: int, mask: int, moves: int, rollouts: int, randoms, state, d) -> float:
    """The mean result of ``rollouts`` random games from the leaf ``current``, ``mask``, for the
    player who chose it (the opponent of the player to move there); 0 with no rollouts (the
    network's value scores the leaf: :func:`finish_leaves`)."""
    if rollouts == 0:
        return 0.0
    total = 0.0
    for _ in range(rollouts):
        total += rollout(current, mask, moves, randoms, state, d)
    return -total / rollouts


def uct_run(
    current: int,
    mask: int,
    moves: int,
    simulations: int,
    exploration: float,
    rollouts: int,
    ints,
    floats,
    state,
    randoms,
    order,
    dims,
) -> int:
    """Run up to ``simulations`` UCT simulations (select, expand, roll out, back up) from the
    root position; the number run. Stops early once the root is proven, or when the tree or
    ``randoms`` may not hold one more simulation (the caller grows or refills them)."""
    d = as_dims(dims)
    done = 0
    while done < simulations and ints[ROOT, OUTCOME] == UNKNOWN:
        if state[STATE_NODES] + d.columns > ints.shape[0]:
            break
        if state[STATE_RANDOM] + rollouts * d.cells > randoms.shape[0]:
            break
        node, here, stones, count = ROOT, current, mask, moves
        while ints[node, FIRST_CHILD] >= 0 and ints[node, OUTCOME] == UNKNOWN:
            node = select_child(ints, floats, node, exploration, False, math.nan)
            move = possible_moves(stones, d.bottom, d.board) & column_mask(
                int(ints[node, COLUMN]), d.height
            )
            here, stones, count = here ^ stones, stones | move, count + 1
        if ints[node, OUTCOME] == UNKNOWN:
            expand(ints, floats, state, node, here, stones, count, order, d)
            settle(ints, node)
        if ints[node, OUTCOME] != UNKNOWN:
            value = float(ints[node, OUTCOME])
        else:
            value = leaf_value(here, stones, count, rollouts, randoms, state, d)
        backup(ints, floats, node, value)
        done += 1
    return done


def gather_leaves(
    current: int,
    mask: int,
    moves: int,
    batch: int,
    exploration: float,
    rollouts: int,
    ints,
    floats,
    state,
    randoms,
    order,
    dims,
    leaves,
    leaf_current,
    leaf_mask,
    leaf_values,
    fpu_reduction: float,
) -> int:
    """PUCT descents from the root until ``batch`` simulations are finished or wait for the
    network's priors (unvisited children valued as :func:`select_child` says by
    ``fpu_reduction``): each such leaf is expanded, rolled out when ``rollouts`` is not 0 (its
    value kept in ``leaf_values``; else the caller sets it from the network) and given a virtual
    loss; its row and position go to ``leaves``, ``leaf_current`` and ``leaf_mask`` and
    ``state[STATE_PENDING]`` counts them. A descent ending on a proven node backs up its
    outcome at once (a finished simulation). Stops early when the root is proven, a descent meets
    a waiting leaf, or the tree or ``randoms`` may not hold one more. Returns the simulations
    finished here."""
    d = as_dims(dims)
    done = 0
    state[STATE_PENDING] = 0
    while done + state[STATE_PENDING] < batch and ints[ROOT, OUTCOME] == UNKNOWN:
        if state[STATE_NODES] + d.columns > ints.shape[0]:
            break
        if state[STATE_RANDOM] + rollouts * d.cells > randoms.shape[0]:
            break
        node, here, stones, count = ROOT, current, mask, moves
        while (
            ints[node, FIRST_CHILD] >= 0
            and ints[node, OUTCOME] == UNKNOWN
            and ints[node, PENDING] == 0
        ):
            node = select_child(ints, floats, node, exploration, True, fpu_reduction)
            move = possible_moves(stones, d.bottom, d.board) & column_mask(
                int(ints[node, COLUMN]), d.height
            )
            here, stones, count = here ^ stones, stones | move, count + 1
        if ints[node, PENDING]:
            break
        if ints[node, OUTCOME] == UNKNOWN:
            expand(ints, floats, state, node, here, stones, count, order, d)
            settle(ints, node)
        if ints[node, OUTCOME] != UNKNOWN:
            backup(ints, floats, node, float(ints[node, OUTCOME]))
            done += 1
            continue
        pending = state[STATE_PENDING]
        leaves[pending] = node
        leaf_current[pending] = here
        leaf_mask[pending] = stones
        leaf_values[pending] = leaf_value(here, stones, count, rollouts, randoms, state, d)
        ints[node, PENDING] = 1
        virtual_loss(ints, floats, node, 1)
        state[STATE_PENDING] = pending + 1
    return done


def finish_leaves(count: int, leaves, priors, leaf_values, ints, floats) -> None:
    """Give the children of the first ``count`` gathered leaves their priors (``priors[k,
    column]``), withdraw the leaves' virtual losses and back up their values."""
    for index in range(count):
        node = leaves[index]
        first = ints[node, FIRST_CHILD]
        for child in range(first, first + ints[node, CHILDREN]):
            floats[child, PRIOR] = priors[index, ints[child, COLUMN]]
        ints[node, PENDING] = 0
        virtual_loss(ints, floats, node, -1)
        backup(ints, floats, node, leaf_values[index])


def prove_leaves(count: int, leaves, outcomes, ints) -> None:
    """Give each of the first ``count`` gathered leaves its proven outcome ``outcomes[k]`` (for
    the player who chose it; :data:`UNKNOWN` where none was proven), and settle its ancestors."""
    for index in range(count):
        if outcomes[index] != UNKNOWN:
            node = leaves[index]
            ints[node, OUTCOME] = outcomes[index]
            settle(ints, ints[node, PARENT])


def root_visits(ints, out) -> None:
    """Visits of the root's children by column into ``out`` (columns with no child untouched)."""
    first = ints[ROOT, FIRST_CHILD]
    for child in range(first, first + ints[ROOT, CHILDREN]):
        out[ints[child, COLUMN]] = ints[child, VISITS]


def root_outcomes(ints, out) -> None:
    """Proven outcomes of the root's children by column into ``out`` (for the root's mover)."""
    first = ints[ROOT, FIRST_CHILD]
    for child in range(first, first + ints[ROOT, CHILDREN]):
        out[ints[child, COLUMN]] = ints[child, OUTCOME]
