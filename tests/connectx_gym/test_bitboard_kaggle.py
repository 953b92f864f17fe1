"""Kaggle's flat board: ``Board.to_kaggle`` and ``Board.from_kaggle`` (every config form, impossible
boards refused with the reason)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

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
