"""A small residual CNN policy for ConnectX boards, and its weights-only description.

SB3's ``NatureCNN`` is built for 84x84 Atari frames; a 6x7 board wants 3x3 convolutions with "same"
padding and a policy head that knows that a move *is* a column. :class:`ConnectXCNN` takes the env's
``(2, rows, columns)`` int8 observation (the mover's discs, then the opponent's) and appends a plane
of ones (so that the zero padding tells the board's edge from an empty cell) and the plane of
*landing cells* (where each non-full column's next disc would land). After a stem convolution and
residual blocks it produces

- one score per column: a 1x1 convolution read at that column's landing cell, so that a pattern
  learnt in one place counts everywhere on the board (the convolution is translation-equivariant);
- ``features_dim`` dense features over the whole board, for the value and for global plans.

:class:`ConnectXPolicy` (a MaskablePPO policy) adds the column scores to the logits of its
action layer; its critic (the ``vf`` layers of ``net_arch``, then one linear output) reads the same
features. The network works for any board size. :func:`numpy_weights` describes both heads in the
weights-only format of :mod:`connectx_gym.weights` (:func:`numpy_layers` the logits,
:func:`numpy_value_head` the value).

The other way round, :data:`TORCH_OPERATIONS` runs such a weights-only description in torch: the
operations keyed by the names of the core's table (:data:`connectx_gym.forward.OPERATIONS`), the
same arithmetic as the numpy kernels on channels-first ``(N, C, H, W)`` tensors, so a torch module
running a description (the ONNX export's :class:`~connectx_train.onnx_export.LayersModule`, the
self-play snapshots on a GPU) gives the same logits. A test checks that this table and the core's
name the same operations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, cast

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib.common.maskable.distributions import MaskableDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn
from torch.nn import functional

from connectx_gym.forward import OPERATIONS
from connectx_gym.weights import ValueHead, WeightsFile

__all__ = [
    "TORCH_OPERATIONS",
    "ConnectXCNN",
    "ConnectXPolicy",
    "ResidualBlock",
    "TorchRun",
    "landing_cells",
    "numpy_layers",
    "numpy_value_head",
    "numpy_weights",
]

#: Scale of the column-score layer at initialisation: the first policy is close to uniform.
COLUMN_INIT_SCALE = 0.01


class ResidualBlock(nn.Module):
    """``x + conv(relu(conv(x)))`` with 3x3 "same" convolutions (the ReLU after the sum is the
    caller's)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output, before the final ReLU."""
        return x + self.conv2(torch.relu(self.conv1(x)))


def landing_cells(planes: torch.Tensor) -> torch.Tensor:
    """``(N, rows, columns)`` 1.0 on the cell each non-full column would receive next."""
    occupied = planes[:, 0] + planes[:, 1]
    below = torch.cat([occupied[:, 1:], torch.ones_like(occupied[:, :1])], dim=1)
    return (1 - occupied) * below


class ConnectXCNN(BaseFeaturesExtractor):
    """Stem conv, ``blocks`` residual blocks of ``channels``; outputs ``columns`` column scores
    followed by ``features_dim`` dense features (see the module docstring)."""

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        channels: int = 32,
        blocks: int = 1,
        features_dim: int = 128,
        bf16: bool = False,
    ) -> None:
        planes, rows, columns = observation_space.shape
        super().__init__(observation_space, columns + features_dim)
        self.columns = columns
        self.bf16 = bf16
        self.stem = nn.Conv2d(planes + 2, channels, 3, padding=1)
        self.blocks = nn.ModuleList(ResidualBlock(channels) for _ in range(blocks))
        self.column = nn.Conv2d(channels, 1, 1)
        self.head = nn.Linear(channels * rows * columns, features_dim)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        """Column scores and dense features of a batch of observations, in float32.

        With ``bf16``, passes that compute gradients (PPO updates, teacher passes) run in
        bfloat16: the weights stay float32, torch's autocast rounds the operands of each
        convolution and matrix product and accumulates in float32. Passes without gradients
        (rollouts, ``predict``, evaluation) stay float32 — no slower at their small batches —
        so the model answers exactly as its numpy export does.
        """
        if not (self.bf16 and torch.is_grad_enabled()):
            return self._features(observations)
        with torch.autocast(observations.device.type, dtype=torch.bfloat16):
            return self._features(observations).float()

    def _features(self, observations: torch.Tensor) -> torch.Tensor:
        x = observations.float()
        landing = landing_cells(x)
        x = torch.cat([x, torch.ones_like(x[:, :1]), landing[:, None]], dim=1)
        x = torch.relu(self.stem(x))
        for block in self.blocks:
            x = torch.relu(block(x))
        column_scores = (self.column(x)[:, 0] * landing).sum(dim=1)
        dense = torch.relu(self._head_channels_last(x))
        return torch.cat([column_scores, dense], dim=1)

    def _head_channels_last(self, x: torch.Tensor) -> torch.Tensor:
        """``self.head(x.flatten(1))``, computed without leaving the channels-last layout.

        The head's weight keeps torch's (channel, row, column) order (state dicts, checkpoints
        and the weights-only export are unchanged); reading ``x`` in (row, column, channel)
        order instead and permuting the weight to match spares a layout copy of the activations
        forward and, backward, a gradient in the other layout that makes the ReLU and residual
        gradients of the whole trunk run strided.
        """
        batch, channels, rows, columns = x.shape
        weight = self.head.weight.view(-1, channels, rows, columns).permute(0, 2, 3, 1)
        flat = x.permute(0, 2, 3, 1).reshape(batch, -1)
        return nn.functional.linear(flat, weight.reshape(weight.shape[0], -1), self.head.bias)


class ConnectXPolicy(MaskableActorCriticPolicy):
    """MaskablePPO's actor-critic with logits = column scores + a linear layer of all features.

    Use it with :class:`ConnectXCNN` and an empty policy network (``net_arch={"pi": [], ...}``), so
    that the actor's latent is the extractor's output, column scores first.
    """

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        # this policy's extractor is a ConnectXCNN (_check_policy refuses others on export)
        extractor = cast(ConnectXCNN, self.features_extractor)
        with torch.no_grad():
            extractor.column.weight.mul_(COLUMN_INIT_SCALE)
        # Convolution weights stored NHWC: oneDNN then runs the small 6x7 convolutions (and
        # their gradients) in channels-last layout, faster on CPU; values, state
        # dicts and the weights-only export are unchanged (loading copies into this layout).
        # torch's hints of Module.to leave out its memory_format keyword
        self.to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> MaskableDistribution:
        columns = int(cast(gym.spaces.Discrete, self.action_space).n)
        logits = self.action_net(latent_pi) + latent_pi[:, :columns]
        return self.action_dist.proba_distribution(action_logits=logits)


def _array(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(np.float32).copy()


def _layer(op: str, **fields: Any) -> dict[str, Any]:
    """A layer of the weights-only description: ``op`` must be an operation of the core's table
    (:data:`connectx_gym.forward.OPERATIONS`), which runs and shape-checks it."""
    if op not in OPERATIONS:
        raise ValueError(f"{op!r} is not an operation of connectx_gym.forward.OPERATIONS")
    return {"op": op, **fields}


def _conv(module: nn.Module, name: str, params: dict[str, np.ndarray]) -> dict[str, Any]:
    if not isinstance(module, nn.Conv2d) or module.bias is None:
        raise ValueError(f"cannot export {module!r}: only convolutions with a bias")
    if module.stride != (1, 1) or module.padding != (module.kernel_size[0] // 2,) * 2:
        raise ValueError(f"cannot export {module!r}: only stride 1, 'same' padding")
    params[f"{name}.weight"] = _array(module.weight)
    params[f"{name}.bias"] = _array(module.bias)
    return _layer("conv", weight=f"{name}.weight", bias=f"{name}.bias")


def _linear(
    module: nn.Module, name: str, params: dict[str, np.ndarray], op: str = "linear"
) -> dict[str, Any]:
    if not isinstance(module, nn.Linear) or module.bias is None:
        raise ValueError(f"cannot export {module!r}: only linear layers with a bias")
    params[f"{name}.weight"] = _array(module.weight)
    params[f"{name}.bias"] = _array(module.bias)
    return _layer(op, weight=f"{name}.weight", bias=f"{name}.bias")


#: The activations of the critic's layers the weights-only format has, by torch module type.
_ACTIVATIONS: dict[type[nn.Module], str] = {nn.ReLU: "relu", nn.Tanh: "tanh"}


def _trunk(extractor: ConnectXCNN, prefix: str, params: dict[str, np.ndarray]) -> list[dict]:
    """The layers of ``extractor``: planes to column scores and dense features (arrays named
    from ``prefix``)."""
    layers = [_layer("input_planes"), _conv(extractor.stem, f"{prefix}stem", params)]
    layers.append(_layer("relu"))
    # an nn.ModuleList's items are Modules to the type checker; these are the extractor's blocks
    for index, block in enumerate(cast("Iterable[ResidualBlock]", extractor.blocks)):
        body = [
            _conv(block.conv1, f"{prefix}block{index}.conv1", params),
            _layer("relu"),
            _conv(block.conv2, f"{prefix}block{index}.conv2", params),
        ]
        layers += [_layer("residual", body=body), _layer("relu")]
    column_branch = [_conv(extractor.column, f"{prefix}column", params), _layer("gather_landing")]
    dense_branch = [
        _layer("flatten"),
        _linear(extractor.head, f"{prefix}head", params),
        _layer("relu"),
    ]
    layers.append(_layer("branches", branches=[column_branch, dense_branch]))
    return layers


def _check_policy(policy: nn.Module) -> tuple[ConnectXPolicy, ConnectXCNN]:
    """``policy`` and its features extractor, checked to be what the export reads."""
    extractor = getattr(policy, "pi_features_extractor", None)
    if not isinstance(policy, ConnectXPolicy) or not isinstance(extractor, ConnectXCNN):
        raise ValueError("only ConnectXPolicy models export to the weights-only format")
    return policy, extractor


def numpy_layers(policy: nn.Module) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The weights-only description (layers, arrays) of a :class:`ConnectXPolicy`'s logits: its
    features extractor's trunk, then the action layer."""
    policy, extractor = _check_policy(policy)
    if any(isinstance(m, nn.Linear) for m in policy.mlp_extractor.policy_net.modules()):
        raise ValueError("the policy network must be empty (net_arch pi=[])")
    params: dict[str, np.ndarray] = {}
    layers = _trunk(extractor, "", params)
    layers.append(_linear(policy.action_net, "action", params, op="linear_plus_prefix"))
    return layers, params


def numpy_value_head(policy: nn.Module, params: dict[str, np.ndarray]) -> ValueHead:
    """The weights-only value head of a :class:`ConnectXPolicy` (its arrays added to
    ``params``), what ``policy.predict_values`` computes: the critic's layers and output on the
    trunk of :func:`numpy_layers` (all its layers but the action layer), or, when the critic
    has a features extractor of its own, on the planes through that extractor's trunk."""
    policy, extractor = _check_policy(policy)
    layers: list[dict[str, Any]] = []
    if policy.share_features_extractor:
        after = len(_trunk(extractor, "", {}))
    else:
        after = 0
        if not isinstance(policy.vf_features_extractor, ConnectXCNN):
            raise ValueError("the critic's features extractor must be a ConnectXCNN")
        layers = _trunk(policy.vf_features_extractor, "vf_features.", params)
    for index, module in enumerate(policy.mlp_extractor.value_net):
        if isinstance(module, nn.Linear):
            layers.append(_linear(module, f"value_mlp.{index}", params))
        elif type(module) in _ACTIVATIONS:
            layers.append(_layer(_ACTIVATIONS[type(module)]))
        else:
            raise ValueError(f"cannot export the critic's layer {module!r}: Linear, ReLU, Tanh")
    layers.append(_linear(policy.value_net, "value", params))
    return ValueHead(after, layers)


def numpy_weights(policy: nn.Module, geometry: Any) -> WeightsFile:
    """A :class:`ConnectXPolicy` in the weights-only format, for the board ``geometry``: its
    logits (:func:`numpy_layers`) and its value head (:func:`numpy_value_head`)."""
    layers, params = numpy_layers(policy)
    return WeightsFile(geometry, layers, params, numpy_value_head(policy, params))


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


def _torch_ones_plane(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.cat([x, torch.ones_like(x[:, :1])], dim=1)


def _torch_input_planes(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    occupied = x[:, 0] + x[:, 1]
    below = torch.cat([occupied[:, 1:], torch.ones_like(occupied[:, :1])], dim=1)
    net.saved["landing"] = (1 - occupied) * below
    return torch.cat([x, torch.ones_like(x[:, :1]), net.saved["landing"][:, None]], dim=1)


def _torch_gather_landing(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return (x[:, 0] * net.saved["landing"]).sum(dim=1)


def _torch_branches(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.cat([net.run(body, x).flatten(1) for body in layer["branches"]], dim=1)


def _torch_linear_plus_prefix(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    weight = net.param(layer["weight"])
    return functional.linear(x, weight, net.param(layer["bias"])) + x[:, : weight.shape[0]]


def _torch_conv(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    weight = net.param(layer["weight"])
    padding = (weight.shape[2] // 2, weight.shape[3] // 2)
    return functional.conv2d(x, weight, net.param(layer["bias"]), padding=padding)


def _torch_linear(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return functional.linear(x, net.param(layer["weight"]), net.param(layer["bias"]))


def _torch_relu(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.relu(x)


def _torch_tanh(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return torch.tanh(x)


def _torch_flatten(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return x.flatten(1)


def _torch_residual(layer: dict, x: torch.Tensor, net: TorchRun) -> torch.Tensor:
    return x + net.run(layer["body"], x)


#: The torch kernel of every operation, by the core's name for it.
TORCH_OPERATIONS: dict[str, Callable[[dict, torch.Tensor, TorchRun], torch.Tensor]] = {
    "ones_plane": _torch_ones_plane,
    "input_planes": _torch_input_planes,
    "gather_landing": _torch_gather_landing,
    "branches": _torch_branches,
    "linear_plus_prefix": _torch_linear_plus_prefix,
    "conv": _torch_conv,
    "linear": _torch_linear,
    "relu": _torch_relu,
    "tanh": _torch_tanh,
    "flatten": _torch_flatten,
    "residual": _torch_residual,
}
