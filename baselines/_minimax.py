"""Kernels of the tutorials' lookahead agents: one-step scores and depth-limited minimax.

Written once on integer bitboards; :func:`baselines._dual.backend` compiles them with numba for
boards of up to 64 bits. The minimax is the tutorial's (the agent maximises, the opponent
minimises, leaves scored by the window heuristic from the agent's point of view) with alpha-beta
pruning: alpha-beta returns the exact value whenever it lies strictly inside the window, so a root
search that only prunes columns strictly worse than the best one finds exactly the plain minimax's
best columns and best score.
"""

from __future__ import annotations

import numpy as np

from baselines.heuristic import window_score
from connectx_gym.bitboard import column_mask, has_line, possible_moves


def onestep_scores(
    current: int,
    mask: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
    columns: int,
    out: np.ndarray,
) -> None:
    """``out[c]``: the heuristic of the board after the player to move drops a disc in column
    ``c``, from that player's point of view; NaN for full columns."""
    other = current ^ mask
    moves = possible_moves(mask, bottom, board_bits)
    for column in range(columns):
        move = moves & column_mask(int(column), height)
        if move == 0:
            out[column] = np.nan
        else:
            out[column] = window_score(
                current | move, other, own_weights, other_weights, board_bits, height, inarow, size
            )


def _minimax_leaf(
    agent: int,
    opponent: int,
    agent_moved: bool,
    remaining: int,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> tuple[bool, float]:
    """``(is_leaf, heuristic)`` of a node: a leaf at the depth limit, when the player who just
    moved has a line (the other cannot have one: the game would have ended before) or when the
    board is full; the heuristic is computed for leaves only."""
    last = agent if agent_moved else opponent
    if remaining == 0 or (agent | opponent) == board_bits or has_line(last, height, inarow, size):
        return True, window_score(
            agent, opponent, own_weights, other_weights, board_bits, height, inarow, size
        )
    return False, 0.0


def minimax_value(
    agent: int,
    opponent: int,
    depth: int,
    maximizing: bool,
    alpha: float,
    beta: float,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
) -> float:
    """The tutorial's ``minimax(node, depth, maximizingPlayer)`` with alpha-beta (fail-soft).

    ``agent`` and ``opponent`` hold the two players' discs; the agent is to move when
    ``maximizing``. The result is exact when it lies strictly between ``alpha`` and ``beta``, and
    otherwise a bound on the same side of the window. The search keeps its own stack (numba
    cannot cache self-recursive functions).
    """
    leaf, value = _minimax_leaf(
        agent,
        opponent,
        not maximizing,
        depth,
        own_weights,
        other_weights,
        board_bits,
        height,
        inarow,
        size,
    )
    if leaf:
        return value
    columns = order.shape[0]
    agents = [0] * (depth + 1)
    opponents = [0] * (depth + 1)
    alphas = [0.0] * (depth + 1)
    betas = [0.0] * (depth + 1)
    values = [0.0] * (depth + 1)
    next_index = [0] * (depth + 1)
    agents[0], opponents[0], alphas[0], betas[0] = agent, opponent, alpha, beta
    values[0] = -np.inf if maximizing else np.inf
    ply = 0
    while True:
        maxing = (ply % 2 == 0) == maximizing
        move = 0
        if alphas[ply] < betas[ply]:
            moves = possible_moves(agents[ply] | opponents[ply], bottom, board_bits)
            while next_index[ply] < columns and move == 0:
                move = moves & column_mask(int(order[next_index[ply]]), height)
                next_index[ply] += 1
        if move == 0:
            # All children seen, or a cut-off: return this node's value to its parent.
            result = values[ply]
            if ply == 0:
                return result
            ply -= 1
            maxing = not maxing
        else:
            child_agent = agents[ply] | move if maxing else agents[ply]
            child_opponent = opponents[ply] if maxing else opponents[ply] | move
            leaf, result = _minimax_leaf(
                child_agent,
                child_opponent,
                maxing,
                depth - ply - 1,
                own_weights,
                other_weights,
                board_bits,
                height,
                inarow,
                size,
            )
            if not leaf:
                ply += 1
                agents[ply], opponents[ply] = child_agent, child_opponent
                alphas[ply], betas[ply] = alphas[ply - 1], betas[ply - 1]
                values[ply] = np.inf if maxing else -np.inf
                next_index[ply] = 0
                continue
        if maxing:
            if result > values[ply]:
                values[ply] = result
                if result > alphas[ply]:
                    alphas[ply] = result
        elif result < values[ply]:
            values[ply] = result
            if result < betas[ply]:
                betas[ply] = result


def minimax_root(
    current: int,
    mask: int,
    depth: int,
    exact: bool,
    own_weights: np.ndarray,
    other_weights: np.ndarray,
    order: np.ndarray,
    bottom: int,
    board_bits: int,
    height: int,
    inarow: int,
    size: int,
    out: np.ndarray,
) -> None:
    """Per-column minimax scores for the player to move (the agent), into ``out`` (NaN: full).

    With ``exact`` every column gets its exact score. Otherwise only the columns of maximal
    score do; the others get an upper bound that is strictly below the best score (a column is
    pruned only when it is strictly worse than the best so far, so ties stay exact).
    """
    opponent = current ^ mask
    moves = possible_moves(mask, bottom, board_bits)
    best = -np.inf
    for column in order:
        move = moves & column_mask(int(column), height)
        if move == 0:
            out[column] = np.nan
            continue
        # alpha just below the best so far: a tie with the best is strictly inside the window.
        alpha = -np.inf if exact else np.nextafter(best, -np.inf)
        value = minimax_value(
            current | move,
            opponent,
            depth - 1,
            False,
            alpha,
            np.inf,
            own_weights,
            other_weights,
            order,
            bottom,
            board_bits,
            height,
            inarow,
            size,
        )
        out[column] = value
        if value > best:
            best = value
