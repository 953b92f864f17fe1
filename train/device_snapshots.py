"""Self-play snapshots answered on the training device.

A snapshot of the self-play pool is the agent's weights in the weights-only format, played with
numpy (:class:`connectx_gym.files.NumpyNetPolicy`): the fastest way on a CPU, where a batched
env asks each snapshot for one or two boards a step. When the run trains on a GPU, that numpy
forward pass on one core becomes the largest CPU cost of the rollouts (the bigger the network,
the more so); :class:`DeviceWeights` runs the batched logits of such a snapshot on the GPU
instead, rebuilt as the torch network it was exported from (:class:`train.networks.ConnectXCNN`
and the action layer). Single boards (``act``, ``scores``) stay on numpy.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from connectx_gym.weights import WeightsFile
from train.networks import ConnectXCNN

__all__ = ["DeviceWeights", "SnapshotNetwork", "snapshot_device"]

_BLOCK = re.compile(r"block(\d+)\.(conv[12])\.(weight|bias)")


def snapshot_device(device: torch.device) -> torch.device | None:
    """Where a run on ``device`` answers its snapshots' batches: the GPU it trains on, or
    ``None`` (numpy) on a CPU."""
    return device if device.type == "cuda" else None


class SnapshotNetwork(nn.Module):
    """The logits of a :class:`~train.networks.ConnectXPolicy` export: the extractor's column
    scores and features, then ``action(features) + column scores``."""

    def __init__(self, weights: WeightsFile) -> None:
        super().__init__()
        params = weights.params
        blocks = 1 + max((int(m[1]) for m in map(_BLOCK.fullmatch, params) if m), default=-1)
        channels, planes = params["stem.weight"].shape[:2]
        rows, columns = int(weights.geometry.rows), int(weights.geometry.columns)
        space = gym.spaces.Box(0, 1, (planes - 2, rows, columns), dtype=np.int8)
        features = params["head.weight"].shape[0]
        self.columns = columns
        self.extractor = ConnectXCNN(space, channels, blocks, features)
        self.action = nn.Linear(columns + features, columns)
        state = {_torch_name(name): torch.tensor(value) for name, value in params.items()}
        self.load_state_dict(state, strict=True)  # a network of another shape raises here

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        latent = self.extractor(observations)
        return self.action(latent) + latent[:, : self.columns]


def _torch_name(name: str) -> str:
    """The state-dict key of a weights-only array name (:func:`train.networks.numpy_layers`)."""
    block = _BLOCK.fullmatch(name)
    if block:
        return f"extractor.blocks.{block[1]}.{block[2]}.{block[3]}"
    if name.startswith("action."):
        return name
    return f"extractor.{name}"


class DeviceWeights(WeightsFile):
    """``weights`` whose batched :meth:`logits` run on ``device`` (float32, inference mode)."""

    network: SnapshotNetwork
    device: torch.device

    @classmethod
    def of(cls, weights: WeightsFile, device: torch.device) -> DeviceWeights:
        """``weights`` (already checked when read) with its network on ``device``; a network
        that is not a ConnectXPolicy export raises ``ValueError``."""
        moved = cls.__new__(cls)
        moved.__dict__.update(weights.__dict__)
        try:
            network = SnapshotNetwork(weights)
        except (KeyError, RuntimeError) as error:
            raise ValueError(f"not a ConnectXPolicy export: {error}") from None
        moved.network = network.to(device).eval()
        moved.device = device
        return moved

    def logits(self, planes: np.ndarray) -> np.ndarray:
        """Raw logits for a batch ``(N, 2, rows, columns)`` of observations."""
        with torch.inference_mode():
            x = torch.as_tensor(np.asarray(planes, dtype=np.int8)).to(self.device)
            return self.network(x).float().cpu().numpy()

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as the plain :class:`WeightsFile` (numpy), as a subprocess env's workers
        receive their opponents."""
        return WeightsFile, (self.geometry, self.layers, self.params)
