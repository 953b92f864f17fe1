"""The integers of a board's geometry as the kernels take them: one named tuple, :class:`Dims`.

numba compiles named tuples of integers, so a kernel takes one ``dims`` argument instead of five
to seven loose integers. The Python side passes :func:`dims_arg` (the same fields as one
``int64`` array on boards of up to 64 bits: numba reads an array argument a few microseconds
faster than a tuple); kernels take either and read it with :func:`as_dims`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from connectx_gym._jit import helper
from connectx_gym.bitboard import Geometry


class Dims(NamedTuple):
    """The integers of a :class:`~connectx_gym.Geometry` that the kernels read."""

    bottom: int
    board: int
    height: int
    inarow: int
    size: int
    columns: int
    cells: int


#: A kernel's ``dims`` argument: :class:`Dims` or its fields in an array (:func:`dims_arg`).
DimsArg = Dims | np.ndarray


def dims(geometry: Geometry) -> Dims:
    """The :class:`Dims` of ``geometry``."""
    g = geometry
    return Dims(g.bottom, g.board, g.height, g.inarow, g.size, g.columns, g.cells)


def dims_arg(geometry: Geometry) -> DimsArg:
    """The :class:`Dims` of ``geometry`` as a kernel call takes them: one ``int64`` array on
    boards of up to 64 bits (cheaper for numba to dispatch on than a named tuple), the named
    tuple itself on larger boards (their masks do not fit in ``int64``)."""
    d = dims(geometry)
    return np.array(d, dtype=np.int64) if geometry.fits_64_bits else d


@helper
def as_dims(dims: DimsArg) -> Dims:
    """The :class:`Dims` of a kernel's dims argument: the named tuple itself, or its fields in
    an array (:func:`dims_arg`)."""
    return Dims(dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6])
