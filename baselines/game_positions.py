"""Positions of games: the phases of a game, position keys up to the mirror, and the games that
labelled positions are drawn from (shared by the teacher labels of a run and the data-making
programs of ``tools/``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from connectx_gym import _vector_kernels
from connectx_gym._dims import dims_arg
from connectx_gym.bitboard import Board, Geometry
from connectx_gym.policy import Policy

__all__ = ["PHASES", "canonical_key", "canonical_keys", "phase_bounds", "play_game"]

#: Phase names and their first ply on 6x7 (each phase runs to the next one's start; the last to
#: the last ply). Fewer than 6 stones are left out: their exact scores cost 10+ s each on one core
#: (and matches cover the first plies with the two-ply openings of :mod:`connectx_gym.openings`).
PHASES: dict[str, int] = {"opening": 6, "early": 12, "middle": 19, "late": 29}


def phase_bounds(geometry: Geometry) -> dict[str, tuple[int, int]]:
    """``{phase: (first ply, last ply)}``: :data:`PHASES`, scaled to the board's cell count."""
    cells = geometry.cells
    starts = [max(round(s * cells / 42), 1) for s in PHASES.values()]
    ends = [*(s - 1 for s in starts[1:]), cells - 1]
    return {name: (s, e) for name, s, e in zip(PHASES, starts, ends, strict=True) if s <= e}


def canonical_key(geometry: Geometry, moves: Sequence[int]) -> tuple[int, int]:
    """The smaller of the position's key and its horizontal mirror's (mirror-symmetric id)."""
    board = Board.from_moves(geometry, moves)
    mirror = Board.from_moves(geometry, [geometry.columns - 1 - c for c in moves])
    return min(board.key(), mirror.key())


def canonical_keys(geometry: Geometry, moves: np.ndarray) -> list[tuple[int, int]]:
    """:func:`canonical_key` of each row of ``moves`` (``[n, width]`` 0-based columns, padded at
    the end with -1, as the labelled sets store them), at once.

    The rows are replayed together by the batched env's kernels (one call per ply over every row
    that has a move there; :mod:`connectx_gym._vector_kernels`), then mirrored and replayed again:
    200,000 rows of 6x7 in 0.9 s on a quiet machine, where a :class:`Board` per row took about a
    minute. As with :func:`canonical_key`, a column out of range, a full column or a move after
    the game has ended is a ``ValueError``; so is a move after a row's -1 padding.
    """
    moves = np.asarray(moves)
    if moves.ndim != 2:
        raise ValueError(f"moves must be a 2-D array of rows, got shape {moves.shape}")
    played = moves >= 0
    if ((moves < -1) | (moves >= geometry.columns)).any():
        raise ValueError(f"a move is not a column of the board (0 to {geometry.columns - 1})")
    if (played[:, 1:] & ~played[:, :-1]).any():
        raise ValueError("a row has a move after its -1 padding")
    mirrored = np.where(played, geometry.columns - 1 - moves, moves)
    current, mask = _replay(geometry, moves, played)
    mirror_current, mirror_mask = _replay(geometry, mirrored, played)
    # min() of the two (current, mask) pairs, as tuples compare
    use_mirror = (mirror_current < current) | ((mirror_current == current) & (mirror_mask < mask))
    current = np.where(use_mirror, mirror_current, current)
    mask = np.where(use_mirror, mirror_mask, mask)
    return list(zip(current.tolist(), mask.tolist(), strict=True))


def _replay(
    geometry: Geometry, moves: np.ndarray, played: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``current`` and ``mask`` of each row after its moves, seen from the player to move."""
    g = geometry
    kernels = _vector_kernels.for_geometry(g.fits_64_bits)
    count, width = moves.shape
    word = np.int64 if g.fits_64_bits else object
    first, mask = np.zeros(count, dtype=word), np.zeros(count, dtype=word)  # first mover's stones
    plies, marks = np.zeros(count, dtype=np.int64), np.ones(count, dtype=np.int64)
    winner, rewards = np.full(count, -1, dtype=np.int64), np.zeros(count)
    planes = np.zeros((count, 2, g.rows, g.columns), dtype=np.int8)
    legal = np.ones((count, g.columns), dtype=np.int8)  # cleared as columns fill and games end
    for ply in range(width):
        boards = np.flatnonzero(played[:, ply])
        if not len(boards):
            break
        columns = moves[boards, ply].astype(np.int64)
        if not legal[boards, columns].all():
            raise ValueError(f"a row plays a full column or goes on after its game, ply {ply}")
        kernels.play_columns(
            first, mask, plies, marks, winner, rewards, planes, legal, boards, columns,
            ply % 2 == 0, dims_arg(g),
        )  # fmt: skip
    return np.where(plies % 2 == 0, first, first ^ mask), mask  # the first moves after even plies


def play_game(
    geometry: Geometry,
    policies: Sequence[Policy],
    rng: np.random.Generator,
    start: Sequence[int] = (),
) -> list[int]:
    """The moves of one game between two of ``policies`` drawn with replacement (the first
    seat first), every move and draw from ``rng``; the game starts with the moves ``start``
    (which it returns too)."""
    seats = [policies[i] for i in rng.integers(len(policies), size=2)]
    for policy in seats:
        policy.reset()
    board, moves = Board.from_moves(geometry, start), [int(c) for c in start]
    while not board.is_terminal():
        column = int(seats[board.moves % 2].act(board, rng))
        board = board.play(column)
        moves.append(column)
    return moves
