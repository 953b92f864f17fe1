"""connectx_baselines.teacher_book and tools/teacher_book.py: the shipped opening book agrees with
the solver and never holds an evaluation position; the book grows chunk by chunk, the same whichever
way its chunks are labelled, and refuses to mix settings."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import tools.teacher_book as teacher_book_tool
from connectx_baselines.game_positions import canonical_key, play_game
from connectx_baselines.perfect_play import load_positions
from connectx_baselines.solver import Solver
from connectx_baselines.teacher_book import (
    BOOK_FILE,
    BOOKS,
    EARLY_BOOK,
    MIDDLE_BOOK,
    load_book,
)
from connectx_baselines.teacher_labels import ILLEGAL, ChunkSettings, TeacherSet
from connectx_gym.bitboard import Geometry
from connectx_gym.registry import make_policy
from tools.teacher_book import extend_book, main

SIX_BY_SEVEN = Geometry(6, 7, 4)
SMALL = ChunkSettings(
    (4, 5, 3),
    min_ply=3,
    keep=0.5,
    node_limit=1_000_000,
    max_ply=8,
    players=("onestep~0.3", "minimax:depth=2~0.2"),
    opening_plies=2,
    table_bits=16,
)


@pytest.mark.parametrize("name", sorted(BOOKS))
@pytest.mark.slow
def test_the_shipped_books_agree_with_the_solver_on_a_sample(name: str) -> None:
    shipped = BOOKS[name]
    book = load_book(SIX_BY_SEVEN, shipped.file)
    assert book is not None
    assert len(book) >= 500
    assert book.meta["settings"]["players"] == list(shipped.settings.players)
    boards = book.boards()
    stones = np.array([board.moves for board in boards])
    assert stones.min() >= shipped.settings.min_ply
    assert stones.max() <= (shipped.settings.max_ply or SIX_BY_SEVEN.cells)
    # A sample of the cheaper positions (those of 5-8 stones cost seconds each to check).
    rng = np.random.default_rng(0)
    solver = Solver(SIX_BY_SEVEN)
    for index in rng.choice(np.flatnonzero(stones >= 10), size=5, replace=False):
        board = boards[index]
        expected = solver.move_values(board)
        np.testing.assert_array_equal(
            book.values[index], np.where(np.isnan(expected), ILLEGAL, expected)
        )


@pytest.mark.parametrize("name", sorted(BOOKS))
@pytest.mark.slow
def test_the_shipped_books_hold_no_evaluation_position_and_no_duplicate(name: str) -> None:
    book = load_book(SIX_BY_SEVEN, BOOKS[name].file)
    assert book is not None
    keys = [canonical_key(SIX_BY_SEVEN, row[row >= 0]) for row in book.moves]
    assert len(set(keys)) == len(keys)
    evaluation = load_positions(split="all")
    assert not set(keys) & {canonical_key(SIX_BY_SEVEN, m) for m in evaluation.moves}


def test_load_book_is_none_for_other_board_sizes_and_missing_files(tmp_path: Path) -> None:
    assert load_book(Geometry(5, 6, 4)) is None
    assert load_book(SIX_BY_SEVEN, tmp_path / "absent.npz") is None
    assert BOOK_FILE.is_file()


def test_games_start_from_the_given_moves() -> None:
    geometry = Geometry(*SMALL.geometry_key)
    rng = np.random.default_rng(3)
    moves = play_game(geometry, [make_policy("random")], rng, start=(2, 2, 1))
    assert moves[:3] == [2, 2, 1]
    assert len(moves) > 3


def test_the_book_grows_by_chunks_and_labels_exactly(tmp_path: Path) -> None:
    path = tmp_path / "book.npz"
    at_once = extend_book(tmp_path / "once.npz", 3, settings=SMALL, chunk_size=4)
    first = extend_book(path, 2, settings=SMALL, chunk_size=4, workers=2)
    assert first.meta["chunks"] == 2
    grown = extend_book(path, 1, settings=SMALL, chunk_size=4)
    assert grown.meta["chunks"] == 3
    assert grown.meta["commands"] == [[0, 2], [2, 3]]
    # The first chunks are the same positions whichever way they were labelled.
    np.testing.assert_array_equal(grown.moves[: len(first)], at_once.moves[: len(first)])
    geometry = Geometry(*SMALL.geometry_key)
    keys = [canonical_key(geometry, row[row >= 0]) for row in grown.moves]
    assert len(set(keys)) == len(keys)
    solver = Solver(geometry)
    for board, values in zip(grown.boards(), grown.values, strict=True):
        assert max(SMALL.min_ply, 2) <= board.moves <= SMALL.max_ply
        expected = np.sign(solver.move_scores(board))
        np.testing.assert_array_equal(values, np.where(np.isnan(expected), ILLEGAL, expected))


def test_a_book_refuses_other_settings_and_bad_counts(tmp_path: Path) -> None:
    path = tmp_path / "book.npz"
    extend_book(path, 1, settings=SMALL, chunk_size=3)
    with pytest.raises(ValueError, match="other settings"):
        extend_book(path, 1, settings=dataclasses.replace(SMALL, keep=0.25), chunk_size=3)
    with pytest.raises(ValueError, match="other settings"):
        extend_book(path, 1, settings=SMALL, chunk_size=4)
    with pytest.raises(ValueError, match="must be >= 1"):
        extend_book(path, 0, settings=SMALL)


def test_the_command_line_reports_bad_input_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--chunks", "0", "--out", str(tmp_path / "b.npz")])
    assert "must be >= 1" in capsys.readouterr().err


def test_a_time_limit_stops_before_the_first_chunk(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no chunk was labelled"):
        extend_book(tmp_path / "book.npz", 2, settings=SMALL, chunk_size=3, minutes=1e-9)
    assert not (tmp_path / "book.npz").exists()


def test_a_negative_time_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="minutes must be >= 0"):
        extend_book(tmp_path / "book.npz", 1, settings=SMALL, minutes=-1)


def test_ctrl_c_keeps_the_written_chunks_and_says_how_to_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(teacher_book_tool, "extend_book", interrupted)
    assert main(["--chunks", "3", "--out", str(tmp_path / "b.npz")]) == 130
    assert "the same command goes on" in capsys.readouterr().out


def test_the_command_line_extends_the_chosen_book(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[Path, dict[str, object]]] = []

    def record(path: Path, chunks: int, **kwargs: object) -> object:
        calls.append((path, kwargs))
        return load_book(SIX_BY_SEVEN, BOOKS["early"].file)

    monkeypatch.setattr(teacher_book_tool, "extend_book", record)
    assert main(["--chunks", "2", "--book", "early"]) == 0
    assert main(["--chunks", "2", "--out", str(tmp_path / "b.npz")]) == 0
    assert main(["--chunks", "1", "--book", "middle", "--workers", "2"]) == 0
    (early_path, early), (opening_path, opening), (middle_path, middle) = calls
    assert early_path == BOOKS["early"].file
    assert early["settings"] == EARLY_BOOK
    assert early["seed"] == BOOKS["early"].seed
    assert opening_path == tmp_path / "b.npz"
    assert opening["settings"] == BOOKS["opening"].settings
    assert middle_path == BOOKS["middle"].file
    assert (middle["settings"], middle["seed"], middle["workers"]) == (
        MIDDLE_BOOK,
        BOOKS["middle"].seed,
        2,
    )
    assert len({book.seed for book in BOOKS.values()}) == len(BOOKS)
    with pytest.raises(SystemExit):
        main(["--chunks", "1", "--book", "late"])
    assert "invalid choice" in capsys.readouterr().err


def test_pons_keys_are_the_mirror_canonical_keys_of_every_line(tmp_path: Path) -> None:
    (tmp_path / "Test_L1_R1").write_text("4453 -5\n27 1\n")
    (tmp_path / "Test_L2_R1").write_text("1766 3\n")
    keys = teacher_book_tool.pons_keys(tmp_path)
    expected = {
        canonical_key(SIX_BY_SEVEN, moves) for moves in ([3, 3, 4, 2], [1, 6], [0, 6, 5, 5])
    }
    assert keys == expected
    # 1766 is the mirror image of 7122: the same key
    assert canonical_key(SIX_BY_SEVEN, [6, 0, 1, 1]) in keys
    with pytest.raises(FileNotFoundError, match="no such directory"):
        teacher_book_tool.pons_keys(tmp_path / "absent")


def test_a_book_leaves_out_the_positions_it_is_told_to(tmp_path: Path) -> None:
    geometry = Geometry(*SMALL.geometry_key)
    first = extend_book(tmp_path / "first.npz", 2, settings=SMALL, chunk_size=4)
    taken = frozenset(canonical_key(geometry, row[row >= 0]) for row in first.moves)
    again = extend_book(tmp_path / "again.npz", 2, settings=SMALL, chunk_size=4, exclude=taken)
    keys = {canonical_key(geometry, row[row >= 0]) for row in again.moves}
    assert keys
    assert not keys & taken
    assert again.meta["excluded"] == len(taken)
    assert "excluded" not in first.meta
    # going on with the same positions left out keeps the record; without them is refused
    more = extend_book(tmp_path / "again.npz", 1, settings=SMALL, chunk_size=4, exclude=taken)
    assert (more.meta["chunks"], more.meta["excluded"]) == (3, len(taken))
    with pytest.raises(ValueError, match=r"leaves out .* extend it leaving them out again"):
        extend_book(tmp_path / "again.npz", 1, settings=SMALL, chunk_size=4)
    assert TeacherSet.load(tmp_path / "again.npz").meta["chunks"] == 3


def test_the_command_line_says_in_one_line_when_the_pons_folder_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--chunks", "1", "--out", str(tmp_path / "b.npz"), "--exclude-pons", "nowhere"])
    assert "no such directory of Pons files" in capsys.readouterr().err


@pytest.mark.slow
def test_the_random_opening_book_holds_no_pons_position(pons_dir: Path) -> None:
    book = load_book(SIX_BY_SEVEN, BOOKS["random_opening"].file)
    assert book is not None
    keys = {canonical_key(SIX_BY_SEVEN, row[row >= 0]) for row in book.moves}
    assert not keys & teacher_book_tool.pons_keys(pons_dir)
    assert book.meta["excluded"] == len(teacher_book_tool.pons_keys(pons_dir))
