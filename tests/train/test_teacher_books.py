"""``--teacher-book``: the list read and written back, older runs' six book settings read as one
list, the books added to the run's own positions; ``--teacher-labels``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

import connectx_train.teacher as train_teacher
from connectx_baselines.teacher_book import BOOK_FILE, EARLY_BOOK_FILE, MIDDLE_BOOK_FILE
from connectx_baselines.teacher_labels import TeacherSet
from connectx_train.config import TrainConfig
from connectx_train.config_types import BookUse, format_teacher_books, parse_teacher_books
from connectx_train.teacher import load_teacher, teacher_tensors
from tests.train.conftest import SMALL
from tests.train.test_teacher import assert_copies, tiny_teacher_config


def test_a_run_saved_with_the_six_book_settings_resumes_on_the_same_books() -> None:
    saved = TrainConfig().to_json()
    assert TrainConfig.from_json(saved) == TrainConfig()
    del saved["teacher_book"]
    old = {"teacher_book": 2, "teacher_book_positions": 1929, "teacher_early_book": 1}
    old |= {"teacher_early_book_positions": 27278}
    old |= {"teacher_middle_book": 1, "teacher_middle_book_positions": 18916}
    # the books the six settings could name (the random book came later)
    as_saved = dataclasses.replace(
        TrainConfig(), teacher_book="opening:2:1929,early:1:27278,middle:1:18916"
    )
    assert TrainConfig.from_json({**saved, **old}) == as_saved
    # 0 positions was the whole book; a book saved with 0 copies is left out.
    old |= {"teacher_book": 3, "teacher_book_positions": 0, "teacher_middle_book": 0}
    assert TrainConfig.from_json({**saved, **old}).teacher_book == "opening:3,early:1:27278"
    # Saved before the early and the middle book existed: without them, as it ran.
    older = {"teacher_book": 2, "teacher_book_positions": 1929}
    assert TrainConfig.from_json({**saved, **older}).teacher_book == "opening:2:1929"
    assert TrainConfig.from_json({**saved, "teacher_book": 0}).teacher_book == "none"


def test_teacher_book_lists_read_back_as_written() -> None:
    for text in ("opening:2:1929,early:1:27278,middle:1:18916", "middle:4", "none"):
        assert format_teacher_books(parse_teacher_books(text)) == text
    assert parse_teacher_books(" opening : 2 , early:1:5 ") == (
        BookUse("opening", 2),
        BookUse("early", 1, 5),
    )
    assert parse_teacher_books("None") == ()


@pytest.mark.parametrize("labels", ["shipped", "label"])
def test_teacher_labels_choose_whether_the_shipped_labels_are_read(
    labels: str, small_set: TeacherSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: dict[str, Any] = {}

    def make(*args: Any, **kwargs: Any) -> TeacherSet:
        asked.update(kwargs)
        return small_set

    monkeypatch.setattr(train_teacher, "make_teacher_set", make)
    logs: list[str] = []
    config = tiny_teacher_config(teacher_labels=labels, teacher_book="none")
    load_teacher(config, tmp_path, logs.append)
    assert asked["shipped"] is (labels == "shipped")
    shipped_said = "read from the shipped labels where they hold them"
    assert (shipped_said if labels == "shipped" else "all labelled") in logs[0]
    assert f"--teacher-labels {labels}" in logs[0]


def test_the_opening_book_is_added_to_the_runs_own_positions(
    small_set: TeacherSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = dataclasses.replace(
        small_set, meta={**small_set.meta, "settings": {"min_ply": 1, "max_ply": 9}}
    )
    books = {(SMALL, BOOK_FILE): book}
    monkeypatch.setattr(train_teacher, "load_book", lambda g, path: books.get((g, path)))
    config = tiny_teacher_config(teacher_book="opening:3")
    logs: list[str] = []
    data = load_teacher(config, tmp_path, logs.append)
    own = teacher_tensors(TeacherSet.load(tmp_path / "teacher.npz"))
    assert len(data) == len(own) + 3 * len(book)
    assert_copies(data, len(own), teacher_tensors(book), len(book), copies=3)
    added = f"opening book ({len(book)} positions of 1-9 stones) 3 times"
    assert any(added in line for line in logs)
    # Without copies, or on a board the book does not cover: the run's own positions only.
    without = dataclasses.replace(config, teacher_book="none")
    assert len(load_teacher(without, tmp_path, print)) == len(own)
    # Only the book's first positions, when asked for fewer than it holds.
    logs.clear()
    first = dataclasses.replace(config, teacher_book="opening:2:5")
    data = load_teacher(first, tmp_path, logs.append)
    assert len(data) == len(own) + 2 * 5
    head = teacher_tensors(dataclasses.replace(book, moves=book.moves[:5], values=book.values[:5]))
    for copy in range(2):
        start = len(own) + copy * 5
        torch.testing.assert_close(data.observations[start : start + 5], head.observations)
        torch.testing.assert_close(data.good[start : start + 5], head.good)
    assert any(f"opening book (5 of its {len(book)} positions" in line for line in logs)
    # Asked for more than it holds: the whole book, and the log says so.
    logs.clear()
    whole = dataclasses.replace(config, teacher_book=f"opening:3:{len(book) + 100}")
    assert len(load_teacher(whole, tmp_path, logs.append)) == len(own) + 3 * len(book)
    assert any(f"holds fewer than the {len(book) + 100} asked for" in line for line in logs)
    # A book with no upper bound on its stones (as the random book), added once.
    settings = {"min_ply": 12, "max_ply": None}
    books[(SMALL, BOOK_FILE)] = dataclasses.replace(book, meta={**book.meta, "settings": settings})
    logs.clear()
    load_teacher(dataclasses.replace(config, teacher_book="opening:1"), tmp_path, logs.append)
    assert any(f"({len(book)} positions of 12 stones or more) once" in line for line in logs)
    logs.clear()
    other = dataclasses.replace(config, rows=5, out=str(tmp_path / "other"), teacher_positions=10)
    assert len(load_teacher(other, tmp_path / "other", logs.append)) == 10
    assert any("no opening book" in line for line in logs)


def test_the_early_book_is_added_after_the_opening_book(
    small_set: TeacherSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"min_ply": 1, "max_ply": 9}
    opening = dataclasses.replace(small_set, meta={**small_set.meta, "settings": settings})
    early = dataclasses.replace(opening, moves=small_set.moves[:7], values=small_set.values[:7])
    books = {BOOK_FILE: opening, EARLY_BOOK_FILE: early}
    monkeypatch.setattr(train_teacher, "load_book", lambda g, path: books[path])
    config = tiny_teacher_config(teacher_book="opening:1,early:2")
    logs: list[str] = []
    data = load_teacher(config, tmp_path, logs.append)
    own = len(teacher_tensors(TeacherSet.load(tmp_path / "teacher.npz")))
    assert len(data) == own + len(opening) + 2 * 7
    taught = teacher_tensors(early)
    assert_copies(data, own + len(opening), taught, 7, copies=2)
    assert any("early book (7 positions of 1-9 stones) 2 times" in line for line in logs)
    # The early book alone, and its absence said in the log.
    alone = dataclasses.replace(config, teacher_book="early:2")
    assert len(load_teacher(alone, tmp_path, print)) == own + 2 * 7
    # Its first positions only, as the default run pins them.
    first = dataclasses.replace(alone, teacher_book="early:2:3")
    logs.clear()
    data = load_teacher(first, tmp_path, logs.append)
    assert len(data) == own + 2 * 3
    torch.testing.assert_close(data.observations[own : own + 3], taught.observations[:3])
    assert any("early book (3 of its 7 positions of 1-9 stones)" in line for line in logs)
    books[EARLY_BOOK_FILE] = None
    logs.clear()
    assert len(load_teacher(alone, tmp_path, logs.append)) == own
    assert any("no early book" in line for line in logs)


def test_the_middle_book_is_added_after_the_early_book(
    small_set: TeacherSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"min_ply": 5, "max_ply": 9}
    early = dataclasses.replace(small_set, meta={**small_set.meta, "settings": settings})
    middle = dataclasses.replace(early, moves=small_set.moves[2:7], values=small_set.values[2:7])
    books = {BOOK_FILE: None, EARLY_BOOK_FILE: early, MIDDLE_BOOK_FILE: middle}
    monkeypatch.setattr(train_teacher, "load_book", lambda g, path: books[path])
    config = tiny_teacher_config(teacher_book="early:1,middle:3:4")
    logs: list[str] = []
    data = load_teacher(config, tmp_path, logs.append)
    own = len(teacher_tensors(TeacherSet.load(tmp_path / "teacher.npz")))
    assert len(data) == own + len(early) + 3 * 4
    assert_copies(data, own + len(early), teacher_tensors(middle), 4, copies=3)
    assert any("middle book (4 of its 5 positions of 5-9 stones) 3 times" in line for line in logs)
    # Not listed: not added.
    assert len(
        load_teacher(dataclasses.replace(config, teacher_book="early:1"), tmp_path, print)
    ) == (own + len(early))
