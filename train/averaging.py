"""Averaging a run's last weights (stochastic weight averaging, Izmailov et al. 2018).

A run saves a snapshot of its weights every ``snapshot_every`` steps (``snapshots/step_*.npz``,
the self-play pool). With ``average_weights`` = K > 1 the run's play weights (``final.npz``, the
final panel, the report) are the element-wise mean of its last weights and the K - 1 newest
snapshots taken at least half a snapshot interval before the end: the snapshot of the last few
rollouts is the last weights give or take an update, so the K weights are about one interval
apart. ``final.zip`` keeps the last weights, to train further from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from connectx_gym.files import load_weights
from connectx_gym.weights import WeightsFile

__all__ = ["averaged_weights", "snapshot_step", "snapshots_to_average"]

_SNAPSHOT = re.compile(r"step_(\d+)\.npz")


def snapshot_step(path: Path) -> int:
    """The step at which snapshot ``path`` (``step_000050016.npz``) was taken."""
    match = _SNAPSHOT.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path} is not a snapshot file (step_<steps>.npz)")
    return int(match[1])


def snapshots_to_average(directory: Path, end: int, every: int, count: int) -> list[Path]:
    """The ``count`` newest ``step_*.npz`` files of ``directory`` taken at step ``end - every / 2``
    or earlier, newest first (fewer when the run has fewer)."""
    if count <= 0 or not directory.is_dir():
        return []
    matches = ((_SNAPSHOT.fullmatch(path.name), path) for path in directory.iterdir())
    taken = [(int(m[1]), path) for m, path in matches if m and int(m[1]) <= end - every / 2]
    return [path for _, path in sorted(taken, reverse=True)[:count]]


def averaged_weights(last: WeightsFile, snapshots: Sequence[Path]) -> WeightsFile:
    """The element-wise mean (in float64, stored as float32) of ``last`` and the weights saved in
    ``snapshots``, which must be the same network (``ValueError`` otherwise)."""
    others = [load_weights(path) for path in snapshots]
    for path, other in zip(snapshots, others, strict=True):
        if other.layers != last.layers or any(
            other.params[name].shape != array.shape for name, array in last.params.items()
        ):
            raise ValueError(f"cannot average {path}: it is not the run's network")
    params = {
        name: np.mean([w.params[name].astype(np.float64) for w in (*others, last)], axis=0)
        for name in last.params
    }
    return WeightsFile(last.geometry, last.layers, params)
