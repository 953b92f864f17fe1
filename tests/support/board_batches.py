"""Batches of random positions for the tests of batch kernels and the batched env."""

from __future__ import annotations

import numpy as np

from connectx_gym.batch import BoardBatch
from connectx_gym.bitboard import Board, Geometry


def random_batch(geometry: Geometry, count: int, seed: int) -> tuple[BoardBatch, list[Board]]:
    """``count`` positions of random games (0 to 14 plies, not over), as a batch and boards."""
    rng = np.random.default_rng(seed)
    boards: list[Board] = []
    while len(boards) < count:
        board = Board(geometry, 0, 0, 0)
        for _ in range(rng.integers(0, 15)):
            board = board.play(int(rng.choice(board.legal_moves())))
            if board.is_terminal():
                break
        if not board.is_terminal():
            boards.append(board)
    word = np.int64 if geometry.fits_64_bits else object
    batch = BoardBatch(
        geometry,
        np.array([b.current for b in boards], dtype=word),
        np.array([b.mask for b in boards], dtype=word),
        np.array([b.moves for b in boards], dtype=np.int64),
    )
    return batch, boards
