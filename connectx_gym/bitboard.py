"""ConnectX rules on a bitboard: the one implementation used by the env, the agents and the tests.

A position is two integers, as in Pascal Pons' ``Position.hpp``: ``current`` holds the stones of
the player to move, ``mask`` holds every stone. Each column takes ``rows + 1`` bits, from the bottom
cell up, plus one always-empty sentinel bit on top that stops lines wrapping into the next column.
For the default 6 rows x 7 columns (``height = 7`` bits per column)::

      .  .  .  .  .  .  .     sentinel row (never set)
      5 12 19 26 33 40 47     top row      (Kaggle row 0)
      4 11 18 25 32 39 46
      3 10 17 24 31 38 45
      2  9 16 23 30 37 44
      1  8 15 22 29 36 43
      0  7 14 21 28 35 42     bottom row   (Kaggle row rows-1)

Cell ``(column c, height h)`` is bit ``c * height + h``. A line of stones is a run of set bits
with a step of ``1`` (vertical), ``height`` (horizontal), ``height + 1`` and ``height - 1``
(the diagonals).

The module-level functions take and return plain integers and use only integer arithmetic, so the
search package compiles these very functions with numba (``int64``) when the board fits in 64 bits
(:attr:`Geometry.fits_64_bits`), and runs them on Python integers for larger boards.
On a 64-bit board bit 63 is the last column's sentinel: stones and masks never hold it, so they are
non-negative ``int64``; values that reach it on the way (the carry of ``mask + bottom``, left
shifts) wrap around harmlessly because they are masked with playable cells before use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from connectx_gym.numeric import player_mark, whole_number

__all__ = [
    "MAX_CELLS",
    "MAX_SIDE",
    "Board",
    "Geometry",
    "column_mask",
    "has_line",
    "popcount",
    "possible_moves",
    "winning_cells",
]


#: The largest board: at most ``MAX_SIDE`` rows, columns and discs in a row, and at most
#: ``MAX_CELLS`` cells (64 x 64, 1 x 1024, ...). :class:`Geometry` refuses anything larger before
#: building anything, so a hostile file or spec cannot make it allocate or compute for minutes.
MAX_SIDE = 1024
MAX_CELLS = 4096


def column_mask(column: int, height: int) -> int:
    """Bits of the playable cells of ``column`` (the sentinel bit excluded)."""
    return ((1 << (height - 1)) - 1) << (column * height)


def has_line(stones: int, height: int, inarow: int, size: int) -> bool:
    """True when ``stones`` hold ``inarow`` in a line: the win check.

    ``size`` is the number of bits of the board (``columns * height``); runs are found by doubling
    (a run of ``n`` and one shifted by ``s <= n`` make a run of ``n + s``), so the cost grows with
    ``log2(inarow)``.
    """
    for step in (1, height - 1, height, height + 1):
        run = stones
        length = 1
        while length < inarow and run:
            grow = length if 2 * length <= inarow else inarow - length
            shift = grow * step
            if shift >= size:
                run = 0
            else:
                run &= run >> shift
            length += grow
        if run:
            return True
    return False


def winning_cells(stones: int, empty: int, height: int, inarow: int, size: int) -> int:
    """Cells of ``empty`` where one more stone would complete a line of ``inarow`` with ``stones``.

    For each direction and each split of the other ``inarow - 1`` cells into ``before`` cells on one
    side and ``after`` on the other, a cell qualifies when all of them hold stones.
    """
    if inarow == 1:
        return empty
    if inarow == 4 and 3 * (height + 1) < 64:
        # The usual game, unrolled as in Pons' solver: the four splits of the three other cells.
        found = 0
        for step in (1, height - 1, height, height + 1):
            pair = (stones << step) & (stones << 2 * step)
            found |= pair & ((stones << 3 * step) | (stones >> step))
            pair = (stones >> step) & (stones >> 2 * step)
            found |= pair & ((stones << step) | (stones >> 3 * step))
        return found & empty
    found = 0
    for step in (1, height - 1, height, height + 1):
        for before in range(inarow):
            after = inarow - 1 - before
            cells = empty
            for i in range(1, before + 1):
                shift = i * step
                if shift >= size:
                    cells = 0
                    break
                cells &= stones << shift
            for i in range(1, after + 1):
                shift = i * step
                if shift >= size:
                    cells = 0
                    break
                cells &= stones >> shift
            found |= cells
    return found & empty


class Geometry:
    """Board dimensions and the bit masks derived from them.

    ``rows``, ``columns`` and ``inarow`` are whole numbers >= 1, as Kaggle's ``connectx`` accepts,
    up to :data:`MAX_SIDE` each, with at most :data:`MAX_CELLS` cells (``ValueError`` beyond).
    """

    __slots__ = (
        "_bit_of_cell",
        "_column_masks",
        "_open_columns",
        "board",
        "bottom",
        "cells",
        "columns",
        "fits_64_bits",
        "height",
        "inarow",
        "rows",
        "size",
        "top",
    )

    def __init__(self, rows: int = 6, columns: int = 7, inarow: int = 4) -> None:
        for name, value in (("rows", rows), ("columns", columns), ("inarow", inarow)):
            whole_number(value, name)  # one rule: 6.0 is refused, as mark=2.0 is
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
            if value > MAX_SIDE:
                raise ValueError(f"{name} must be <= {MAX_SIDE}, got {value}")
        if rows * columns > MAX_CELLS:
            raise ValueError(
                f"a board of {rows} x {columns} = {rows * columns} cells is larger than the "
                f"largest supported ({MAX_CELLS} cells)"
            )
        self.rows = int(rows)
        self.columns = int(columns)
        self.inarow = int(inarow)
        self.height = self.rows + 1
        self.size = self.columns * self.height
        self.cells = self.rows * self.columns
        # One bit per column (a base-2**height repunit), computed in one division, not a loop.
        self.bottom = ((1 << self.size) - 1) // ((1 << self.height) - 1)
        self.board = self.bottom * ((1 << self.rows) - 1)
        self.top = self.bottom << (self.rows - 1)
        #: The board fits a machine word: rules and search run numba-compiled on ``int64``.
        self.fits_64_bits = self.size <= 64
        self._open_columns: dict[int, tuple[int, ...]] = {}
        self._column_masks = tuple(column_mask(c, self.height) for c in range(self.columns))
        # Kaggle's flat board index (row 0 at the top, row-major) -> bit index.
        rows_from_top = np.arange(self.rows)[:, None]
        self._bit_of_cell = (
            np.arange(self.columns)[None, :] * self.height + (self.rows - 1 - rows_from_top)
        ).ravel()

    @classmethod
    def of(cls, config: Any) -> Geometry:
        """A geometry from anything with ``rows``, ``columns``, ``inarow`` (attributes or keys)."""
        if isinstance(config, Geometry):
            return config
        get: Callable[[str], Any] = (
            config.get if isinstance(config, dict) else lambda key: getattr(config, key)
        )
        return cls(get("rows"), get("columns"), get("inarow"))

    def column_mask(self, column: int) -> int:
        """Bits of the playable cells of ``column``."""
        return self._column_masks[column]

    def open_columns(self, mask: int) -> tuple[int, ...]:
        """Columns whose top cell is empty in ``mask``; remembered per pattern up to 12 columns."""
        free_tops = self.top & ~mask
        found = self._open_columns.get(free_tops)
        if found is None:
            shifted = free_tops >> (self.rows - 1)
            found = tuple(c for c in range(self.columns) if shifted >> (c * self.height) & 1)
            if self.columns <= 12:
                self._open_columns[free_tops] = found
        return found

    def has_line(self, stones: int) -> bool:
        """True when ``stones`` hold ``inarow`` in a line."""
        return has_line(stones, self.height, self.inarow, self.size)

    def unpack(self, stones: int) -> np.ndarray:
        """``stones`` as a ``(rows, columns)`` bool array, row 0 at the top (Kaggle's view)."""
        raw = np.frombuffer(stones.to_bytes((self.size + 7) // 8, "little"), dtype=np.uint8)
        bits = np.unpackbits(raw, bitorder="little")
        cells: np.ndarray = bits[self._bit_of_cell].reshape(self.rows, self.columns).astype(bool)
        return cells

    def pack(self, cells: np.ndarray) -> int:
        """The bits of the cells set in a ``(rows, columns)`` array, row 0 at the top."""
        flat = np.asarray(cells, dtype=bool).ravel()
        if flat.size != self.cells:
            raise ValueError(f"expected {self.cells} cells, got {flat.size}")
        bits = np.zeros(self.size, dtype=np.uint8)
        bits[self._bit_of_cell[flat]] = 1
        return int.from_bytes(np.packbits(bits, bitorder="little").tobytes(), "little")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Geometry) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def key(self) -> tuple[int, int, int]:
        """``(rows, columns, inarow)``."""
        return (self.rows, self.columns, self.inarow)

    def __repr__(self) -> str:
        return f"Geometry(rows={self.rows}, columns={self.columns}, inarow={self.inarow})"


def _completed_by_a_top_stone(geometry: Geometry, grid: np.ndarray, stones: int) -> bool:
    """Whether the lines of ``stones`` (one player's) could all have been completed by the last
    move: some stone of theirs on top of its column, once taken away, leaves them no line."""
    filled = grid != 0
    columns = np.flatnonzero(filled.any(axis=0))
    tops = np.argmax(filled[:, columns], axis=0)  # the row of each column's top stone
    for row, column in zip(tops.tolist(), columns.tolist(), strict=True):
        bit = 1 << int(geometry._bit_of_cell[row * geometry.columns + column])
        if stones & bit and not geometry.has_line(stones & ~bit):
            return True
    return False


class Board(NamedTuple):
    """An immutable ConnectX position, seen from the player to move.

    Mark 1 moves first, as in Kaggle, so the player to move has mark ``1 + moves % 2``.
    Build one with :meth:`empty`, :meth:`from_moves` or :meth:`from_kaggle`, and advance it with
    :meth:`play`, which returns a new board. (A named tuple: immutable, hashable, and cheap to
    build, which matters inside ``step()``.)
    """

    geometry: Geometry
    current: int  # stones of the player to move
    mask: int  # all stones
    moves: int  # stones on the board

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls, rows: int = 6, columns: int = 7, inarow: int = 4) -> Board:
        """The empty board."""
        return cls(Geometry(rows, columns, inarow), 0, 0, 0)

    @classmethod
    def from_moves(cls, geometry: Geometry, columns: Iterable[int]) -> Board:
        """The board after playing ``columns`` (0-indexed) from the empty board.

        Raises ``ValueError`` on an illegal move or a move after the game has ended.
        """
        board = cls(geometry, 0, 0, 0)
        for index, column in enumerate(columns):
            if board.is_terminal():
                raise ValueError(f"move {index} ({column}) comes after the game has ended")
            board = board.play(int(column))
        return board

    @classmethod
    def from_kaggle(cls, board: Sequence[int], config: Any, mark: int | None = None) -> Board:
        """A board from Kaggle's flat list (row 0 at the top; 0 empty, 1 and 2 the marks).

        The player to move is the one with fewer stones (mark 1 on a tie); ``mark``, if given, must
        agree. Raises ``ValueError`` for a board that no legal game reaches because of floating
        stones, wrong stone counts, values other than 0, 1, 2, a line of the player to move, or a
        line of the other player that no last move of theirs (a stone on top of a column) could
        have completed (either way the game would have ended earlier); subtler unreachable boards
        are not detected.
        """
        geometry = Geometry.of(config)
        cells = np.asarray(board, dtype=np.int64)
        if cells.shape != (geometry.cells,):
            raise ValueError(f"board must have {geometry.cells} cells, got shape {cells.shape}")
        if not np.isin(cells, (0, 1, 2)).all():
            raise ValueError("board cells must be 0, 1 or 2")
        grid = cells.reshape(geometry.rows, geometry.columns)
        ones, twos = int((grid == 1).sum()), int((grid == 2).sum())
        if ones - twos not in (0, 1):
            raise ValueError(
                f"mark 1 has {ones} stones and mark 2 has {twos}: not a legal position"
            )
        filled = grid != 0
        if (filled[:-1] & ~filled[1:]).any():
            raise ValueError("a stone floats above an empty cell")
        to_move = 1 if ones == twos else 2
        if mark is not None and player_mark(mark) != to_move:
            raise ValueError(f"mark {mark} is not the player to move (mark {to_move} is)")
        mine = geometry.pack(grid == to_move)
        if geometry.has_line(mine):
            raise ValueError(
                f"mark {to_move}, the player to move, already has {geometry.inarow} in a row: "
                "the game would have ended before the last move"
            )
        last = 3 - to_move
        theirs = geometry.pack(grid == last)
        if geometry.has_line(theirs) and not _completed_by_a_top_stone(geometry, grid, theirs):
            raise ValueError(
                f"mark {last} has {geometry.inarow} in a row without any of its top stones: "
                "the game would have ended before its last move"
            )
        return cls(geometry, mine, geometry.pack(filled), ones + twos)

    # -- queries ------------------------------------------------------------------------------
    @property
    def mark(self) -> int:
        """Mark of the player to move (1 or 2)."""
        return 1 + (self.moves & 1)

    @property
    def opponent(self) -> int:
        """Stones of the player who is not to move."""
        return self.current ^ self.mask

    def can_play(self, column: int) -> bool:
        """True when ``column`` is on the board and not full."""
        g = self.geometry
        return 0 <= column < g.columns and not self.mask & g.top & g.column_mask(column)

    def open_columns(self) -> tuple[int, ...]:
        """Columns that are not full, in increasing order, whether or not the game is over."""
        return self.geometry.open_columns(self.mask)

    def legal_moves(self) -> list[int]:
        """Columns that are not full, in increasing order (empty once the game is over)."""
        return [] if self.is_terminal() else list(self.open_columns())

    def legal_mask(self) -> np.ndarray:
        """Bool array over columns: True where a move is legal (all False once the game is over)."""
        legal = np.zeros(self.geometry.columns, dtype=bool)
        legal[self.legal_moves()] = True
        return legal

    def move_bit(self, column: int) -> int:
        """The bit of the cell a stone dropped in ``column`` lands on (column must not be full)."""
        g = self.geometry
        return (self.mask + (g.bottom & g.column_mask(column))) & g.column_mask(column)

    def is_winning_move(self, column: int) -> bool:
        """True when playing ``column`` (legal) completes a line for the player to move."""
        return self.geometry.has_line(self.current | self.move_bit(column))

    def play(self, column: int) -> Board:
        """The board after the player to move drops a stone in ``column``.

        Raises ``ValueError`` naming the column and the legal ones when the move is illegal.
        """
        if not self.can_play(column):
            raise ValueError(
                f"illegal move: column {column}; legal columns are {self.legal_moves()}"
            )
        mask = self.mask | self.move_bit(column)
        return Board(self.geometry, self.current ^ self.mask, mask, self.moves + 1)

    def winner(self) -> int | None:
        """Mark that has a line (checked before any draw), else ``None``."""
        if self.geometry.has_line(self.opponent):
            return 2 - (self.moves & 1)  # the player who moved last
        if self.geometry.has_line(self.current):
            return self.mark
        return None

    def is_full(self) -> bool:
        """True when every cell holds a stone."""
        return self.moves == self.geometry.cells

    def is_terminal(self) -> bool:
        """True when a player has a line or the board is full."""
        return self.winner() is not None or self.is_full()

    def column_heights(self) -> list[int]:
        """Number of stones in each column."""
        g = self.geometry
        return [(self.mask & g.column_mask(c)).bit_count() for c in range(g.columns)]

    # -- views --------------------------------------------------------------------------------
    def to_array(self) -> np.ndarray:
        """``(rows, columns)`` int8 array of marks (0 empty), row 0 at the top (Kaggle's view)."""
        g = self.geometry
        grid = np.zeros((g.rows, g.columns), dtype=np.int8)
        grid[g.unpack(self.current)] = self.mark
        grid[g.unpack(self.opponent)] = 3 - self.mark
        return grid

    def to_kaggle(self) -> list[int]:
        """Kaggle's flat board list: row-major, row 0 at the top, 0 empty, 1 and 2 the marks."""
        marks: list[int] = self.to_array().ravel().tolist()
        return marks

    def to_planes(self) -> np.ndarray:
        """``(2, rows, columns)`` int8 planes: the mover's stones, then the other player's."""
        g = self.geometry
        return np.stack([g.unpack(self.current), g.unpack(self.opponent)]).astype(np.int8)

    def key(self) -> tuple[int, int]:
        """A hashable identity of the position: ``(current, mask)``."""
        return (self.current, self.mask)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is Board
            and self.geometry == other.geometry
            and self.current == other.current
            and self.mask == other.mask
        )

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((self.geometry, self.current, self.mask))

    def __repr__(self) -> str:
        return f"Board({self.geometry!r}, moves={self.moves}, mark={self.mark})"

    def __str__(self) -> str:
        symbols = {0: ".", 1: "X", 2: "O"}
        rows = [" ".join(symbols[int(v)] for v in row) for row in self.to_array()]
        rows.append(" ".join(str(c % 10) for c in range(self.geometry.columns)))
        return "\n".join(rows)


def popcount(bits: int) -> int:
    """Number of set bits of a non-negative integer."""
    count = 0
    while bits:
        bits &= bits - 1
        count += 1
    return count


def possible_moves(mask: int, bottom: int, board: int) -> int:
    """The cell each non-full column would receive next, as one bit per playable column."""
    return (mask + bottom) & board
