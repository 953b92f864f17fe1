"""What a search policy builds once per board size and reuses for every move on it.

A policy plays any geometry, so it keeps, by :class:`~connectx_gym.bitboard.Geometry`, the
kernels compiled for it, the arguments they take (the column order, the board's dimensions, the
window weights' arrays for its ``inarow``) and the search's stack (allocating it costs as much as
a short search). Everything here pickles, so the policy does (a kernel module is rebuilt from its
name, :class:`~connectx_gym._jit.Backend`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from connectx_baselines._layout import center_order, new_frames, new_state
from connectx_baselines.heuristic import WindowWeights
from connectx_gym._dims import dims_arg
from connectx_gym._jit import Backend, backend
from connectx_gym.bitboard import Geometry

__all__ = ["GeometryCache", "GeometryKernels", "SearchStack"]

_NO_WEIGHTS = np.zeros(1)


class GeometryKernels(NamedTuple):
    """A search's kernels for one geometry and the arguments they take."""

    kernels: Backend
    order: np.ndarray  # the columns, centre first
    dims: np.ndarray | tuple  # connectx_gym._dims.dims_arg
    own_weights: np.ndarray  # the window weights' arrays (a placeholder without weights)
    other_weights: np.ndarray


class SearchStack(NamedTuple):
    """A resumable search's scratch arrays (:mod:`connectx_baselines._layout`)."""

    frames: np.ndarray
    bounds: np.ndarray
    state: np.ndarray


class GeometryCache:
    """The kernels of module ``kernels`` and, when given, the arrays of ``weights``, per geometry,
    built on first use; and per geometry and depth, a search stack."""

    def __init__(self, kernels: str, weights: WindowWeights | None = None) -> None:
        self.kernels = kernels
        self.weights = weights
        self._entries: dict[Geometry, GeometryKernels] = {}
        self._stacks: dict[tuple[Geometry, int], SearchStack] = {}

    def get(self, geometry: Geometry) -> GeometryKernels:
        """The kernels for ``geometry`` and their arguments."""
        entry = self._entries.get(geometry)
        if entry is None:
            own, other = _NO_WEIGHTS, _NO_WEIGHTS
            if self.weights is not None:
                own, other = self.weights.arrays(geometry.inarow)
            entry = GeometryKernels(
                backend(self.kernels, geometry),
                center_order(geometry.columns),
                dims_arg(geometry),
                own,
                other,
            )
            self._entries[geometry] = entry
        return entry

    def stack(self, geometry: Geometry, depth: int) -> SearchStack:
        """The stack of a search ``depth`` plies deep on ``geometry``, the same arrays every
        time (the caller restarts its state)."""
        key = (geometry, depth)
        if key not in self._stacks:
            self._stacks[key] = SearchStack(*new_frames(depth, geometry), new_state())
        return self._stacks[key]
