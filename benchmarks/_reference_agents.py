"""The Kaggle "Intro to Game AI" agents as the tutorials write them, for speed comparisons.

Plain numpy-grid code, kept as close to the tutorials' as possible (``obs``/``config`` objects,
``random.choice`` for ties, the literal 3 and 4 of their heuristics), so the benchmarks measure
the algorithms people copy from there.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np


def drop_piece(grid: np.ndarray, col: int, mark: int, config: Any) -> np.ndarray:
    """The grid after ``mark`` drops a disc in ``col``."""
    next_grid = grid.copy()
    for row in range(config.rows - 1, -1, -1):
        if next_grid[row][col] == 0:
            break
    next_grid[row][col] = mark
    return next_grid


def check_window(window: list, num_discs: int, piece: int, config: Any) -> bool:
    """A window with ``num_discs`` of ``piece`` and the other cells empty."""
    return window.count(piece) == num_discs and window.count(0) == config.inarow - num_discs


def count_windows(grid: np.ndarray, num_discs: int, piece: int, config: Any) -> int:
    """The tutorial's window count over rows, columns and both diagonals."""
    num_windows = 0
    for row in range(config.rows):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(grid[row, col : col + config.inarow])
            if check_window(window, num_discs, piece, config):
                num_windows += 1
    for row in range(config.rows - (config.inarow - 1)):
        for col in range(config.columns):
            window = list(grid[row : row + config.inarow, col])
            if check_window(window, num_discs, piece, config):
                num_windows += 1
    for row in range(config.rows - (config.inarow - 1)):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(grid[range(row, row + config.inarow), range(col, col + config.inarow)])
            if check_window(window, num_discs, piece, config):
                num_windows += 1
    for row in range(config.inarow - 1, config.rows):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(
                grid[range(row, row - config.inarow, -1), range(col, col + config.inarow)]
            )
            if check_window(window, num_discs, piece, config):
                num_windows += 1
    return num_windows


# -- One-Step Lookahead --------------------------------------------------------------------------
def onestep_heuristic(grid: np.ndarray, mark: int, config: Any) -> float:
    """The one-step tutorial's ``get_heuristic``."""
    num_threes = count_windows(grid, 3, mark, config)
    num_fours = count_windows(grid, 4, mark, config)
    num_threes_opp = count_windows(grid, 3, mark % 2 + 1, config)
    return num_threes - 1e2 * num_threes_opp + 1e6 * num_fours


def onestep_score_move(grid: np.ndarray, col: int, mark: int, config: Any) -> float:
    """The one-step tutorial's ``score_move``."""
    next_grid = drop_piece(grid, col, mark, config)
    return onestep_heuristic(next_grid, mark, config)


def onestep_agent(obs: Any, config: Any) -> int:
    """The One-Step Lookahead agent."""
    valid_moves = [c for c in range(config.columns) if obs.board[c] == 0]
    grid = np.asarray(obs.board).reshape(config.rows, config.columns)
    scores = dict(
        zip(
            valid_moves,
            [onestep_score_move(grid, col, obs.mark, config) for col in valid_moves],
            strict=True,
        )
    )
    max_cols = [key for key in scores if scores[key] == max(scores.values())]
    return random.choice(max_cols)


# -- N-Step Lookahead (minimax) ------------------------------------------------------------------
def minimax_heuristic(grid: np.ndarray, mark: int, config: Any) -> float:
    """The N-step tutorial's ``get_heuristic``."""
    num_threes = count_windows(grid, 3, mark, config)
    num_fours = count_windows(grid, 4, mark, config)
    num_threes_opp = count_windows(grid, 3, mark % 2 + 1, config)
    num_fours_opp = count_windows(grid, 4, mark % 2 + 1, config)
    return num_threes - 1e2 * num_threes_opp - 1e4 * num_fours_opp + 1e6 * num_fours


def is_terminal_window(window: list, config: Any) -> bool:
    """A window full of one player's discs."""
    return window.count(1) == config.inarow or window.count(2) == config.inarow


def is_terminal_node(grid: np.ndarray, config: Any) -> bool:
    """A draw (full top row) or a line for either player."""
    if list(grid[0, :]).count(0) == 0:
        return True
    for row in range(config.rows):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(grid[row, col : col + config.inarow])
            if is_terminal_window(window, config):
                return True
    for row in range(config.rows - (config.inarow - 1)):
        for col in range(config.columns):
            window = list(grid[row : row + config.inarow, col])
            if is_terminal_window(window, config):
                return True
    for row in range(config.rows - (config.inarow - 1)):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(grid[range(row, row + config.inarow), range(col, col + config.inarow)])
            if is_terminal_window(window, config):
                return True
    for row in range(config.inarow - 1, config.rows):
        for col in range(config.columns - (config.inarow - 1)):
            window = list(
                grid[range(row, row - config.inarow, -1), range(col, col + config.inarow)]
            )
            if is_terminal_window(window, config):
                return True
    return False


def minimax(node: np.ndarray, depth: int, maximizing_player: bool, mark: int, config: Any) -> float:
    """The tutorial's minimax."""
    is_terminal = is_terminal_node(node, config)
    valid_moves = [c for c in range(config.columns) if node[0][c] == 0]
    if depth == 0 or is_terminal:
        return minimax_heuristic(node, mark, config)
    if maximizing_player:
        value = -np.inf
        for col in valid_moves:
            child = drop_piece(node, col, mark, config)
            value = max(value, minimax(child, depth - 1, False, mark, config))
        return value
    value = np.inf
    for col in valid_moves:
        child = drop_piece(node, col, mark % 2 + 1, config)
        value = min(value, minimax(child, depth - 1, True, mark, config))
    return value


def minimax_score_move(grid: np.ndarray, col: int, mark: int, config: Any, nsteps: int) -> float:
    """The N-step tutorial's ``score_move``."""
    next_grid = drop_piece(grid, col, mark, config)
    return minimax(next_grid, nsteps - 1, False, mark, config)


def make_minimax_agent(nsteps: int = 3):
    """The N-Step Lookahead agent with ``N_STEPS = nsteps``."""

    def agent(obs: Any, config: Any) -> int:
        valid_moves = [c for c in range(config.columns) if obs.board[c] == 0]
        grid = np.asarray(obs.board).reshape(config.rows, config.columns)
        scores = dict(
            zip(
                valid_moves,
                [minimax_score_move(grid, col, obs.mark, config, nsteps) for col in valid_moves],
                strict=True,
            )
        )
        max_cols = [key for key in scores if scores[key] == max(scores.values())]
        return random.choice(max_cols)

    return agent
