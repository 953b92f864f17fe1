"""``--teacher-book``: the list read and written back, and older runs' six book settings read
as one list."""

from __future__ import annotations

from train.config import TrainConfig
from train.teacher_books import BookUse, format_teacher_books, parse_teacher_books


def test_a_run_saved_with_the_six_book_settings_resumes_on_the_same_books() -> None:
    saved = TrainConfig().to_json()
    assert TrainConfig.from_json(saved) == TrainConfig()
    del saved["teacher_book"]
    old = {"teacher_book": 2, "teacher_book_positions": 1929, "teacher_early_book": 1}
    old |= {"teacher_early_book_positions": 27278}
    old |= {"teacher_middle_book": 1, "teacher_middle_book_positions": 18916}
    assert TrainConfig.from_json({**saved, **old}) == TrainConfig()
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
