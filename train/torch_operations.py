"""The network's operations in torch, keyed by the names of the core's table
(:data:`connectx_gym.forward.OPERATIONS`): the same arithmetic as the numpy kernels, on
channels-first ``(N, C, H, W)`` tensors, so a torch module running a weights-only description (the
ONNX export's :class:`~connectx_train.onnx_export.LayersModule`) gives the same logits. A test
checks that this table and the core's name the same operations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.nn import functional

__all__ = ["TORCH_OPERATIONS", "TorchRun"]


class TorchRun(NamedTuple):
    """What the torch kernels share while a description runs: its arrays by name and the landing
    cells of ``input_planes``."""

    param: Callable[[str], torch.Tensor]
    saved: dict[str, torch.Tensor]

    def run(self, layers: list, x: torch.Tensor) -> torch.Tensor:
        """``layers`` on ``x``, each by its torch kernel."""
        for layer in layers:
            x = TORCH_OPERATIONS[layer["op"]](layer, x, self)
        return x


def _ones_plane(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.cat([x, torch.ones_like(x[:, :1])], dim=1)


def _input_planes(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    occupied = x[:, 0] + x[:, 1]
    below = torch.cat([occupied[:, 1:], torch.ones_like(occupied[:, :1])], dim=1)
    net.saved["landing"] = (1 - occupied) * below
    return torch.cat([x, torch.ones_like(x[:, :1]), net.saved["landing"][:, None]], dim=1)


def _gather_landing(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return (x[:, 0] * net.saved["landing"]).sum(dim=1)


def _branches(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.cat([net.run(body, x).flatten(1) for body in layer["branches"]], dim=1)


def _linear_plus_prefix(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    weight = net.param(layer["weight"])
    return functional.linear(x, weight, net.param(layer["bias"])) + x[:, : weight.shape[0]]


def _conv(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    weight = net.param(layer["weight"])
    padding = (weight.shape[2] // 2, weight.shape[3] // 2)
    return functional.conv2d(x, weight, net.param(layer["bias"]), padding=padding)


def _linear(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return functional.linear(x, net.param(layer["weight"]), net.param(layer["bias"]))


def _relu(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.relu(x)


def _tanh(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.tanh(x)


def _flatten(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return x.flatten(1)


def _residual(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return x + net.run(layer["body"], x)


#: The torch kernel of every operation, by the core's name for it.
TORCH_OPERATIONS: dict[str, Callable[[dict, torch.Tensor, TorchRun], torch.Tensor]] = {
    "ones_plane": _ones_plane,
    "input_planes": _input_planes,
    "gather_landing": _gather_landing,
    "branches": _branches,
    "linear_plus_prefix": _linear_plus_prefix,
    "conv": _conv,
    "linear": _linear,
    "relu": _relu,
    "tanh": _tanh,
    "flatten": _flatten,
    "residual": _residual,
}
