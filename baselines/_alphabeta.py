"""Kernel of the alpha-beta agent: a depth-limited negamax with a transposition table.

Scores are integers from the point of view of the player to move: a win with ``s`` stones on the
board once it is made scores ``WIN - s`` (sooner is better), a loss the negation, a draw 0, and a
position at the horizon the window heuristic of :mod:`connectx_baselines.heuristic` (far below
``WIN``). Win scores count stones from the empty board, not plies from the root, so the table stays
valid from one move to the next.

Each node first settles what needs no search: a move that wins at once, a loss when the opponent
has two immediate wins (or every move puts a disc under an opponent's winning cell), the single
forced block. Only the moves that do not hand the opponent a win are searched, the table's move
first, then the moves making the most winning cells, centre first on ties.

The search keeps its own stack (numba cannot cache self-recursive functions) in the frames of
:mod:`connectx_baselines._layout`, shares its helpers with the solver
(:mod:`connectx_baselines._kernels_common`: non-losing moves, the threat move sorter, the table
probe and store) and reads the clock every ``check_every`` nodes; past ``deadline`` (or once another
thread set ``stats[STAT_HALT]``) it stops and sets ``stats[STAT_ABORTED]``.

:func:`deepen` is the agent's whole move: depth 1, 2, 3, ... over the root columns
(:func:`root_scores`), best columns of the last depth first, until the depth limit, a proven
result or the clock; the agent calls it for one board and the batch kernels for many.
"""

from __future__ import annotations

import numpy as np

from connectx_baselines._clock import interruptible_monotonic, monotonic
from connectx_baselines._kernels_common import (
    move_to_front,
    non_losing_moves,
    open_frame,
    position_key,
    probe,
    raise_value,
    sort_moves,
    store,
    threats_of,
)
from connectx_baselines._layout import (
    BOUND_ALPHA,
    BOUND_BETA,
    BOUND_VALUE,
    FRAME_BEST,
    FRAME_COUNT,
    FRAME_CURRENT,
    FRAME_MASK,
    FRAME_MOVES,
    FRAME_NEXT,
    STAT_ABORTED,
    STAT_HALT,
    STAT_INTERRUPTIBLE,
    STAT_NEXT_CHECK,
    STAT_NODES,
    STOPPED_LIMIT,
    STOPPED_PROVEN,
    STOPPED_TIME,
)
from connectx_baselines.heuristic import window_score
from connectx_gym._dims import Dims, as_dims
from connectx_gym.bitboard import column_mask, has_line, possible_moves, winning_cells

#: Score of a win made with no stone on the board; real wins score ``WIN - stones``.
WIN = 1_000_000
#: Bound of every score.
INFINITY = 2 * WIN

# Columns of a transposition table row after its key: the node's score, the depth it was
# searched to, what the score is (exact, lower or upper bound) and its best column (-1: none).
TABLE_SCORE = 1
TABLE_DEPTH = 2
TABLE_FLAG = 3
TABLE_MOVE = 4
TABLE_WIDTH = 5

_EXACT = 0
_LOWER = 1
_UPPER = 2


def now(stats: np.ndarray) -> float:
    """``time.perf_counter()``, callable from compiled code (:mod:`connectx_baselines._clock`):
    through Python, so that Ctrl-C stops the search, when ``stats[STAT_INTERRUPTIBLE]`` asks for
    it."""
    if stats[STAT_INTERRUPTIBLE]:
        return interruptible_monotonic()
    return monotonic()


def _settle(
    current: int,
    mask: int,
    stones: int,
    depth: int,
    threats: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    d: Dims,
) -> tuple[bool, int, int]:
    """``(settled, score, moves)``: the score of a position that needs no search, or the moves
    worth searching (those that do not hand the opponent a win). ``threats``: the opponent's
    winning cells, or -1 to compute them here."""
    possible = possible_moves(mask, d.bottom, d.board)
    if possible == 0:
        return True, 0, 0
    if winning_cells(current, possible, d.height, d.inarow, d.size) != 0:
        return True, WIN - stones - 1, 0
    opponent = current ^ mask
    if threats < 0:
        threats = winning_cells(opponent, d.board & ~mask, d.height, d.inarow, d.size)
    moves = non_losing_moves(mask, threats, d)
    if moves == 0:  # two threats, or every move under one
        return True, stones + 2 - WIN, 0
    if depth <= 0:
        score = window_score(
            current, opponent, own_weights, other_weights, d.board, d.height, d.inarow, d.size
        )
        return True, int(score), 0
    return False, 0, moves


def search(
    current: int,
    mask: int,
    stones: int,
    depth: int,
    alpha: int,
    beta: int,
    deadline: float,
    check_every: int,
    stats: np.ndarray,
    table,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> int:
    """Negamax score of the position for the player to move, ``depth`` plies deep.

    Alpha-beta, fail-soft: exact when strictly inside ``(alpha, beta)``, else a bound on that
    side. No line may be on the board. ``stats[STAT_NODES]`` counts nodes; the clock is read when
    it reaches ``stats[STAT_NEXT_CHECK]`` (then moved ``check_every`` further);
    ``stats[STAT_ABORTED]`` is set to 1 (and the result is meaningless) when the clock passed
    ``deadline`` or another thread set ``stats[STAT_HALT]``. ``table`` is the transposition
    table (rows: key, then ``TABLE_*`` columns);
    ``frames`` and ``bounds`` (at least ``depth + 1`` rows) the stack, as in
    :mod:`connectx_baselines._layout`; ``dims`` the :class:`~connectx_gym._dims.Dims` or their
    array.
    """
    d = as_dims(dims)
    settled, score, moves = _settle(current, mask, stones, depth, -1, own_weights, other_weights, d)
    if settled:
        stats[STAT_NODES] += 1
        return score
    ply = 0
    entering = True
    node_current, node_mask, node_moves = current, mask, moves
    node_alpha, node_beta = alpha, beta
    while True:
        if entering:
            # A node that needs a search: probe the table, order the moves, push a frame.
            entering = False
            stats[STAT_NODES] += 1
            if stats[STAT_NODES] >= stats[STAT_NEXT_CHECK]:
                stats[STAT_NEXT_CHECK] = stats[STAT_NODES] + check_every
                if stats[STAT_HALT] or now(stats) > deadline:
                    stats[STAT_ABORTED] = 1
                    return 0
            slot = probe(table, position_key(node_current, node_mask))
            first = -1
            cut = False
            result = 0
            if slot >= 0:
                first = table[slot, TABLE_MOVE]
                if table[slot, TABLE_DEPTH] >= depth - ply:
                    stored, flag = table[slot, TABLE_SCORE], table[slot, TABLE_FLAG]
                    if flag == _EXACT:
                        cut = True
                    elif flag == _LOWER and stored > node_alpha:
                        node_alpha = stored
                    elif flag == _UPPER and stored < node_beta:
                        node_beta = stored
                    cut = cut or node_alpha >= node_beta
                    result = stored
            if not cut:
                open_frame(
                    frames, bounds, ply, node_current, node_mask, node_alpha, node_beta, -INFINITY
                )
                frames[ply, FRAME_BEST] = -1
                count = sort_moves(node_current, node_mask, node_moves, order, d, frames, ply)
                if first >= 0:  # the table's best move leads
                    move_to_front(frames, ply, count, first, d)
                frames[ply, FRAME_COUNT] = count
                continue
            if ply == 0:
                return result
            ply -= 1
        elif (
            bounds[ply, BOUND_ALPHA] < bounds[ply, BOUND_BETA]
            and frames[ply, FRAME_NEXT] < frames[ply, FRAME_COUNT]
        ):
            index = frames[ply, FRAME_NEXT]
            frames[ply, FRAME_NEXT] = index + 1
            parent_current, parent_mask = frames[ply, FRAME_CURRENT], frames[ply, FRAME_MASK]
            move = possible_moves(parent_mask, d.bottom, d.board) & column_mask(
                frames[ply, FRAME_MOVES + index], d.height
            )
            child_current = parent_current ^ parent_mask
            child_mask = parent_mask | move
            settled, result, child_moves = _settle(
                child_current,
                child_mask,
                stones + ply + 1,
                depth - ply - 1,
                threats_of(frames, ply, index, d),
                own_weights,
                other_weights,
                d,
            )
            if not settled:
                node_current, node_mask, node_moves = child_current, child_mask, child_moves
                node_alpha = -int(bounds[ply, BOUND_BETA])
                node_beta = -int(bounds[ply, BOUND_ALPHA])
                ply += 1
                entering = True
                continue
            stats[STAT_NODES] += 1
        else:
            # Every move seen, or a cut-off: store the node and hand its score to the parent.
            result = int(bounds[ply, BOUND_VALUE])
            if frames[ply, FRAME_BEST] == -1:  # no move raised alpha
                flag = _UPPER
            elif result >= bounds[ply, BOUND_BETA]:
                flag = _LOWER
            else:
                flag = _EXACT
            slot = store(table, position_key(frames[ply, FRAME_CURRENT], frames[ply, FRAME_MASK]))
            table[slot, TABLE_SCORE] = result
            table[slot, TABLE_DEPTH] = depth - ply
            table[slot, TABLE_FLAG] = flag
            table[slot, TABLE_MOVE] = frames[ply, FRAME_BEST]
            if ply == 0:
                return result
            ply -= 1
        # ``result`` is the score of the child last played at ``ply``, from the child's side.
        if raise_value(bounds, ply, -result):
            frames[ply, FRAME_BEST] = frames[ply, FRAME_MOVES + frames[ply, FRAME_NEXT] - 1]


def move_deadline(start: float, time_budget: float) -> float:
    """The clock time by which a move started at ``start`` with ``time_budget`` seconds stops
    searching (a margin left for the caller)."""
    return start + 0.92 * time_budget - 0.002


def root_scores(
    current: int,
    mask: int,
    stones: int,
    depth: int,
    deadline: float,
    check_every: int,
    stats: np.ndarray,
    out: np.ndarray,
    root_order: np.ndarray,
    table,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> bool:
    """``out[c]``: the score of playing column ``c`` at ``depth`` plies (NaN: full column), the
    columns searched in ``root_order``; exact for the columns of the best score, upper bounds
    below it for the others (only columns strictly worse than the best so far are pruned).
    False, with ``out`` incomplete, when the clock passed ``deadline``."""
    d = as_dims(dims)
    opponent = current ^ mask
    possible = possible_moves(mask, d.bottom, d.board)
    best = -INFINITY
    out[:] = np.nan
    for i in range(root_order.shape[0]):
        column = int(root_order[i])  # a Python integer on boards beyond 64 bits
        move = possible & column_mask(column, d.height)
        if move == 0:
            continue
        if has_line(current | move, d.height, d.inarow, d.size):
            value = WIN - stones - 1
        else:
            value = -search(
                opponent, mask | move, stones + 1, depth - 1, -INFINITY, 1 - best, deadline,
                check_every, stats, table, own_weights, other_weights, order, dims, frames,
                bounds,
            )  # fmt: skip
            if stats[STAT_ABORTED]:
                return False
        out[column] = value
        best = max(best, value)
    return True


def _decided(scores: np.ndarray, cells: int) -> bool:
    """True when the best column is a proven win, or every column a proven loss."""
    top = -np.inf
    for value in scores:
        if not np.isnan(value):
            top = max(top, value)
    return top >= WIN - cells or top <= cells - WIN


def _rank(scores: np.ndarray, column: int) -> float:
    """The score of ``column`` for ordering (a full column last)."""
    value = scores[column]
    return -np.inf if np.isnan(value) else value


def _order_by(scores: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """``out``: ``order`` sorted by ``scores``, best first, stably (so centre first on ties)."""
    for i in range(order.shape[0]):
        column = order[i]
        rank = _rank(scores, column)
        j = i
        while j > 0 and _rank(scores, out[j - 1]) < rank:
            out[j] = out[j - 1]
            j -= 1
        out[j] = column


def deepen(
    current: int,
    mask: int,
    stones: int,
    limit: int,
    start: float,
    deadline: float,
    check_every: int,
    stats: np.ndarray,
    scores: np.ndarray,
    table,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    dims,
    frames,
    bounds: np.ndarray,
) -> tuple[int, int]:
    """The agent's move on a board with no line and a free cell: ``scores`` (per column, as
    :func:`root_scores` gives them) of the deepest search completed, deepening from depth 1
    (always completed) to ``limit`` plies. Returns that depth and why it stopped (``STOPPED_*``):
    a proven win or loss, or the clock, which the search started at ``start`` reads between
    depths (a depth past 45% of the time to ``deadline`` would most likely not finish) and
    inside the tree, or ``stats[STAT_HALT]`` (the clock's stop, asked by another thread)."""
    d = as_dims(dims)
    trial = np.empty_like(scores)
    root_order = order.copy()
    root_scores(
        current, mask, stones, 1, np.inf, check_every, stats, scores, root_order, table,
        own_weights, other_weights, order, dims, frames, bounds,
    )  # fmt: skip
    reached = 1
    for depth in range(2, limit + 1):
        if _decided(scores, d.cells):
            return reached, STOPPED_PROVEN
        if stats[STAT_HALT] or now(stats) - start > 0.45 * (deadline - start):
            return reached, STOPPED_TIME
        _order_by(scores, order, root_order)
        if not root_scores(
            current, mask, stones, depth, deadline, check_every, stats, trial, root_order, table,
            own_weights, other_weights, order, dims, frames, bounds,
        ):  # fmt: skip
            return reached, STOPPED_TIME
        scores[:] = trial
        reached = depth
    return reached, STOPPED_LIMIT
