"""The exact solver: Pons scores against an exhaustive search written here (small and odd boards,
boards of exactly 64 bits and beyond), Pascal Pons' positions, limits, the perfect-play policy and
move accuracy."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_baselines.perfect_play import (
    PerfectPlayResult,
    PonsPosition,
    evaluate_policy,
    load_pons,
    positions_from_games,
)
from connectx_baselines.solver import (
    SearchLimitError,
    Solver,
    SolverPolicy,
    best_moves,
    get_solver,
    move_scores,
    solve,
)
from connectx_gym import Board, Geometry, make_policy

PONS_SETS = ("Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2")


# -- the reference: every continuation, memoised ------------------------------------------------
def reference_values(board: Board) -> dict[tuple[int, int], int]:
    """Pons score of every non-terminal position reachable from ``board`` (keyed by
    ``(current, mask)``), by plain negamax over all moves, with no pruning at all."""
    cells = board.geometry.cells
    values: dict[tuple[int, int], int] = {}

    def value(position: Board) -> int:
        key = position.key()
        if key not in values:
            best = None
            for column in position.legal_moves():
                child = position.play(column)
                if child.winner() is not None:
                    score = (cells + 1 - position.moves) // 2
                elif child.is_full():
                    score = 0
                else:
                    score = -value(child)
                best = score if best is None else max(best, score)
            values[key] = best
        return values[key]

    value(board)
    return values


def board_of(geometry: Geometry, key: tuple[int, int]) -> Board:
    current, mask = key
    return Board(geometry, current, mask, mask.bit_count())


def random_position(geometry: Geometry, rng: np.random.Generator, moves: int) -> Board:
    """A non-terminal position after up to ``moves`` random moves."""
    board = Board.empty(geometry.rows, geometry.columns, geometry.inarow)
    for _ in range(moves):
        legal = board.legal_moves()
        child = board.play(int(rng.choice(legal)))
        if child.is_terminal():
            break
        board = child
    return board


def dense_position(geometry: Geometry, rng: np.random.Generator, empty_cells: int) -> Board:
    """A position with ``empty_cells`` empty cells and no line, by random moves that avoid
    completing one (restarting when every move would)."""
    while True:
        board = Board.empty(geometry.rows, geometry.columns, geometry.inarow)
        while board.moves < geometry.cells - empty_cells:
            children = [board.play(c) for c in board.legal_moves()]
            children = [child for child in children if not child.is_terminal()]
            if not children:
                break
            board = children[int(rng.integers(len(children)))]
        else:
            return board


# -- exact scores on small and odd boards -------------------------------------------------------
@pytest.mark.parametrize(
    ("rows", "columns", "inarow", "opening"),
    [
        (4, 4, 3, 0),
        (4, 4, 4, 0),
        (4, 5, 3, 4),
        (4, 5, 4, 8),
        (5, 4, 3, 4),
        (5, 4, 4, 8),
        (3, 5, 3, 0),
        (1, 5, 3, 0),
        (1, 7, 2, 0),
        (3, 1, 2, 0),
        (6, 1, 4, 0),
        (1, 1, 1, 0),
        (2, 3, 1, 0),
        (2, 2, 3, 0),
        (3, 3, 5, 0),
        (2, 6, 2, 0),
    ],
)
@pytest.mark.slow
def test_scores_match_exhaustive_search(rows: int, columns: int, inarow: int, opening: int) -> None:
    geometry = Geometry(rows, columns, inarow)
    rng = np.random.default_rng(rows * 100 + columns * 10 + inarow)
    start = random_position(geometry, rng, opening)
    values = reference_values(start)
    solver = Solver(geometry)
    assert solver.solve(start) == values[start.key()]
    keys = list(values)
    for index in rng.choice(len(keys), size=min(len(keys), 300), replace=False):
        position = board_of(geometry, keys[index])
        assert solver.solve(position) == values[keys[index]], str(position)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.sampled_from([(4, 4, 3), (4, 5, 4), (5, 4, 4)]))
@pytest.mark.slow
def test_move_scores_match_exhaustive_search(seed: int, shape: tuple[int, int, int]) -> None:
    geometry = Geometry(*shape)
    rng = np.random.default_rng(seed)
    board = random_position(geometry, rng, 8)
    expected = np.full(geometry.columns, np.nan)
    for column in board.legal_moves():
        child = board.play(column)
        if child.winner() is not None:
            expected[column] = (geometry.cells + 1 - board.moves) // 2
        elif child.is_full():
            expected[column] = 0
        else:
            expected[column] = -reference_values(child)[child.key()]
    np.testing.assert_array_equal(move_scores(board), expected)
    best, columns = best_moves(board)
    assert best == np.nanmax(expected)
    assert columns == [int(c) for c in np.flatnonzero(expected == best)]
    solver = get_solver(geometry)
    for column in board.legal_moves():  # a mistake: a move of a worse sign than the best
        keeps = bool(np.sign(expected[column]) == np.sign(best))
        assert solver.keeps_value(board, column) == keeps
        assert solver.keeps_value(board, column, best) == keeps


def test_win_scores_follow_pons_convention() -> None:
    # 6x7: the side to move wins at once with its 4th stone: 22 - 4 = 18.
    board = Board.from_moves(Geometry(), [0, 1, 0, 1, 0, 1])
    assert solve(board) == 18
    assert best_moves(board) == (18, [0])
    # Three in a row on the bottom, open at both ends: the side to move loses to the first
    # player's 4th stone, -(22 - 4).
    board = Board.from_moves(Geometry(), [1, 1, 2, 2, 3])
    assert solve(board) == -18
    assert set(move_scores(board)[~np.isnan(move_scores(board))]) == {-18}
    # A full board is a draw; a board with a line is over.
    full = Board.from_moves(Geometry(2, 2, 3), [0, 0, 1, 1])
    assert solve(full) == 0
    assert np.isnan(move_scores(full)).all()
    with pytest.raises(ValueError, match="over"):
        solve(Board.from_moves(Geometry(6, 7, 4), [0, 1, 0, 1, 0, 1, 0]))


def test_board_beyond_64_bits_uses_python_backend_and_is_exact() -> None:
    geometry = Geometry(8, 8, 4)  # 72 bits
    assert not geometry.fits_64_bits
    rng = np.random.default_rng(7)
    board = None
    while board is None or board.moves < geometry.cells - 11:
        board = random_position(geometry, rng, geometry.cells - 11)
    values = reference_values(board)
    solver = Solver(geometry, table_bits=12)
    assert solver._table.dtype == object
    assert solver.solve(board) == values[board.key()]
    keys = list(values)
    for index in rng.choice(len(keys), size=min(len(keys), 40), replace=False):
        assert solver.solve(board_of(geometry, keys[index])) == values[keys[index]]
    # inarow longer than any line: every position is a draw, at once even on a big board.
    assert solve(Board.from_moves(Geometry(10, 12, 13), [5, 6])) == 0


@pytest.mark.parametrize(
    ("rows", "columns", "inarow", "empty_cells"),
    [(7, 8, 4, 16), (15, 4, 4, 18), (3, 16, 3, 20), (1, 32, 3, 11), (63, 1, 4, 63)],
)
def test_boards_of_64_bits_take_the_compiled_path_and_are_exact(
    rows: int, columns: int, inarow: int, empty_cells: int
) -> None:
    """Bit 63 is the last column's sentinel: keys and carries that reach it wrap in ``int64``."""
    geometry = Geometry(rows, columns, inarow)
    assert geometry.size == 64
    assert geometry.fits_64_bits
    rng = np.random.default_rng(rows * columns + inarow)
    solver = Solver(geometry, table_bits=14)
    assert solver._table.dtype == np.int64
    for _ in range(3):
        board = dense_position(geometry, rng, empty_cells)
        values = reference_values(board)
        assert solver.solve(board) == values[board.key()], str(board)
        keys = list(values)
        for index in rng.choice(len(keys), size=min(len(keys), 100), replace=False):
            assert solver.solve(board_of(geometry, keys[index])) == values[keys[index]]


def test_geometry_mismatch_is_rejected() -> None:
    with pytest.raises(ValueError, match="solver is for"):
        Solver(Geometry(4, 4, 3)).solve(Board.empty(4, 5, 3))


# -- Pons' benchmark positions ------------------------------------------------------------------
@pytest.mark.parametrize("name", PONS_SETS)
def test_pons_sample_is_exact(pons_dir, name: str) -> None:
    limit = 3 if name == "Test_L1_R2" else 10
    positions = load_pons(pons_dir / name, limit=limit)
    assert len(positions) == limit
    solver = get_solver(Geometry())
    for position in positions:
        assert solver.solve(position.board) == position.score, position.moves


def test_pons_moves_keep_the_score(pons_dir) -> None:
    position = load_pons(pons_dir / "Test_L2_R1", limit=1)[0]
    best, columns = best_moves(position.board)
    assert best == position.score
    scores = move_scores(position.board)
    assert columns == [int(c) for c in np.flatnonzero(scores == best)]


def test_load_pons_reads_and_rejects(tmp_path) -> None:
    path = tmp_path / "Test"
    path.write_text("4455 0\n\n1 -3\n")
    positions = load_pons(path)
    assert [p.moves for p in positions] == ["4455", "1"]
    assert positions[0].board == Board.from_moves(Geometry(), [3, 3, 4, 4])
    assert positions[1].score == -3
    path.write_text("4455\n")
    with pytest.raises(ValueError, match=":1:"):
        load_pons(path)


# -- limits --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_limits_raise_and_leave_the_table_exact() -> None:
    geometry = Geometry()
    board = Board.from_moves(geometry, [3, 3, 3, 3, 2])
    solver = Solver(geometry, table_bits=16)
    with pytest.raises(SearchLimitError):
        solver.solve(board, node_limit=500)
    start = time.perf_counter()
    with pytest.raises(SearchLimitError):
        solver.solve(Board.empty(), time_limit=0.2)
    assert time.perf_counter() - start < 1.5
    small = Board.from_moves(Geometry(4, 5, 4), [2, 2, 1, 3, 2, 0])
    reference = reference_values(small)[small.key()]
    small_solver = Solver(small.geometry)
    with pytest.raises(SearchLimitError):
        small_solver.solve(small, node_limit=50)
    assert small_solver.solve(small) == reference


# -- the policy ----------------------------------------------------------------------------------
def test_registered_policy_is_the_solver() -> None:
    policy = make_policy("solver:time_budget=0.5")
    assert isinstance(policy, SolverPolicy)
    assert policy.time_budget == 0.5


def test_solver_policy_with_its_own_table() -> None:
    policy = make_policy("solver:time_budget=60,table_bits=10")
    board = Board.from_moves(Geometry(4, 5, 4), [2, 2, 1])
    solver = policy.solver(board.geometry)
    assert solver is not get_solver(board.geometry)
    assert solver._table.shape[0] == 1031  # the first prime above 2 ** 10
    policy.act(board, np.random.default_rng(0))
    assert policy.last_info["best_moves"] == best_moves(board)[1]
    assert policy.solver(board.geometry) is solver
    assert SolverPolicy().solver(board.geometry) is get_solver(board.geometry)
    with pytest.raises(ValueError, match="table_bits"):
        Solver(board.geometry, table_bits=40)


@pytest.mark.parametrize("opponent", ["random", "alphabeta:max_depth=4,time_budget=60"])
def test_solver_never_loses_a_proven_position(opponent: str) -> None:
    geometry = Geometry(4, 5, 4)
    rng = np.random.default_rng(11)
    solver_policy = SolverPolicy(time_budget=60.0)
    other = make_policy(opponent)
    proven_scores = []
    for game in range(8):
        board = random_position(geometry, rng, 2 + game % 3)
        solver_mark = board.mark
        proven = None
        while not board.is_terminal():
            if board.mark == solver_mark:
                column = solver_policy.act(board, rng)
                assert solver_policy.last_info["proven"] is True
                if proven is None:
                    proven = solver_policy.last_info["score"]
            else:
                column = other.act(board, rng)
            board = board.play(column)
        winner = board.winner()
        proven_scores.append(proven)
        if proven > 0:
            assert winner == solver_mark
            # It wins no later than promised: the score of a win is (cells + 1 - stones) // 2,
            # with the stones on the board before the winning one.
            assert (geometry.cells + 1 - (board.moves - 1)) // 2 >= proven
        elif proven == 0:
            assert winner in (None, solver_mark)
    assert 0 in proven_scores, proven_scores
    assert max(proven_scores) > 0, proven_scores


def test_solver_policy_breaks_ties_with_the_rng_and_reports() -> None:
    board = Board.empty(4, 4, 3)
    policy = SolverPolicy(time_budget=60.0)
    best, columns = best_moves(board)
    seen = {policy.act(board, np.random.default_rng(seed)) for seed in range(30)}
    assert seen == set(columns)
    assert policy.last_info == {"proven": True, "score": best, "best_moves": columns}
    first = [policy.act(board, np.random.default_rng(5)) for _ in range(3)]
    assert len(set(first)) == 1
    np.testing.assert_array_equal(policy.scores(board), move_scores(board))


def test_solver_policy_falls_back_to_alphabeta_when_out_of_time() -> None:
    policy = SolverPolicy(time_budget=0.3, fallback_depth=3)
    policy.act(Board.empty(), np.random.default_rng(0))  # compiles both searches
    board = Board.from_moves(Geometry(), [3])
    start = time.perf_counter()
    column = policy.act(board, np.random.default_rng(0))
    elapsed = time.perf_counter() - start
    assert board.can_play(column)
    assert policy.last_info["proven"] is False
    assert "fallback" in policy.last_info
    assert elapsed < 0.3 * 2 + 0.5


# -- judging moves against perfect play ------------------------------------------------------------
def test_the_solver_judges_moves_on_boards_of_own_games() -> None:
    geometry = Geometry(4, 5, 4)
    positions = positions_from_games("random", 6, geometry=geometry, seed=3)
    assert positions
    assert all(not p.is_terminal() for p in positions)
    perfect = evaluate_policy("solver", positions, seed=1)
    assert isinstance(perfect, PerfectPlayResult)
    assert perfect.split == "given"
    result = perfect.overall
    assert (result.positions, result.perfect, result.unsolved) == (len(positions),) * 2 + (0,)
    assert result.perfect_rate == 1.0
    assert result.perfect_ci95[1] == pytest.approx(1.0)
    assert 0.8 < result.perfect_ci95[0] < 1.0
    assert result.mistakes == 0
    random_result = evaluate_policy("random", positions, seed=1).overall
    # Recount by hand: the random policy replayed with each position's own generator.
    children = np.random.SeedSequence(1).spawn(len(positions))
    policy = make_policy("random")
    kept = lost = 0
    for board, child in zip(positions, children, strict=True):
        column = policy.act(board, np.random.default_rng(child))
        kept += column in best_moves(board)[1]
        scores = move_scores(board)
        lost += np.sign(scores[column]) < np.sign(np.nanmax(scores))
    assert random_result.perfect == kept
    assert random_result.mistakes == lost > 0
    assert random_result.mistakes <= random_result.positions - random_result.perfect
    low, high = random_result.mistake_ci95
    assert low <= random_result.mistake_rate <= high


def test_the_solver_judges_moves_on_pons_positions_within_limits(pons_dir) -> None:
    positions = load_pons(pons_dir / "Test_L3_R1", limit=20)
    result = evaluate_policy("solver", positions, seed=0).overall
    assert (result.positions, result.perfect, result.unsolved, result.mistakes) == (20, 20, 0, 0)
    hard = [PonsPosition("", Board.from_moves(Geometry(), [3]), -1)]
    unsolved = evaluate_policy("onestep", hard, node_limit=100)
    assert (unsolved.overall.positions, unsolved.overall.unsolved) == (0, 1)
    assert np.isnan(unsolved.overall.perfect_rate)
    assert "1 positions unsolved" in unsolved.table()
