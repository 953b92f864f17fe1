"""Opening sets for matches: games that start from varied positions, not only the empty board.

Two deterministic players that start every game on the empty board replay one or two lines, so a
100-game match may measure two games a hundred times. Matches therefore start, by default, from
every **two-ply opening**: each of the ``columns ** 2`` pairs (first player's column, second
player's column), in order ``(0, 0), (0, 1), ..., (columns - 1, columns - 1)``, each played once
from each seat (49 openings, 98 games on 6x7). Both players face the same openings with both
colours, so the set is balanced by construction; the openings are not all equal in value (the
first player's centre opening is a win for it with perfect play), which the seat swap cancels.

Named sets (:data:`OPENING_SETS`), resolved for a board by :func:`resolve_openings`:

- ``"two-ply"`` (default): all legal two-ply openings that do not end the game;
- ``"one-ply"``: each first move (``columns`` openings);
- ``"three-ply"``: all ``columns ** 3`` three-ply openings (343 on 6x7, 686 games);
- ``"none"``: only the empty board (the old protocol: every game starts on the empty board).

Any sequence of move sequences (0-based columns) is accepted as a custom set. ``None`` means the
default set, or on boards where no two-ply opening leaves the game running (a single cell, a
single column of one or two rows, or lines of one stone), the one-ply set, else the empty
board.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from connectx_gym.bitboard import Board, Geometry

__all__ = ["DEFAULT_OPENINGS", "OPENING_SETS", "Openings", "ply_openings", "resolve_openings"]

#: What matches use unless told otherwise.
DEFAULT_OPENINGS = "two-ply"
#: Named opening sets and their number of plies.
OPENING_SETS: dict[str, int] = {"none": 0, "one-ply": 1, "two-ply": 2, "three-ply": 3}

Openings = str | Sequence[Sequence[int]] | None


def ply_openings(geometry: Geometry, plies: int) -> list[tuple[int, ...]]:
    """Every sequence of ``plies`` columns that is legal and leaves the game running, in
    lexicographic order (``columns ** plies`` of them on boards of at least ``plies`` rows
    where no ``plies``-move line can win)."""
    if plies < 0:
        raise ValueError(f"plies must be >= 0, got {plies}")
    found = []
    for moves in itertools.product(range(geometry.columns), repeat=plies):
        board = Board(geometry, 0, 0, 0)
        for column in moves:
            if board.is_terminal() or not board.can_play(column):
                break
            board = board.play(column)
        else:
            if not board.is_terminal():
                found.append(moves)
    return found


def resolve_openings(openings: Openings, geometry: Geometry) -> list[tuple[int, ...]]:
    """The opening set ``openings`` (a name of :data:`OPENING_SETS`, ``None`` for
    :data:`DEFAULT_OPENINGS`, or move sequences) on ``geometry``, checked and as tuples.

    Raises ``ValueError`` for an unknown name, an empty set, an illegal opening or one that
    ends the game.
    """
    if openings is None:
        # The default set; on boards too small for it, the longest set that exists.
        for plies in (OPENING_SETS[DEFAULT_OPENINGS], 1):
            found = ply_openings(geometry, plies)
            if found:
                return found
        return ply_openings(geometry, 0)
    if isinstance(openings, str):
        if openings not in OPENING_SETS:
            raise ValueError(
                f"unknown opening set {openings!r}; choose one of {', '.join(OPENING_SETS)}"
            )
        found = ply_openings(geometry, OPENING_SETS[openings])
        if not found:
            raise ValueError(f"the board {geometry} has no {openings} openings")
        return found
    result = []
    for opening in openings:
        moves = tuple(int(column) for column in opening)
        try:
            board = Board.from_moves(geometry, moves)
        except ValueError as error:
            raise ValueError(f"opening {list(moves)} is not playable: {error}") from None
        if board.is_terminal():
            raise ValueError(f"opening {list(moves)} ends the game")
        result.append(moves)
    if not result:
        raise ValueError("the opening set is empty")
    return result
