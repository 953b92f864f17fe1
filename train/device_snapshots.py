"""Self-play snapshots answered on the training device.

A snapshot of the self-play pool is the agent's weights in the weights-only format, played with
numpy (:class:`connectx_gym.files.NumpyNetPolicy`): the fastest way on a CPU, where a batched
env asks each snapshot for one or two boards a step. When the run trains on a GPU, that numpy
forward pass on one core becomes the largest CPU cost of the rollouts (the bigger the network,
the more so); :class:`DeviceWeights` runs the batched logits of such a snapshot on the GPU
instead, with the torch kernels of the same layer description
(:mod:`connectx_train.torch_operations`, which the ONNX export runs too). Single boards (``act``,
``scores``) stay on numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from connectx_gym.weights import WeightsFile
from connectx_train.torch_operations import TorchRun

__all__ = ["DeviceWeights", "snapshot_device"]


def snapshot_device(device: torch.device) -> torch.device | None:
    """Where a run on ``device`` answers its snapshots' batches: the GPU it trains on, or
    ``None`` (numpy) on a CPU."""
    return device if device.type == "cuda" else None


class DeviceWeights(WeightsFile):
    """``weights`` whose batched :meth:`logits` run on ``device`` (float32, inference mode)."""

    tensors: dict[str, torch.Tensor]
    device: torch.device

    @classmethod
    def of(cls, weights: WeightsFile, device: torch.device) -> DeviceWeights:
        """``weights`` (already checked when read) with its arrays on ``device``."""
        moved = cls.__new__(cls)
        moved.__dict__.update(weights.__dict__)
        moved.tensors = {
            name: torch.tensor(value, device=device) for name, value in weights.params.items()
        }
        moved.device = device
        return moved

    def logits(self, planes: np.ndarray) -> np.ndarray:
        """Raw logits for a batch ``(N, 2, rows, columns)`` of observations."""
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(planes, dtype=np.float32)).to(self.device)
            return TorchRun(self.tensors.__getitem__, {}).run(self.layers, x).cpu().numpy()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the plain :class:`WeightsFile` (numpy), as a subprocess env's workers
        receive their opponents."""
        return WeightsFile, (self.geometry, self.layers, self.params)
