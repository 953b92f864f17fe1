"""The bitboard rules against a slow, obvious grid reference written here, on many board sizes."""

from __future__ import annotations

import copy
import functools
import pickle
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from connectx_gym import Board, Geometry, has_line, winning_cells
from connectx_gym._jit import jit
from connectx_gym.bitboard import possible_moves

# Board sizes that must work: the usual one, 1 row, 1 column, inarow 1, inarow larger than the
# board, and boards of more than 64 bits (9x9 has 90 bits, 10x12 has 132).
EDGE_SIZES = [
    (6, 7, 4),
    (1, 7, 4),
    (1, 1, 1),
    (6, 1, 4),
    (6, 1, 7),
    (2, 2, 1),
    (3, 3, 5),
    (4, 5, 9),
    (9, 9, 5),
    (10, 12, 4),
    (7, 9, 3),
]

# -- the reference: a list-of-lists grid, row 0 at the top, and every line listed cell by cell ---


@functools.cache
def ref_lines(rows: int, columns: int, inarow: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Every set of ``inarow`` cells in a row, column or diagonal that fits on the board."""
    lines = []
    for r in range(rows):
        for c in range(columns):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = tuple((r + i * dr, c + i * dc) for i in range(inarow))
                if all(0 <= rr < rows and 0 <= cc < columns for rr, cc in cells):
                    lines.append(cells)
    return tuple(lines)


def ref_has_line(cells: set[tuple[int, int]], rows: int, columns: int, inarow: int) -> bool:
    """True when some line lies entirely in ``cells``."""
    return any(all(cell in cells for cell in line) for line in ref_lines(rows, columns, inarow))


def ref_winning_cells(
    stones: set[tuple[int, int]], empty: set[tuple[int, int]], rows: int, columns: int, inarow: int
) -> set[tuple[int, int]]:
    """Cells of ``empty`` lying on a line whose other cells are all ``stones``."""
    found = set()
    for line in ref_lines(rows, columns, inarow):
        for cell in line:
            if cell in empty and all(other in stones for other in line if other != cell):
                found.add(cell)
    return found


class RefGame:
    """ConnectX played the obvious way on a grid of marks (0 empty), as Kaggle describes it."""

    def __init__(self, rows: int, columns: int, inarow: int) -> None:
        self.rows, self.columns, self.inarow = rows, columns, inarow
        self.grid = [[0] * columns for _ in range(rows)]
        self.moves = 0
        self.winner: int | None = None

    @property
    def mark(self) -> int:
        return 1 if self.moves % 2 == 0 else 2

    def cells_of(self, mark: int) -> set[tuple[int, int]]:
        return {
            (r, c) for r in range(self.rows) for c in range(self.columns) if self.grid[r][c] == mark
        }

    def is_full(self) -> bool:
        return all(v != 0 for row in self.grid for v in row)

    def is_over(self) -> bool:
        return self.winner is not None or self.is_full()

    def legal(self) -> list[int]:
        if self.is_over():
            return []
        return [c for c in range(self.columns) if self.grid[0][c] == 0]

    def landing_row(self, column: int) -> int:
        return max(r for r in range(self.rows) if self.grid[r][column] == 0)

    def would_win(self, column: int) -> bool:
        cells = self.cells_of(self.mark) | {(self.landing_row(column), column)}
        return ref_has_line(cells, self.rows, self.columns, self.inarow)

    def play(self, column: int) -> None:
        mark = self.mark
        self.grid[self.landing_row(column)][column] = mark
        self.moves += 1
        if ref_has_line(self.cells_of(mark), self.rows, self.columns, self.inarow):
            self.winner = mark  # a win is checked first: a win that fills the board is a win


def bits_of(cells: set[tuple[int, int]], rows: int) -> int:
    """The documented layout: cell (row r from the top, column c) is bit c*(rows+1) + rows-1-r."""
    return sum(1 << (c * (rows + 1) + rows - 1 - r) for r, c in cells)


def cells_of_bits(bits: int, rows: int, columns: int) -> set[tuple[int, int]]:
    return {
        (r, c)
        for r in range(rows)
        for c in range(columns)
        if bits >> (c * (rows + 1) + rows - 1 - r) & 1
    }


@st.composite
def geometries(draw: st.DrawFn, max_rows: int = 10, max_columns: int = 12) -> Geometry:
    rows = draw(st.integers(1, max_rows))
    columns = draw(st.integers(1, max_columns))
    inarow = draw(st.one_of(st.integers(1, 5), st.integers(1, max(rows, columns) + 2)))
    return Geometry(rows, columns, inarow)


def sized(rows: int, columns: int, inarow: int) -> Geometry:
    return Geometry(rows, columns, inarow)


# -- whole random games against the reference ----------------------------------------------------


def check_against_reference(board: Board, ref: RefGame) -> None:
    g = board.geometry
    rows, columns, inarow = g.rows, g.columns, g.inarow
    assert board.to_array().tolist() == ref.grid
    assert board.moves == ref.moves
    assert board.mark == ref.mark
    assert board.winner() == ref.winner
    assert board.is_full() == ref.is_full()
    assert board.is_terminal() == ref.is_over()
    assert board.legal_moves() == ref.legal()
    assert board.legal_mask().tolist() == [c in ref.legal() for c in range(columns)]
    for column in range(-2, columns + 2):
        expected = 0 <= column < columns and ref.grid[0][column] == 0
        assert board.can_play(column) == expected
    assert board.column_heights() == [
        sum(ref.grid[r][c] != 0 for r in range(rows)) for c in range(columns)
    ]
    mine, theirs = ref.cells_of(ref.mark), ref.cells_of(3 - ref.mark)
    assert board.current == bits_of(mine, rows)
    assert board.mask == bits_of(mine | theirs, rows)
    assert board.opponent == bits_of(theirs, rows)
    planes = board.to_planes()
    assert planes.dtype == np.int8
    assert planes.shape == (2, rows, columns)
    assert cells_of_bits(g.pack(planes[0]), rows, columns) == mine
    assert cells_of_bits(g.pack(planes[1]), rows, columns) == theirs
    landing = {
        (ref.landing_row(c), c) for c in range(columns) if ref.grid[0][c] == 0
    }  # full or not, whatever the game state
    assert possible_moves(board.mask, g.bottom, g.board) == bits_of(landing, rows)
    empty = {(r, c) for r in range(rows) for c in range(columns) if ref.grid[r][c] == 0}
    empty_bits = g.board & ~board.mask
    for stones in (board.current, board.opponent):
        assert cells_of_bits(
            winning_cells(stones, empty_bits, g.height, inarow, g.size), rows, columns
        ) == ref_winning_cells(cells_of_bits(stones, rows, columns), empty, rows, columns, inarow)
    if not ref.is_over():
        for column in ref.legal():
            assert board.is_winning_move(column) == ref.would_win(column)
    config = {"rows": rows, "columns": columns, "inarow": inarow}
    assert Board.from_kaggle(board.to_kaggle(), config, board.mark) == board
    assert Board.from_kaggle(board.to_kaggle(), config).moves == board.moves


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometry=geometries(), rng=st.randoms(use_true_random=False))
@example(geometry=sized(1, 7, 4), rng=random.Random(0))
@example(geometry=sized(6, 1, 4), rng=random.Random(0))
@example(geometry=sized(1, 1, 1), rng=random.Random(0))
@example(geometry=sized(3, 3, 5), rng=random.Random(0))
@example(geometry=sized(9, 9, 5), rng=random.Random(1))
@example(geometry=sized(10, 12, 4), rng=random.Random(2))
@example(geometry=sized(6, 7, 4), rng=random.Random(3))
@pytest.mark.slow
def test_random_games_match_reference(geometry: Geometry, rng: random.Random) -> None:
    board = Board(geometry, 0, 0, 0)
    ref = RefGame(geometry.rows, geometry.columns, geometry.inarow)
    played: list[int] = []
    check_against_reference(board, ref)
    while not ref.is_over():
        column = rng.choice(ref.legal())
        before = (board.current, board.mask, board.moves, board.to_kaggle())
        after = board.play(column)
        assert (board.current, board.mask, board.moves, board.to_kaggle()) == before
        board = after
        ref.play(column)
        played.append(column)
        check_against_reference(board, ref)
    assert board.legal_moves() == []
    assert not board.legal_mask().any()
    assert Board.from_moves(geometry, played) == board
    with pytest.raises(ValueError, match="after the game has ended"):
        Board.from_moves(geometry, [*played, 0])


@settings(max_examples=150, deadline=None)
@given(geometry=geometries(), data=st.data())
@example(geometry=sized(9, 9, 5), data=None)
@example(geometry=sized(10, 12, 8), data=None)
@example(geometry=sized(1, 12, 12), data=None)
@example(geometry=sized(10, 1, 10), data=None)
def test_has_line_and_winning_cells_on_arbitrary_stone_sets(
    geometry: Geometry, data: st.DataObject | None
) -> None:
    rows, columns, inarow = geometry.rows, geometry.columns, geometry.inarow
    everything = {(r, c) for r in range(rows) for c in range(columns)}
    if data is None:  # explicit examples: a full board and a board holding one line only
        patterns = [(everything, set()), (set(ref_lines(rows, columns, inarow)[0]), set())]
    else:
        a, b, c = (data.draw(st.integers(0, 2**geometry.cells - 1)) for _ in range(3))
        density = data.draw(st.sampled_from(["half", "quarter", "three quarters"]))
        stones_number = {"half": a, "quarter": a & b, "three quarters": a | b}[density]
        ordered = sorted(everything)
        stones = {cell for i, cell in enumerate(ordered) if stones_number >> i & 1}
        empty = {cell for i, cell in enumerate(ordered) if c >> i & 1} - stones
        patterns = [(stones, empty)]
    for stones, empty in patterns:
        bits, empty_bits = bits_of(stones, rows), bits_of(empty, rows)
        expected = ref_has_line(stones, rows, columns, inarow)
        assert has_line(bits, geometry.height, inarow, geometry.size) == expected
        assert geometry.has_line(bits) == expected
        found = winning_cells(bits, empty_bits, geometry.height, inarow, geometry.size)
        assert cells_of_bits(found, rows, columns) == ref_winning_cells(
            stones, empty, rows, columns, inarow
        )
        assert found & ~empty_bits == 0


@settings(max_examples=80, deadline=None)
@given(geometry=geometries(), cells=st.data())
def test_pack_and_unpack_follow_the_documented_layout(
    geometry: Geometry, cells: st.DataObject
) -> None:
    rows, columns = geometry.rows, geometry.columns
    number = cells.draw(st.integers(0, 2**geometry.cells - 1))
    grid = np.array([(number >> i) & 1 for i in range(geometry.cells)], dtype=bool).reshape(
        rows, columns
    )
    expected = {(r, c) for r in range(rows) for c in range(columns) if grid[r, c]}
    assert geometry.pack(grid) == bits_of(expected, rows)
    assert geometry.unpack(bits_of(expected, rows)).tolist() == grid.tolist()


# -- the end of a game ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "moves"),
    [
        ((1, 3, 2), [1, 0, 2]),
        ((1, 1, 1), [0]),
        ((6, 7, 4), [int(c) for c in "444642340615145105200005132313351322626665"]),
    ],
)
def test_a_win_that_fills_the_board_is_a_win(size: tuple[int, int, int], moves: list[int]) -> None:
    geometry = Geometry(*size)
    board = Board.from_moves(geometry, moves[:-1])
    ref = RefGame(*size)
    for column in moves:
        ref.play(column)
    assert board.winner() is None
    assert board.is_winning_move(moves[-1])
    final = board.play(moves[-1])
    assert final.is_full()
    assert final.winner() == ref.winner == 2 - len(moves) % 2
    assert final.is_terminal()
    assert final.legal_moves() == []


def test_a_full_board_without_a_line_is_a_draw() -> None:
    board = Board.from_moves(Geometry(1, 1, 2), [0])
    assert board.is_full()
    assert board.winner() is None
    assert board.is_terminal()
    drawn = Board.from_moves(Geometry(2, 2, 3), [0, 0, 1, 1])
    assert drawn.is_terminal()
    assert drawn.winner() is None


def test_inarow_larger_than_the_board_never_wins() -> None:
    board = Board.from_moves(Geometry(3, 3, 4), [0, 1, 0, 1, 0, 1, 2, 2, 2])
    assert board.is_full()
    assert board.winner() is None


def test_play_rejects_illegal_columns_naming_them() -> None:
    board = Board.from_moves(Geometry(2, 3, 3), [0, 0])
    for column in (0, -1, 3):
        with pytest.raises(ValueError, match=rf"column {column}; legal columns are \[1, 2\]"):
            board.play(column)
    with pytest.raises(ValueError, match="column 0"):
        Board.from_moves(Geometry(2, 3, 3), [0, 0, 0])


def test_transpositions_are_equal_boards() -> None:
    geometry = Geometry()
    a = Board.from_moves(geometry, [0, 1, 2, 3])
    b = Board.from_moves(geometry, [2, 3, 0, 1])
    c = Board.from_moves(geometry, [1, 0, 3, 2])  # same cells, colours swapped
    assert a == b
    assert hash(a) == hash(b)
    assert a.key() == b.key()
    assert a != c
    assert a != Board.from_moves(Geometry(6, 7, 5), [0, 1, 2, 3])
    assert len({a, b, c}) == 2


# -- immutability ---------------------------------------------------------------------------------


def test_board_is_immutable() -> None:
    board = Board.from_moves(Geometry(), [3, 3, 2])
    key = board.key()
    for name, value in (("current", 0), ("mask", 0), ("moves", 0), ("geometry", Geometry(4, 4))):
        with pytest.raises(AttributeError):
            setattr(board, name, value)
        with pytest.raises(AttributeError):
            delattr(board, name)
    with pytest.raises(AttributeError):
        board.extra = 1  # type: ignore[attr-defined]
    grid = board.to_array()
    grid[:] = 2
    planes = board.to_planes()
    planes[:] = 1
    board.legal_moves().clear()
    board.to_kaggle()[0] = 2
    assert board.key() == key
    assert board.to_array().sum() == 1 + 2 + 1
    assert board.legal_moves() == list(range(7))


def test_board_pickles_and_copies() -> None:
    board = Board.from_moves(Geometry(10, 12, 4), [0, 11, 5, 5, 5])
    for clone in (pickle.loads(pickle.dumps(board)), copy.copy(board), copy.deepcopy(board)):
        assert clone == board
        assert clone.moves == board.moves
        assert clone.play(7) == board.play(7)


# -- geometry -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((0, 7, 4), ValueError),
        ((6, 0, 4), ValueError),
        ((6, 7, 0), ValueError),
        ((6, 7, -1), ValueError),
        ((6.0, 7, 4), TypeError),
        ((True, 7, 4), TypeError),
        (("6", 7, 4), TypeError),
    ],
)
def test_geometry_rejects_bad_sizes(arguments: tuple[object, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        Geometry(*arguments)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", EDGE_SIZES)
def test_geometry_masks(size: tuple[int, int, int]) -> None:
    geometry = Geometry(np.int64(size[0]), size[1], size[2])
    rows, columns, _ = size
    everything = {(r, c) for r in range(rows) for c in range(columns)}
    assert geometry.key == size
    assert geometry.cells == rows * columns
    assert geometry.board == bits_of(everything, rows)
    assert geometry.bottom == bits_of({(rows - 1, c) for c in range(columns)}, rows)
    assert geometry.top == bits_of({(0, c) for c in range(columns)}, rows)
    assert geometry.fits_64_bits == (columns * (rows + 1) <= 64)
    for c in range(columns):
        assert geometry.column_mask(c) == bits_of({(r, c) for r in range(rows)}, rows)
    assert Geometry.of({"rows": rows, "columns": columns, "inarow": size[2]}) == geometry
    assert hash(Geometry(*size)) == hash(geometry)


# -- Pascal Pons' benchmark positions (outside the repository) -----------------------------------

PONS_FILES = ["Test_L3_R1", "Test_L2_R1", "Test_L2_R2", "Test_L1_R1", "Test_L1_R2", "Test_L1_R3"]


@pytest.mark.parametrize("name", PONS_FILES)
def test_pons_positions_agree_with_immediate_wins(pons_positions, name: str) -> None:
    """Score ``21 - moves // 2`` (the best possible) means exactly: the mover wins right now."""
    geometry = Geometry(6, 7, 4)
    for moves, score in pons_positions(name, 150):
        board = Board.from_moves(geometry, moves)
        assert not board.is_terminal()
        immediate = any(board.is_winning_move(c) for c in board.legal_moves())
        assert immediate == (score == 21 - board.moves // 2), moves
        assert Board.from_kaggle(board.to_kaggle(), geometry, board.mark) == board


@pytest.mark.parametrize(
    "size",
    [
        (6, 7, 4),
        (20, 3, 4),
        (21, 2, 4),
        (5, 10, 4),
        (4, 5, 3),
        (1, 31, 5),
        (7, 7, 6),
        (8, 7, 1),
        # Exactly 64 bits: bit 63 is a sentinel, reached only by wrapping shifts and carries.
        (7, 8, 4),
        (15, 4, 4),
        (31, 2, 4),
        (3, 16, 3),
        (1, 32, 5),
        (63, 1, 4),
    ],
)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_compiled_rules_agree_with_python(size: tuple[int, int, int], data: st.DataObject) -> None:
    """The numba-compiled rules (int64, boards up to 64 bits) equal the Python ones, including
    winning_cells' unrolled inarow-4 branch (taken up to 20 rows) and its general loop."""
    geometry = Geometry(*size)
    assert geometry.fits_64_bits
    stones = data.draw(st.integers(0, 2**geometry.cells - 1))
    empty = data.draw(st.integers(0, 2**geometry.cells - 1)) & ~stones
    g = geometry

    def pack(number: int) -> int:
        return g.pack(
            np.array([number >> i & 1 for i in range(g.cells)]).reshape(g.rows, g.columns)
        )

    bits, empty_bits = pack(stones), pack(empty)
    assert jit(has_line)(bits, g.height, g.inarow, g.size) == has_line(
        bits, g.height, g.inarow, g.size
    )
    assert jit(winning_cells)(bits, empty_bits, g.height, g.inarow, g.size) == winning_cells(
        bits, empty_bits, g.height, g.inarow, g.size
    )


@pytest.mark.parametrize("mark", [2.0, np.float64(2.0), True])
def test_a_mark_follows_the_rule_of_board_sizes(mark: object) -> None:
    """One rule for whole numbers: ``mark=2.0`` is refused as ``rows=6.0`` is."""
    board = [0] * 41 + [1]
    config = {"rows": 6, "columns": 7, "inarow": 4}
    assert Board.from_kaggle(board, config, 2).mark == 2
    with pytest.raises((TypeError, ValueError), match="mark must be 1 or 2") as caught:
        Board.from_kaggle(board, config, mark)  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value, ValueError)  # the page's 400 catches ValueError
    with pytest.raises(TypeError, match="rows must be a whole number"):
        Board.from_kaggle(board, {**config, "rows": 6.0}, 2)
