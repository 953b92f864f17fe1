"""Kaggle's flat board: ``Board.to_kaggle`` and ``Board.from_kaggle`` (every config form, impossible
boards refused with the reason)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_gym import Board, Geometry, Struct


def test_to_kaggle_is_row_major_with_row_zero_at_the_top() -> None:
    board = Board.from_moves(Geometry(3, 4, 3), [1, 1, 3])
    assert board.to_kaggle() == [0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1]
    assert all(type(v) is int for v in board.to_kaggle())


@pytest.mark.parametrize(
    "config",
    [
        {"rows": 3, "columns": 4, "inarow": 3},
        Struct(rows=3, columns=4, inarow=3),
        SimpleNamespace(rows=3, columns=4, inarow=3),
        Geometry(3, 4, 3),
    ],
    ids=["dict", "Struct", "attributes", "Geometry"],
)
def test_from_kaggle_takes_any_config_form(config: object) -> None:
    board = Board.from_moves(Geometry(3, 4, 3), [1, 1, 3])
    assert Board.from_kaggle(board.to_kaggle(), config) == board
    assert Board.from_kaggle(tuple(board.to_kaggle()), config, mark=2) == board
    assert Board.from_kaggle(np.array(board.to_kaggle()), config).mark == 2


@pytest.mark.parametrize(
    ("cells", "mark", "message"),
    [
        ([0] * 8, None, "must have 9 cells"),
        ([0] * 10, None, "must have 9 cells"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 3], None, "must be 0, 1 or 2"),
        ([0, 0, 0, 0, 0, 0, 0, 0, -1], None, "must be 0, 1 or 2"),
        ([0, 0, 0, 0, 0, 0, 0, 1, 1], None, "not a legal position"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 2], None, "not a legal position"),
        ([0, 0, 0, 1, 0, 0, 0, 0, 0], None, "floats"),
        ([0, 0, 0, 0, 0, 0, 1, 0, 0], 1, "mark 1 is not the player to move"),
        ([0, 0, 0, 0, 0, 0, 0, 0, 0], 2, "mark 2 is not the player to move"),
        # the player to move already has a line: the game ended before the last move
        ([2, 0, 0, 2, 0, 2, 1, 1, 1], None, "mark 1, the player to move, already has 3 in a row"),
        ([2, 0, 0, 2, 1, 1, 2, 1, 1], None, "mark 2, the player to move, already has 3 in a row"),
        ([0, 0, 0, 2, 2, 2, 1, 1, 1], None, "already has 3 in a row"),
    ],
)
def test_from_kaggle_rejects_impossible_boards(
    cells: list[int], mark: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Board.from_kaggle(cells, {"rows": 3, "columns": 3, "inarow": 3}, mark)


def test_from_kaggle_accepts_a_finished_game() -> None:
    board = Board.from_kaggle([0, 0, 0, 2, 2, 0, 1, 1, 1], {"rows": 3, "columns": 3, "inarow": 3})
    assert board.mark == 2
    assert board.winner() == 1
    assert board.is_terminal()


def test_from_kaggle_refuses_a_line_no_last_move_completed() -> None:
    # mark 1 has three on the bottom row, but its only top stone (column 2) is above them
    cells = [0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 1, 0, 1, 1, 1, 2]  # 4x4, 3 in a row
    with pytest.raises(ValueError, match="mark 1 has 3 in a row without any of its top stones"):
        Board.from_kaggle(cells, {"rows": 4, "columns": 4, "inarow": 3})


def _slow_lines(grid: list[list[int]], mark: int, inarow: int) -> bool:
    """Whether ``mark`` has ``inarow`` in a row on ``grid``: every cell, every direction."""
    rows, columns = len(grid), len(grid[0])
    for row in range(rows):
        for column in range(columns):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(row + k * dr, column + k * dc) for k in range(inarow)]
                if all(0 <= r < rows and 0 <= c < columns and grid[r][c] == mark for r, c in cells):
                    return True
    return False


def _slow_acceptable(grid: list[list[int]], inarow: int) -> bool:
    """A gravity board of alternating stones is acceptable when the player to move has no line
    and the other has none, or none once one of its column-top stones is taken back."""
    ones = sum(row.count(1) for row in grid)
    twos = sum(row.count(2) for row in grid)
    to_move, last = (1, 2) if ones == twos else (2, 1)
    if _slow_lines(grid, to_move, inarow):
        return False
    if not _slow_lines(grid, last, inarow):
        return True
    for column in range(len(grid[0])):
        top = next((row for row in range(len(grid)) if grid[row][column]), None)
        if top is not None and grid[top][column] == last:
            grid[top][column] = 0
            without = not _slow_lines(grid, last, inarow)
            grid[top][column] = last
            if without:
                return True
    return False


@settings(max_examples=400, deadline=None)
@given(
    size=st.sampled_from([(4, 4, 3), (4, 5, 3), (5, 4, 4), (3, 6, 3), (5, 5, 3)]),
    data=st.data(),
)
def test_from_kaggle_accepts_exactly_what_a_slow_reference_accepts(
    size: tuple[int, int, int], data: st.DataObject
) -> None:
    rows, columns, inarow = size
    grid = [[0] * columns for _ in range(rows)]
    heights = [0] * columns
    moves = data.draw(st.lists(st.integers(0, columns - 1), max_size=rows * columns))
    placed = 0
    for column in moves:  # alternating stones under gravity, lines or not
        if heights[column] < rows:
            heights[column] += 1
            grid[rows - heights[column]][column] = 1 + placed % 2
            placed += 1
    expected = _slow_acceptable(grid, inarow)
    config = {"rows": rows, "columns": columns, "inarow": inarow}
    cells = [cell for row in grid for cell in row]
    if expected:
        Board.from_kaggle(cells, config)
    else:
        with pytest.raises(ValueError, match="in a row"):
            Board.from_kaggle(cells, config)
