"""``benchmarks/book_fit.py``: its batched count of value-losing moves equals one board at a time,
through the board's own planes and the solver's values of the move played."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import ILLEGAL, TeacherSet
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.weights import WeightsFile

pytest.importorskip("torch")  # the script builds its planes with connectx_train's teacher

GEOMETRY = Geometry(6, 7, 4)


def slow_mistake(weights: WeightsFile, moves: np.ndarray, values: np.ndarray) -> bool:
    board = Board.from_moves(GEOMETRY, [int(column) for column in moves if column >= 0])
    logits = weights.logits(board.to_planes()[None])[0]
    legal = board.open_columns()
    assert set(legal) == {column for column in range(7) if values[column] != ILLEGAL}
    chosen = max(legal, key=lambda column: (logits[column], -column))  # ties: lowest column
    return bool(values[chosen] < max(values[column] for column in legal))


@pytest.mark.parametrize("name", ["opening", "random_opening"])
def test_the_batched_mistakes_are_those_of_one_board_at_a_time(
    benchmark_script: Callable[[str], ModuleType], name: str
) -> None:
    book_fit = benchmark_script("book_fit.py")
    book = load_book(GEOMETRY, BOOKS[name].file)
    assert book is not None
    book = TeacherSet(GEOMETRY, book.moves[:300], book.values[:300], {})
    weights = book_fit.network("ppo")
    flags = book_fit.mistakes(weights, book)
    slow = [
        slow_mistake(weights, moves, values)
        for moves, values in zip(book.moves, book.values, strict=True)
    ]
    assert flags.tolist() == slow
    assert 0 < sum(slow) < 300  # the shipped network errs on some openings, not on all


def test_a_bad_limit_or_network_is_one_line(
    benchmark_script: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    book_fit = benchmark_script("book_fit.py")
    for argv in (["ppo", "--limit", "0"], ["ppo", "--skip", "-1"], ["no/such/net.npz"]):
        with pytest.raises(SystemExit) as stop:
            book_fit.main(argv)
        assert stop.value.code == 2
        assert "Traceback" not in capsys.readouterr().err


def test_skip_reads_the_tail_a_run_taught_the_head_never_saw(
    benchmark_script: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    book_fit = benchmark_script("book_fit.py")
    book = load_book(GEOMETRY, BOOKS["random_opening"].file)
    assert book is not None
    skip = len(book) - 150
    assert book_fit.main(["ppo", "--books", "random_opening", "--skip", str(skip)]) == 0
    assert "random_opening book (150 positions" in capsys.readouterr().out
    assert book_fit.main(["ppo", "--books", "random_opening", "--skip", str(len(book))]) == 0
    assert f"no positions after the first {len(book):,}" in capsys.readouterr().out
