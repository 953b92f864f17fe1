"""``benchmarks/opening_values.py``: the value of an opening for the player to move, on positions
built for each outcome but a draw, and the table's stone ranges."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

import pytest

from connectx_baselines.solver import Solver
from connectx_gym.bitboard import Board


@pytest.fixture
def opening_values(benchmark_script: Callable[[str], ModuleType]) -> ModuleType:
    return benchmark_script("opening_values.py")


def board_after(columns: list[int]) -> Board:
    return Board.from_moves(Board.empty(6, 7, 4).geometry, columns)


def test_outcomes_on_positions_built_for_them(opening_values: ModuleType) -> None:
    outcome = opening_values.opening_outcome
    solver = Solver(Board.empty(6, 7, 4).geometry)
    # mark 1 has three in column 0 and is to move: won
    won = board_after([0, 6, 0, 6, 0, 5])
    # mark 1 has columns 1-3 of the bottom row, both ends open; mark 2 to move blocks one: lost
    lost = board_after([1, 6, 2, 6, 3])
    assert outcome(won, solver, 0, 1_000_000) == "won"
    assert outcome(lost, solver, 0, 1_000_000) == "lost"
    assert outcome(won, solver, 7, 1_000_000) == "not solved (few stones)"
    # the empty board is not proven within a few nodes
    assert outcome(Board.empty(6, 7, 4), solver, 0, 10) == "unsolved"


@pytest.mark.parametrize(
    ("plies", "min_stones", "width", "expected"),
    [
        (20, 6, 8, [(0, 5), (6, 13), (14, 20)]),
        (4, 6, 8, [(0, 4)]),
        (3, 0, 2, [(0, 1), (2, 3)]),
    ],
)
def test_stone_ranges_cover_every_opening_length_once(
    opening_values: ModuleType,
    plies: int,
    min_stones: int,
    width: int,
    expected: list[tuple[int, int]],
) -> None:
    ranges = opening_values.stone_ranges(plies, min_stones, width)
    assert ranges == expected
    assert [s for low, high in ranges for s in range(low, high + 1)] == list(range(plies + 1))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--openings", "0"], "must be >= 1"),
        (["--opening-plies", "50"], "opening_plies must be at most 40"),
    ],
)
def test_bad_input_is_a_one_line_error(
    opening_values: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.setattr(sys, "argv", ["opening_values.py", *argv])
    with pytest.raises(SystemExit) as exit_info:
        opening_values.main()
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
