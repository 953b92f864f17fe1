"""connectx_baselines.teacher_labels and Solver.move_values: labels agree with the exact scores,
evaluation positions are never taught, the set is the same for any number of workers and resumes
from its chunk files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import connectx_baselines.teacher_labels as teacher_labels
from connectx_baselines.game_positions import canonical_key, canonical_keys
from connectx_baselines.solver import SearchLimitError, Solver
from connectx_baselines.teacher_labels import (
    ILLEGAL,
    TeacherSet,
    evaluation_keys,
    make_teacher_set,
    pad_moves,
    unpad_moves,
)
from connectx_gym.bitboard import Board, Geometry

SMALL = Geometry(4, 5, 3)


def random_position(geometry: Geometry, rng: np.random.Generator, plies: int) -> Board | None:
    board = Board.empty(geometry.rows, geometry.columns, geometry.inarow)
    for _ in range(plies):
        if board.is_terminal():
            return None
        board = board.play(int(rng.choice(board.legal_moves())))
    return None if board.is_terminal() else board


@pytest.mark.parametrize("geometry", [Geometry(6, 7, 4), SMALL, Geometry(3, 3, 3)])
def test_move_values_are_the_signs_of_the_exact_scores(geometry: Geometry) -> None:
    rng = np.random.default_rng(1)
    solver = Solver(geometry)
    checked = 0
    low = 14 if geometry.cells == 42 else 0
    while checked < 25:
        board = random_position(geometry, rng, int(rng.integers(low, geometry.cells - 1)))
        if board is None:
            continue
        values, scores = solver.move_values(board), solver.move_scores(board)
        np.testing.assert_array_equal(values, np.sign(scores))  # NaN where full, in both
        checked += 1


def test_move_values_respects_the_node_limit() -> None:
    solver = Solver(Geometry(6, 7, 4))
    with pytest.raises(SearchLimitError):
        solver.move_values(Board.empty(), node_limit=1_000)


def check_labels(teacher: TeacherSet) -> None:
    solver = Solver(teacher.geometry)
    for board, values in zip(teacher.boards(), teacher.values, strict=True):
        expected = np.sign(solver.move_scores(board))
        np.testing.assert_array_equal(values, np.where(np.isnan(expected), ILLEGAL, expected))


def test_small_board_set_is_labelled_exactly_and_deduplicated() -> None:
    teacher = make_teacher_set(SMALL, 60, seed=3, min_ply=2, exclude=())
    assert 50 <= len(teacher) <= 60
    assert teacher.moves.shape == (len(teacher), SMALL.cells)
    assert ((teacher.moves >= 0).sum(axis=1) >= 2).all()
    keys = [canonical_key(SMALL, row[row >= 0].tolist()) for row in teacher.moves]
    assert len(set(keys)) == len(keys)
    check_labels(teacher)


def test_excluded_positions_are_never_taught() -> None:
    first = make_teacher_set(SMALL, 40, seed=4, min_ply=2, exclude=())
    banned = {canonical_key(SMALL, row[row >= 0].tolist()) for row in first.moves[:20]}
    second = make_teacher_set(SMALL, 40, seed=4, min_ply=2, exclude=banned)
    taught = {canonical_key(SMALL, row[row >= 0].tolist()) for row in second.moves}
    assert not taught & banned


def test_the_shipped_evaluation_positions_are_excluded_by_default() -> None:
    keys = evaluation_keys(Geometry(6, 7, 4))
    assert len(keys) > 1000
    assert evaluation_keys(SMALL) == set()


def test_workers_and_the_chunk_cache_do_not_change_the_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = teacher_labels.CHUNK + 30  # two chunks
    serial = make_teacher_set(SMALL, count, seed=5, min_ply=1, exclude=())
    parallel = make_teacher_set(
        SMALL, count, seed=5, min_ply=1, exclude=(), workers=2, cache=tmp_path
    )
    np.testing.assert_array_equal(serial.moves, parallel.moves)
    np.testing.assert_array_equal(serial.values, parallel.values)
    assert len(list(tmp_path.glob("chunk*.npz"))) == 2

    def no_labelling(*args: object) -> None:
        raise AssertionError("a cached chunk was labelled again")

    monkeypatch.setattr(teacher_labels, "label_chunk", no_labelling)
    cached = make_teacher_set(SMALL, count, seed=5, min_ply=1, exclude=(), cache=tmp_path)
    np.testing.assert_array_equal(serial.moves, cached.moves)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    teacher = make_teacher_set(SMALL, 20, seed=6, min_ply=2, exclude=())
    teacher.save(tmp_path / "t.npz")
    loaded = TeacherSet.load(tmp_path / "t.npz")
    assert loaded.geometry == SMALL
    assert loaded.meta == teacher.meta
    np.testing.assert_array_equal(loaded.moves, teacher.moves)
    np.testing.assert_array_equal(loaded.values, teacher.values)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"count": 0}, "count must be >= 1"),
        ({"keep": 0.0}, "keep must be in"),
        ({"min_ply": 20}, "min_ply must be in"),
    ],
)
def test_bad_settings_are_refused(changes: dict, message: str) -> None:
    settings = {"count": 5, "seed": 0, **changes}
    with pytest.raises(ValueError, match=message):
        make_teacher_set(SMALL, **settings)


def random_games(geometry: Geometry, seed: int, count: int) -> list[list[int]]:
    """``count`` legal move sequences of random lengths (a game's prefix, or all of it)."""
    rng = np.random.default_rng(seed)
    games = []
    for _ in range(count):
        board, moves = Board(geometry, 0, 0, 0), []
        for _ in range(int(rng.integers(0, geometry.cells + 1))):
            if board.is_terminal():
                break
            moves.append(int(rng.choice(board.legal_moves())))
            board = board.play(moves[-1])
        games.append(moves)
    return games


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 8), columns=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_canonical_keys_equal_one_board_at_a_time(rows: int, columns: int, seed: int) -> None:
    geometry = Geometry(rows, columns, 3)  # up to 8x9 = 81 bits: both the uint64 and int paths
    games = random_games(geometry, seed, 12)
    games.append([geometry.columns - 1 - c for c in games[0]])  # a mirror pair
    padded = pad_moves(games, geometry.cells)
    assert unpad_moves(padded) == games
    assert canonical_keys(geometry, padded) == [canonical_key(geometry, g) for g in games]


def test_canonical_keys_refuse_what_is_not_a_game() -> None:
    geometry = Geometry(2, 3, 2)
    for rows, message in [
        ([[0, 3]], "not a column"),
        ([[1, 1, 1]], "full column"),
        ([[0, -1, 1]], "after its -1 padding"),
        ([[0, 1, 0, 1, 2]], "after its game"),  # 2 in a row: the first player won at ply 3
    ]:
        padded = np.full((1, geometry.cells), -1, dtype=np.int8)
        padded[0, : len(rows[0])] = rows[0]
        with pytest.raises(ValueError, match=message):
            canonical_keys(geometry, padded)
    with pytest.raises(ValueError, match="2-D"):
        canonical_keys(geometry, np.zeros(6, dtype=np.int8))
    assert canonical_keys(geometry, np.zeros((0, 6), dtype=np.int8)) == []
    assert pad_moves([], 6).shape == (0, 6)
    assert unpad_moves(pad_moves([], 6)) == []
    with pytest.raises(ValueError, match="wider"):
        pad_moves([[0] * 7], 6)
