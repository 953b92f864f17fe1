"""``benchmarks/book_play.py``: a book's positions as labelled positions, and a policy's mistakes
on them as ``book_fit.py`` counts the network's own from its logits."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest

from connectx_baselines.teacher_book import BOOKS, load_book
from connectx_baselines.teacher_labels import ILLEGAL, TeacherSet
from connectx_gym.bitboard import Geometry

GEOMETRY = Geometry(6, 7, 4)
TAIL = 150


def test_the_tail_becomes_labelled_positions_one_phase_a_stone_count(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    book_play = benchmark_script("book_play.py")
    book = load_book(GEOMETRY, BOOKS["random_opening"].file)
    assert book is not None
    skip = len(book) - TAIL
    positions = book_play.book_positions("random_opening", skip, None)
    assert len(positions) == TAIL
    for index, board in enumerate(positions.boards()):
        row = book.moves[skip + index]
        assert board.moves == int((row >= 0).sum())
        assert positions.phases[positions.phase[index]] == f"{board.moves} stones"
        open_columns = set(board.open_columns())
        assert open_columns == set(np.flatnonzero(~np.isnan(positions.scores[index])))
        assert open_columns == set(np.flatnonzero(book.values[skip + index] != ILLEGAL))
    assert len(book_play.book_positions("random_opening", skip, 10)) == 10


def test_the_network_errs_where_book_fit_says(
    benchmark_script: Callable[[str], ModuleType],
) -> None:
    pytest.importorskip("torch")  # book_fit builds its planes with connectx_train's teacher
    book_play = benchmark_script("book_play.py")
    book_fit = benchmark_script("book_fit.py")
    book = load_book(GEOMETRY, BOOKS["random_opening"].file)
    assert book is not None
    skip = len(book) - TAIL
    tail = TeacherSet(GEOMETRY, book.moves[skip:], book.values[skip:], {})
    expected = book_fit.mistakes(book_fit.network("ppo"), tail)
    positions = book_play.book_positions("random_opening", skip, None)
    result = book_play.evaluate_policy("ppo", positions, seed=0)
    assert result.overall.mistakes == int(expected.sum()) > 0
    stones = (tail.moves >= 0).sum(axis=1)
    for name, phase in result.phases.items():
        count = int(name.split()[0])
        assert phase.positions == int((stones == count).sum())
        assert phase.mistakes == int(expected[stones == count].sum())


def test_bad_arguments_are_one_line(
    benchmark_script: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    book_play = benchmark_script("book_play.py")
    book = load_book(GEOMETRY, BOOKS["random_opening"].file)
    assert book is not None
    for argv in (
        ["ppo", "--limit", "0"],
        ["ppo", "--skip", "-1"],
        ["ppo", "--skip", str(len(book))],
        ["no/such/net.npz", "--smoke"],
        ["nosuchpolicy", "--smoke"],
    ):
        with pytest.raises(SystemExit) as stop:
            book_play.main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert "error: " in err.strip().splitlines()[-1]  # the usage, then one line saying why
