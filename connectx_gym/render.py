"""Text and RGB pictures of a ConnectX board (numpy only, no pygame)."""

from __future__ import annotations

import numpy as np

__all__ = ["board_to_ansi", "board_to_rgb"]

_SYMBOLS = np.array([".", "X", "O"])
_PALETTE = np.array([[245, 245, 245], [220, 40, 40], [245, 200, 20]], dtype=np.uint8)
_BOARD_BLUE = np.array([25, 70, 190], dtype=np.uint8)
_CELL = 40


#: ANSI colours of the marks for :func:`board_to_ansi` (``colour=True``): red X, yellow O.
_COLOURED = np.array([".", "\x1b[1;31mX\x1b[0m", "\x1b[1;33mO\x1b[0m"])


def board_to_ansi(
    grid: np.ndarray, footer: str = "", *, first_column: int = 0, colour: bool = False
) -> str:
    """A ``(rows, columns)`` array of marks as text: ``X`` mark 1, ``O`` mark 2, column numbers.

    Columns are numbered from ``first_column`` (0 as the API counts, 1 for people; the last digit
    only); ``colour=True`` paints the marks with ANSI escapes (red X, yellow O).
    """
    lines = [" ".join(row) for row in (_COLOURED if colour else _SYMBOLS)[grid]]
    lines.append(" ".join(str((c + first_column) % 10) for c in range(grid.shape[1])))
    if footer:
        lines.append(footer)
    return "\n".join(lines) + "\n"


def _disc_mask(cell: int) -> np.ndarray:
    centre = (cell - 1) / 2
    y, x = np.ogrid[:cell, :cell]
    return (x - centre) ** 2 + (y - centre) ** 2 <= (0.4 * cell) ** 2


_DISC = _disc_mask(_CELL)


def board_to_rgb(grid: np.ndarray) -> np.ndarray:
    """A ``(rows * 40, columns * 40, 3)`` uint8 image: red discs mark 1, yellow mark 2, on blue."""
    rows, columns = grid.shape
    pixels = np.repeat(np.repeat(_PALETTE[grid], _CELL, axis=0), _CELL, axis=1)
    inside = np.tile(_DISC, (rows, columns))
    pixels[~inside] = _BOARD_BLUE
    return pixels
