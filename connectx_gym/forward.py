"""The numpy forward pass of the weights-only format (:mod:`connectx_gym.weights`): numpy and
stdlib only, since the Kaggle export embeds its source in ``main.py``.

A network is a list of ``layers`` run in order on ``(batch, 2, rows, columns)`` planes (the mover's
discs, then the opponent's) and ending with one logit per column. :data:`OPERATIONS` is the one
table of the operations a layer may name, each with its shape rule and its numpy kernel (the torch
export keeps a table of the same names, and a test checks that every table covers every
operation): ``ones_plane`` (append a plane of ones), ``input_planes`` (append a plane of ones and
the plane of *landing cells*, the cell each non-full column would receive next, and remember the
latter), ``conv`` (2-D cross-correlation, zero "same" padding, odd kernels), ``linear``, ``relu``,
``tanh``, ``flatten``, ``residual`` (``x + layers(x)`` for its ``body``), ``branches`` (run each
list of layers on ``x`` and concatenate the flattened results), ``gather_landing`` (a one-plane
map read at each column's landing cell: one value per column) and ``linear_plus_prefix`` (a linear
layer plus the first ``out`` inputs, which are per-column scores).

Speed: one board is a batch of one, so the fixed cost of each numpy call counts as much as the
arithmetic. Planes stay channels-last between layers; a 3x3 convolution over many channels runs
as Winograd's F(2x2, 3x3) (16 products per 2x2 block of outputs instead of 36: half the work of
the matrix products, which are most of a move's time), any other one as a single im2col product.
Results agree with a direct convolution to float32 rounding, not bit for bit. A batch runs in
pieces of at most :data:`FORWARD_CHUNK` boards: a larger piece's temporaries come fresh from the
system at every call, page by page, which costs more than the arithmetic.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FORWARD_CHUNK",
    "LAYER_COST",
    "MAX_LAYERS",
    "OPERATIONS",
    "WINOGRAD_MIN_CHANNELS",
    "NetworkCost",
    "Operation",
    "best_legal_column",
    "conv2d_same",
    "conv_kernel",
    "conv_kernels",
    "forward_layers",
    "im2col_kernel",
    "masked_logits",
    "network_cost",
    "output_shape",
]

#: One layer of a network description: its ``"op"`` and that operation's fields.
Layer = dict[str, Any]
#: A network's arrays (or the landing cells, or the convolutions' matrices), by name.
Arrays = dict[str, np.ndarray]

#: Input channels from which a 3x3 convolution runs as Winograd: below it the transforms cost
#: more than the products they save (4 channels: 0.029 ms against 0.016 for im2col on 6x7).
WINOGRAD_MIN_CHANNELS = 16

#: The most boards one pass runs at once: :func:`forward_layers` splits larger batches (see the
#: module docstring).
FORWARD_CHUNK = 8

# Winograd F(2x2, 3x3) (Lavin and Gray, 2015): the 2x2 block of outputs of a 3x3 kernel g over
# the 4x4 input tile d around it is Y = A^T [(G g G^T) * (B^T d B)] A, with * element-wise. Summed
# over input channels, the 16 element-wise products become 16 matrix products.
_B_T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
_G = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
_A_T = [[1, 1, 1, 0], [0, 1, -1, -1]]


def conv_kernel(weight: np.ndarray) -> np.ndarray:
    """What :func:`conv2d_same` multiplies by, for an ``(O, C, kh, kw)`` weight: for a 3x3 kernel
    over at least :data:`WINOGRAD_MIN_CHANNELS` channels the ``(16, C, O)`` Winograd kernel
    ``G g G^T`` (index ``4 * row + column`` of the 4x4 transform), otherwise the
    ``(kh * kw * C, O)`` im2col matrix (rows in ``(i, j, c)`` order). Making it costs more than
    a convolution, so a network makes it once (``WeightsFile.kernels``)."""
    out_channels, channels, kh, kw = weight.shape
    if (kh, kw) == (3, 3) and channels >= WINOGRAD_MIN_CHANNELS:
        g = np.array(_G)
        u = np.einsum("ik,ockl,jl->ijco", g, weight.astype(np.float64), g)
        return np.ascontiguousarray(u.reshape(16, channels, out_channels), dtype=weight.dtype)
    return im2col_kernel(weight)


def im2col_kernel(weight: np.ndarray) -> np.ndarray:
    """The ``(kh * kw * C, O)`` im2col matrix of an ``(O, C, kh, kw)`` weight, rows in
    ``(i, j, c)`` order: what :func:`conv2d_same` multiplies by for a direct convolution (it
    takes one for any kernel wider than 1x1, also where :func:`conv_kernel` picks Winograd)."""
    return np.ascontiguousarray(weight.transpose(2, 3, 1, 0).reshape(-1, weight.shape[0]))


def conv2d_same(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, kernel: np.ndarray | None = None
) -> np.ndarray:
    """2-D cross-correlation of ``x`` (N, C, H, W) with ``weight`` (O, C, kh, kw), zero padded so
    the output keeps H x W (odd kernels), as ``torch.nn.Conv2d(padding=k // 2)``: an (N, O, H, W)
    view of the channels-last result of :func:`_conv_channels_last`, which the forward pass runs
    directly on its channels-last planes."""
    return _conv_channels_last(x.transpose(0, 2, 3, 1), weight, bias, kernel).transpose(0, 3, 1, 2)


def _conv_channels_last(
    x: np.ndarray, weight: np.ndarray, bias: np.ndarray, kernel: np.ndarray | None = None
) -> np.ndarray:
    """:func:`conv2d_same` on channels-last planes: ``x`` (N, H, W, C) to a new (N, H, W, O), in
    the weights' dtype, by ``kernel``, the ``conv_kernel(weight)`` made here when not given.

    A 1x1 kernel multiplies the channels directly. Otherwise each cell's window is copied into a
    row (im2col: the windows of a zero-padded copy of ``x`` are a strided view, rows in
    ``(i, j, c)`` order, copied out in one go) and multiplied by the im2col matrix, or the
    Winograd kernel runs (:func:`_winograd_3x3`).
    """
    n, height, width, channels = x.shape
    out_channels, _, kh, kw = weight.shape
    if kh == kw == 1:
        rows = x.astype(weight.dtype, copy=False).reshape(n * height * width, channels)
        out = rows @ weight.reshape(out_channels, channels).T
        out += bias
        return out.reshape(n, height, width, out_channels)
    kernel = conv_kernel(weight) if kernel is None else kernel
    if kernel.ndim == 3:
        return _winograd_3x3(x, kernel) + bias
    ph, pw = kh // 2, kw // 2
    padded = np.zeros((n, height + 2 * ph, width + 2 * pw, channels), dtype=weight.dtype)
    padded[:, ph : ph + height, pw : pw + width] = x
    sn, sh, sw, sc = padded.strides
    windows = _strided_view(padded, (n, height, width, kh, kw, channels), (sn, sh, sw, sh, sw, sc))
    out = windows.reshape(n * height * width, kh * kw * channels) @ kernel
    out += bias
    return out.reshape(n, height, width, out_channels)


def _strided_view(base: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A read-only view of contiguous ``base`` with ``shape`` and ``strides`` (in bytes, within
    ``base``): ``np.lib.stride_tricks.as_strided`` without its 10 microseconds of Python."""
    view = np.ndarray(shape, base.dtype, buffer=base, strides=strides)
    view.flags.writeable = False
    return view


@functools.cache
def _winograd_transforms(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """``B^T d B`` and ``A^T m A`` of flattened 4x4 tiles as matrices: kron(B^T, B^T) (16 x 16)
    and kron(A^T, A^T) (4 x 16), read-only."""
    b_t, a_t = np.array(_B_T, dtype=dtype), np.array(_A_T, dtype=dtype)
    transforms = np.kron(b_t, b_t), np.kron(a_t, a_t)
    for matrix in transforms:
        matrix.setflags(write=False)
    return transforms


def _winograd_3x3(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """The 3x3 "same" convolution of channels-last ``x`` by a ``(16, C, O)`` Winograd kernel,
    without the bias: (N, H, W, O).

    The outputs are cut into 2x2 blocks (the last row or column of blocks may overhang the
    board); block ``(t, u)`` reads the 4x4 tile of the zero-padded input at rows ``2t .. 2t+3``
    and columns ``2u .. 2u+3`` (tiles overlap by two)::

        padded input       tile (0, 0)      its outputs
        . . . . . .        . . . .
        . a b c d .        . a b c          a' b'
        . e f g h .   ->   . e f g    ->    e' f'
        . i j k l .        . i j k
        . . . . . .
    """
    n, height, width, channels = x.shape
    blocks_down, blocks_across = (height + 1) // 2, (width + 1) // 2
    padded = np.zeros((n, 2 * blocks_down + 2, 2 * blocks_across + 2, channels), kernel.dtype)
    padded[:, 1 : height + 1, 1 : width + 1] = x
    sn, sh, sw, sc = padded.strides
    # tiles[i, j, n, t, u] = padded[n, 2t + i, 2u + j]: a strided view, copied once by reshape
    shape = (4, 4, n, blocks_down, blocks_across, channels)
    tiles = _strided_view(padded, shape, (sh, sw, sn, 2 * sh, 2 * sw, sc))
    tile_transform, output_transform = _winograd_transforms(kernel.dtype)
    # sizes spelled out rather than -1, which an empty batch (n = 0) leaves undetermined
    count, out_channels = n * blocks_down * blocks_across, kernel.shape[2]
    transformed = tile_transform @ tiles.reshape(16, count * channels)  # B^T d B of each tile
    products = transformed.reshape(16, count, channels) @ kernel  # 16 x (tiles, C) @ (C, O)
    blocks = output_transform @ products.reshape(16, count * out_channels)  # A^T m A
    blocks = blocks.reshape(2, 2, n, blocks_down, blocks_across, out_channels)
    blocks = blocks.transpose(2, 3, 0, 4, 1, 5)
    blocks = blocks.reshape(n, 2 * blocks_down, 2 * blocks_across, out_channels)
    return blocks[:, :height, :width]


def conv_kernels(layers: list[Layer], params: Arrays) -> dict[str, np.ndarray]:
    """:func:`conv_kernel` of every convolution in ``layers`` wider than 1x1 (nested ones too),
    by weight name: what :func:`forward_layers` takes as ``kernels``."""
    kernels = {}
    for layer in layers:
        if layer["op"] == "conv" and params[layer["weight"]].shape[2:] != (1, 1):
            kernels[layer["weight"]] = conv_kernel(params[layer["weight"]])
        for body in OPERATIONS[layer["op"]].bodies(layer):
            kernels.update(conv_kernels(body, params))
    return kernels


def forward_layers(
    layers: list[Layer],
    params: Arrays,
    x: np.ndarray,
    saved: Arrays | None = None,
    kernels: Arrays | None = None,
) -> np.ndarray:
    """Run the network description ``layers`` with ``params`` on the batch ``x``, (N, C, H, W)
    planes or (N, F) features; planes come out as (N, C, H, W) too (``saved`` carries the landing
    cells from ``input_planes`` to ``gather_landing``; ``kernels``, from :func:`conv_kernels`,
    spares the convolutions re-making their matrices). Planes are kept channels-last inside; a
    batch of more than :data:`FORWARD_CHUNK` boards runs in pieces of that many."""
    if len(x) > FORWARD_CHUNK:
        starts = range(0, len(x), FORWARD_CHUNK)
        pieces: list[Arrays] = [{} for _ in starts]
        outs = [
            forward_layers(layers, params, x[start : start + FORWARD_CHUNK], piece, kernels)
            for start, piece in zip(starts, pieces, strict=True)
        ]
        if saved is not None:
            saved.update({key: np.concatenate([p[key] for p in pieces]) for key in pieces[0]})
        return np.concatenate(outs)
    inside = x.transpose(0, 2, 3, 1) if x.ndim == 4 else x
    network = _Run(params, {} if saved is None else saved, {} if kernels is None else kernels)
    out = network.run(layers, inside)
    return out.transpose(0, 3, 1, 2) if out.ndim == 4 else out


def _flatten(x: np.ndarray) -> np.ndarray:
    """(N, F) features, channels-last planes flattened in (C, H, W) order as torch does."""
    planes = x.transpose(0, 3, 1, 2) if x.ndim == 4 else x
    return planes.reshape(len(x), math.prod(x.shape[1:]))


class _Run(NamedTuple):
    """What the numpy kernels share while a network runs: its arrays, the landing cells of
    ``input_planes`` and the convolutions' matrices."""

    params: Arrays
    saved: Arrays
    kernels: Arrays

    def run(self, layers: list[Layer], x: np.ndarray) -> np.ndarray:
        """``layers`` on (N, H, W, C) planes (or (N, F) features), each by its numpy kernel."""
        for layer in layers:
            operation = OPERATIONS.get(layer["op"])
            if operation is None:
                raise ValueError(f"unknown layer op {layer['op']!r}")
            x = operation.run(layer, x, self)
        return x


# -- the numpy kernels: (layer, channels-last x, the run) -> x -----------------------------------
def _run_ones_plane(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return np.concatenate([x, np.ones_like(x[..., :1])], axis=-1)


def _run_input_planes(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    occupied = x[..., 0] + x[..., 1]
    below = np.concatenate([occupied[:, 1:], np.ones_like(occupied[:, :1])], axis=1)
    net.saved["landing"] = (1 - occupied) * below
    return np.concatenate([x, np.ones_like(x[..., :1]), net.saved["landing"][..., None]], axis=-1)


def _run_gather_landing(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return (x[..., 0] * net.saved["landing"]).sum(axis=1)


def _run_branches(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return np.concatenate([_flatten(net.run(body, x)) for body in layer["branches"]], axis=1)


def _run_linear_plus_prefix(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    weight = net.params[layer["weight"]]
    return x @ weight.T + net.params[layer["bias"]] + x[:, : weight.shape[0]]


def _run_conv(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    name = layer["weight"]
    return _conv_channels_last(
        x, net.params[name], net.params[layer["bias"]], net.kernels.get(name)
    )


def _run_linear(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return x @ net.params[layer["weight"]].T + net.params[layer["bias"]]


def _run_relu(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return np.maximum(x, 0)


def _run_tanh(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return np.tanh(x)


def _run_flatten(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return _flatten(x)


def _run_residual(layer: Layer, x: np.ndarray, net: _Run) -> np.ndarray:
    return x + net.run(layer["body"], x)


# -- the shape rules: (layer, shape without the batch, the walk) -> shape ------------------------
#: The most layers a description may hold (per list of layers).
MAX_LAYERS = 10_000


#: A layer's fixed cost (its numpy calls) in :attr:`NetworkCost.work`, as multiply-adds.
LAYER_COST = 1 << 20


class NetworkCost(NamedTuple):
    """A description's cost per board, from the shapes alone: its output ``shape``; the most
    values one array of a layer holds (its output or a convolution's windows); the ``work``:
    multiply-adds, one per output value and :data:`LAYER_COST` per layer, each time it runs."""

    shape: tuple[int, ...]
    largest_activation: int
    work: int


class _Shapes:
    """What the shape rules share while they walk a description: the arrays' shapes, whether
    ``input_planes`` has run (``gather_landing`` reads its landing cells) and the cost so far
    (:class:`NetworkCost`)."""

    def __init__(self, shapes: dict[str, Any], landing: bool) -> None:
        self.shapes, self.landing = shapes, landing
        self.largest_activation = 0
        self.work = 0

    def count(self, values: int, multiply_adds: int = 0) -> None:
        """Count an array of ``values`` a layer makes and the ``multiply_adds`` that make it."""
        self.largest_activation = max(self.largest_activation, values)
        self.work += multiply_adds

    def walk(self, layers: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
        if not isinstance(layers, list) or len(layers) > MAX_LAYERS:
            raise ValueError(f"'layers' must be a list of at most {MAX_LAYERS} layers")
        for layer in layers:
            if not isinstance(layer, dict) or not isinstance(layer.get("op"), str):
                raise ValueError(f"bad layer {str(layer)[:80]!r}")
            operation = OPERATIONS.get(layer["op"])
            if operation is None:
                raise ValueError(f"unknown layer op {layer['op']!r}")
            if operation.planes and len(shape) != 3:
                raise ValueError(f"layer {layer['op']!r} needs planes, got shape {shape}")
            shape = operation.shape(layer, shape, self)
            self.count(math.prod(shape), math.prod(shape) + LAYER_COST)
        return shape

    def array(self, layer: Layer, key: str, ndim: int) -> tuple[int, ...]:
        """The shape of the array that ``layer[key]`` names, which must have ``ndim`` axes."""
        name = layer.get(key)
        if not isinstance(name, str) or name not in self.shapes:
            raise ValueError(f"layer {layer.get('op')!r} refers to a missing array {name!r}")
        shape = tuple(self.shapes[name].shape)
        if len(shape) != ndim:
            raise ValueError(f"array {name!r} has shape {shape}, expected {ndim} dimensions")
        return shape


def output_shape(
    layers: Any, shapes: dict[str, Any], shape: tuple[int, ...], landing: bool = False
) -> tuple[int, ...]:
    """The shape (without the batch) that ``layers`` turn an input of ``shape`` into, given the
    parameter ``shapes`` (anything with ``.shape``); ``ValueError`` when they do not fit."""
    return network_cost(layers, shapes, shape, landing).shape


def network_cost(
    layers: Any, shapes: dict[str, Any], shape: tuple[int, ...], landing: bool = False
) -> NetworkCost:
    """:func:`output_shape` with the :class:`NetworkCost` of ``layers``; nothing allocated."""
    walk = _Shapes(shapes, landing)
    walk.count(math.prod(shape))
    out = walk.walk(layers, tuple(shape))
    return NetworkCost(out, walk.largest_activation, walk.work)


def _same_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    return shape


def _ones_plane_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    return (shape[0] + 1, *shape[1:])


def _input_planes_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    if shape[0] < 2:
        raise ValueError("layer 'input_planes' needs two planes of discs")
    walk.landing = True
    return (shape[0] + 2, *shape[1:])


def _gather_landing_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    if not walk.landing:
        raise ValueError("layer 'gather_landing' before any 'input_planes'")
    return (shape[2],)


def _branches_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    bodies = layer.get("branches")
    if not isinstance(bodies, list) or not bodies:
        raise ValueError("layer 'branches' needs a non-empty list of branches")
    return (sum(math.prod(walk.walk(body, shape)) for body in bodies),)


def _linear_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    op = layer["op"]
    out, inputs = walk.array(layer, "weight", 2)
    if len(shape) != 1 or shape[0] != inputs:
        raise ValueError(f"layer {op!r} takes {inputs} inputs, got shape {shape}")
    if walk.array(layer, "bias", 1) != (out,):
        raise ValueError(f"layer {op!r}: bias does not have {out} values")
    if op == "linear_plus_prefix" and out > inputs:
        raise ValueError("layer 'linear_plus_prefix' has more outputs than inputs")
    walk.count(out, out * inputs)
    return (out,)


def _conv_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    out, channels, kh, kw = walk.array(layer, "weight", 4)
    if channels != shape[0] or kh % 2 == 0 or kw % 2 == 0:
        raise ValueError(f"conv weight {(out, channels, kh, kw)} does not fit input {shape}")
    if walk.array(layer, "bias", 1) != (out,):
        raise ValueError(f"layer 'conv': bias does not have {out} values")
    cells = math.prod(shape[1:])
    windows = 0 if (kh, kw) == (1, 1) else kh * kw * channels * cells
    walk.count(windows, out * channels * kh * kw * cells)
    return (out, *shape[1:])


def _flatten_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    return (math.prod(shape),)


def _residual_shape(layer: Layer, shape: tuple[int, ...], walk: _Shapes) -> tuple[int, ...]:
    if walk.walk(layer.get("body"), shape) != shape:
        raise ValueError("layer 'residual': its body changes the shape")
    return shape


# -- the table ------------------------------------------------------------------------------------
def _no_bodies(layer: Layer) -> list[list[Layer]]:
    return []


class Operation(NamedTuple):
    """An operation a layer may name: its shape rule, its numpy kernel, whether it needs planes
    (not flat features) and the lists of layers nested in it."""

    shape: Callable[[Layer, tuple[int, ...], _Shapes], tuple[int, ...]]
    run: Callable[[Layer, np.ndarray, _Run], np.ndarray]
    planes: bool = False
    bodies: Callable[[Layer], list[list[Layer]]] = _no_bodies


#: Every operation of the weights-only format, by the name a layer's ``"op"`` gives.
OPERATIONS: dict[str, Operation] = {
    "ones_plane": Operation(_ones_plane_shape, _run_ones_plane, planes=True),
    "input_planes": Operation(_input_planes_shape, _run_input_planes, planes=True),
    "gather_landing": Operation(_gather_landing_shape, _run_gather_landing, planes=True),
    "branches": Operation(_branches_shape, _run_branches, bodies=lambda layer: layer["branches"]),
    "linear_plus_prefix": Operation(_linear_shape, _run_linear_plus_prefix),
    "conv": Operation(_conv_shape, _run_conv, planes=True),
    "linear": Operation(_linear_shape, _run_linear),
    "relu": Operation(_same_shape, _run_relu),
    "tanh": Operation(_same_shape, _run_tanh),
    "flatten": Operation(_flatten_shape, _run_flatten),
    "residual": Operation(_residual_shape, _run_residual, bodies=lambda layer: [layer["body"]]),
}


def masked_logits(
    layers: list[Layer],
    params: Arrays,
    planes: np.ndarray,
    legal: np.ndarray,
    kernels: Arrays | None = None,
) -> np.ndarray:
    """Logits of one position's ``(2, rows, columns)`` planes, ``-inf`` on illegal columns."""
    x = np.asarray(planes, dtype=np.float32)[None]
    logits = forward_layers(layers, params, x, kernels=kernels)[0].astype(np.float64)
    return np.where(legal, logits, -np.inf)


def best_legal_column(logits: np.ndarray, legal: np.ndarray) -> int:
    """The legal column with the highest logit (the first on ties; NaN counts as lowest): never
    an illegal column while one is legal."""
    legal = np.asarray(legal, dtype=bool)
    values = np.where(legal & ~np.isnan(logits), logits, -np.inf)
    best = int(np.argmax(values))
    if legal[best]:
        return best
    return int(np.flatnonzero(legal)[0]) if legal.any() else 0
