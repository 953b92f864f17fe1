"""Slow, obvious references: the Kaggle "Intro to Game AI" agents as the tutorials write them.

Grid-based (numpy ``(rows, columns)`` arrays, row 0 at the top, 0 empty, 1 and 2 the marks) and
deliberately unoptimised, with ``inarow`` in place of the tutorials' literal 4 and 3. Used by the
tests to check the fast bitboard agents of :mod:`baselines`.
"""

from __future__ import annotations

import numpy as np

from connectx_gym import Board, Geometry

# Board sizes for the equivalence tests: the usual one, small and odd ones (1 row, 1 column,
# inarow 1, inarow larger than the board), 7x8, whose 64 bits are the largest compiled board, and
# 8x8, whose 72 bits run the plain-Python backend.
SMALL_SIZES = [(6, 7, 4), (4, 5, 3), (1, 7, 3), (7, 1, 3), (3, 3, 1), (2, 3, 5), (5, 4, 2)]
WORD_SIZE = (7, 8, 4)
BIG_SIZE = (8, 8, 4)


def random_board(geometry: Geometry, seed: int, max_moves: int | None = None) -> Board:
    """A position reached by random legal moves, where the game is not over yet."""
    rng = np.random.default_rng(seed)
    limit = geometry.cells - 1 if max_moves is None else min(max_moves, geometry.cells - 1)
    board = Board(geometry, 0, 0, 0)
    for _ in range(int(rng.integers(0, limit + 1))):
        child = board.play(int(rng.choice(board.legal_moves())))
        if child.is_terminal():
            break
        board = child
    return board


def as_array(scores: dict, columns: int) -> np.ndarray:
    """A ``{column: score}`` dict as a per-column array, NaN for the missing columns."""
    array = np.full(columns, np.nan)
    for column, score in scores.items():
        array[column] = score
    return array


def best_set(scores: dict) -> tuple[set[int], float]:
    """The columns of maximal score and that score."""
    best = max(scores.values())
    return {column for column, score in scores.items() if score == best}, best


def drop_piece(grid: np.ndarray, col: int, mark: int) -> np.ndarray:
    """The grid after ``mark`` drops a disc in column ``col``."""
    next_grid = grid.copy()
    rows = grid.shape[0]
    for row in range(rows - 1, -1, -1):
        if next_grid[row][col] == 0:
            break
    next_grid[row][col] = mark
    return next_grid


def windows(grid: np.ndarray, inarow: int) -> list[list[int]]:
    """Every window of ``inarow`` cells: horizontal, vertical and both diagonals."""
    rows, columns = grid.shape
    found = []
    for row in range(rows):
        for col in range(columns - (inarow - 1)):
            found.append(list(grid[row, col : col + inarow]))
    for row in range(rows - (inarow - 1)):
        for col in range(columns):
            found.append(list(grid[row : row + inarow, col]))
    for row in range(rows - (inarow - 1)):
        for col in range(columns - (inarow - 1)):
            found.append(list(grid[range(row, row + inarow), range(col, col + inarow)]))
    for row in range(inarow - 1, rows):
        for col in range(columns - (inarow - 1)):
            found.append(list(grid[range(row, row - inarow, -1), range(col, col + inarow)]))
    return found


def count_windows(grid: np.ndarray, num_discs: int, piece: int, inarow: int) -> int:
    """Windows with exactly ``num_discs`` of ``piece`` and the other cells empty."""
    return sum(
        1
        for window in windows(grid, inarow)
        if window.count(piece) == num_discs and window.count(0) == inarow - num_discs
    )


def weighted_heuristic(grid, mark, inarow, own: dict, opponent: dict) -> float:
    """Sum of ``own[k]`` * count_windows(k, mark) + ``opponent[k]`` * count_windows(k, other)."""
    other = mark % 2 + 1
    score = 0.0
    for k, weight in own.items():
        score += weight * count_windows(grid, k, mark, inarow)
    for k, weight in opponent.items():
        score += weight * count_windows(grid, k, other, inarow)
    return score


def onestep_heuristic(grid: np.ndarray, mark: int, inarow: int) -> float:
    """The One-Step Lookahead tutorial's ``get_heuristic``."""
    num_threes = count_windows(grid, inarow - 1, mark, inarow)
    num_fours = count_windows(grid, inarow, mark, inarow)
    num_threes_opp = count_windows(grid, inarow - 1, mark % 2 + 1, inarow)
    return num_threes - 1e2 * num_threes_opp + 1e6 * num_fours


def minimax_heuristic(grid: np.ndarray, mark: int, inarow: int) -> float:
    """The N-Step Lookahead tutorial's ``get_heuristic``."""
    num_threes = count_windows(grid, inarow - 1, mark, inarow)
    num_fours = count_windows(grid, inarow, mark, inarow)
    num_threes_opp = count_windows(grid, inarow - 1, mark % 2 + 1, inarow)
    num_fours_opp = count_windows(grid, inarow, mark % 2 + 1, inarow)
    return num_threes - 1e2 * num_threes_opp - 1e4 * num_fours_opp + 1e6 * num_fours


def valid_moves(grid: np.ndarray) -> list[int]:
    """Columns whose top cell is empty."""
    return [c for c in range(grid.shape[1]) if grid[0][c] == 0]


def onestep_scores(grid: np.ndarray, mark: int, inarow: int) -> dict[int, float]:
    """The One-Step agent's score of each valid column."""
    return {
        col: onestep_heuristic(drop_piece(grid, col, mark), mark, inarow)
        for col in valid_moves(grid)
    }


def is_terminal_window(window: list[int], inarow: int) -> bool:
    """A window full of one player's discs."""
    return window.count(1) == inarow or window.count(2) == inarow


def is_terminal_node(grid: np.ndarray, inarow: int) -> bool:
    """A full top row (draw) or a line of ``inarow`` for either player."""
    if list(grid[0, :]).count(0) == 0:
        return True
    return any(is_terminal_window(window, inarow) for window in windows(grid, inarow))


def minimax(node: np.ndarray, depth: int, maximizing: bool, mark: int, inarow: int) -> float:
    """The tutorial's plain minimax."""
    if depth == 0 or is_terminal_node(node, inarow):
        return minimax_heuristic(node, mark, inarow)
    if maximizing:
        value = -np.inf
        for col in valid_moves(node):
            value = max(value, minimax(drop_piece(node, col, mark), depth - 1, False, mark, inarow))
        return value
    value = np.inf
    for col in valid_moves(node):
        child = drop_piece(node, col, mark % 2 + 1)
        value = min(value, minimax(child, depth - 1, True, mark, inarow))
    return value


def minimax_scores(grid: np.ndarray, mark: int, inarow: int, nsteps: int) -> dict[int, float]:
    """The N-Step agent's ``score_move`` of each valid column."""
    return {
        col: minimax(drop_piece(grid, col, mark), nsteps - 1, False, mark, inarow)
        for col in valid_moves(grid)
    }


def wins_at_once(grid: np.ndarray, col: int, mark: int, inarow: int) -> bool:
    """Dropping ``mark`` in ``col`` completes a line."""
    after = drop_piece(grid, col, mark)
    return any(window.count(mark) == inarow for window in windows(after, inarow))


def negamax_value(grid: np.ndarray, mark: int, depth: int, inarow: int) -> int:
    """The ConnectX notes' negamax: 0 at depth 0, 1 with a win at once, else the best of the
    negated children (0 when no move is left)."""
    if depth == 0:
        return 0
    moves = valid_moves(grid)
    if any(wins_at_once(grid, col, mark, inarow) for col in moves):
        return 1
    values = [
        -negamax_value(drop_piece(grid, col, mark), mark % 2 + 1, depth - 1, inarow)
        for col in moves
    ]
    return max(values) if values else 0


def negamax_scores(grid: np.ndarray, mark: int, inarow: int, depth: int) -> dict[int, int]:
    """Score of each valid column: 1 if it wins at once, else -value(child, depth - 1)."""
    return {
        col: 1
        if wins_at_once(grid, col, mark, inarow)
        else -negamax_value(drop_piece(grid, col, mark), mark % 2 + 1, depth - 1, inarow)
        for col in valid_moves(grid)
    }
