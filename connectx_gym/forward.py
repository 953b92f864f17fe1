"""The numpy forward pass of the weights-only format (:mod:`connectx_gym.weights`): numpy and
stdlib only, since the Kaggle export embeds its source in ``main.py``.

A network is a list of ``layers`` run in order on ``(batch, 2, rows, columns)`` planes (the mover's
discs, then the opponent's) and ending with one logit per column. The ops are ``ones_plane``
(append a plane of ones), ``input_planes`` (append a plane of ones and the plane of *landing
cells*, the cell each non-full column would receive next, and remember the latter), ``conv`` (2-D
cross-correlation, zero "same" padding, odd kernels), ``linear``, ``relu``, ``tanh``, ``flatten``,
``residual`` (``x + layers(x)`` for its ``body``), ``branches`` (run each list of layers on ``x``
and concatenate the flattened results), ``gather_landing`` (a one-plane map read at each column's
landing cell: one value per column) and ``linear_plus_prefix`` (a linear layer plus the first
``out`` inputs, which are per-column scores).

Speed: one board is a batch of one, so the fixed cost of each numpy call counts as much as the
arithmetic. Planes stay channels-last between layers; a 3x3 convolution over many channels runs
as Winograd's F(2x2, 3x3) (16 products per 2x2 block of outputs instead of 36: half the work of
the matrix products, which are most of a move's time), any other one as a single im2col product.
Results agree with a direct convolution to float32 rounding (``ppo``'s logits within 3e-5, none
of its moves changed on the positions compared), not bit for bit.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "WINOGRAD_MIN_CHANNELS",
    "best_legal_column",
    "conv2d_same",
    "conv_kernel",
    "conv_kernels",
    "forward_layers",
    "im2col_kernel",
    "masked_logits",
]

#: Input channels from which a 3x3 convolution runs as Winograd: below it the transforms cost
#: more than the products they save (4 channels: 0.029 ms against 0.016 for im2col on 6x7).
WINOGRAD_MIN_CHANNELS = 16

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


def _strided_view(base: np.ndarray, shape: tuple, strides: tuple) -> np.ndarray:
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


def conv_kernels(layers: list, params: dict) -> dict[str, np.ndarray]:
    """:func:`conv_kernel` of every convolution in ``layers`` wider than 1x1 (nested ones too),
    by weight name: what :func:`forward_layers` takes as ``kernels``."""
    kernels = {}
    for layer in layers:
        op = layer["op"]
        if op == "conv" and params[layer["weight"]].shape[2:] != (1, 1):
            kernels[layer["weight"]] = conv_kernel(params[layer["weight"]])
        for body in layer.get("branches", []) + ([layer["body"]] if op == "residual" else []):
            kernels.update(conv_kernels(body, params))
    return kernels


def forward_layers(
    layers: list,
    params: dict,
    x: np.ndarray,
    saved: dict | None = None,
    kernels: dict | None = None,
) -> np.ndarray:
    """Run the network description ``layers`` with ``params`` on the batch ``x``, (N, C, H, W)
    planes or (N, F) features; planes come out as (N, C, H, W) too (``saved`` carries the landing
    cells from ``input_planes`` to ``gather_landing``; ``kernels``, from :func:`conv_kernels`,
    spares the convolutions re-making their matrices). Planes are kept channels-last inside."""
    inside = x.transpose(0, 2, 3, 1) if x.ndim == 4 else x
    out = _forward_channels_last(layers, params, inside, {} if saved is None else saved, kernels)
    return out.transpose(0, 3, 1, 2) if out.ndim == 4 else out


def _flatten(x: np.ndarray) -> np.ndarray:
    """(N, F) features, channels-last planes flattened in (C, H, W) order as torch does."""
    planes = x.transpose(0, 3, 1, 2) if x.ndim == 4 else x
    return planes.reshape(len(x), math.prod(x.shape[1:]))


def _forward_channels_last(
    layers: list, params: dict, x: np.ndarray, saved: dict, kernels: dict | None
) -> np.ndarray:
    """:func:`forward_layers` on (N, H, W, C) planes (or (N, F) features)."""
    kernels = {} if kernels is None else kernels
    for layer in layers:
        op = layer["op"]
        if op == "ones_plane":
            x = np.concatenate([x, np.ones_like(x[..., :1])], axis=-1)
        elif op == "input_planes":
            occupied = x[..., 0] + x[..., 1]
            below = np.concatenate([occupied[:, 1:], np.ones_like(occupied[:, :1])], axis=1)
            saved["landing"] = (1 - occupied) * below
            x = np.concatenate([x, np.ones_like(x[..., :1]), saved["landing"][..., None]], axis=-1)
        elif op == "gather_landing":
            x = (x[..., 0] * saved["landing"]).sum(axis=1)
        elif op == "branches":
            outputs = [
                _forward_channels_last(body, params, x, saved, kernels)
                for body in layer["branches"]
            ]
            x = np.concatenate([_flatten(out) for out in outputs], axis=1)
        elif op == "linear_plus_prefix":
            weight = params[layer["weight"]]
            x = x @ weight.T + params[layer["bias"]] + x[:, : weight.shape[0]]
        elif op == "conv":
            name = layer["weight"]
            x = _conv_channels_last(x, params[name], params[layer["bias"]], kernels.get(name))
        elif op == "linear":
            x = x @ params[layer["weight"]].T + params[layer["bias"]]
        elif op == "relu":
            x = np.maximum(x, 0)
        elif op == "tanh":
            x = np.tanh(x)
        elif op == "flatten":
            x = _flatten(x)
        elif op == "residual":
            x = x + _forward_channels_last(layer["body"], params, x, saved, kernels)
        else:
            raise ValueError(f"unknown layer op {op!r}")
    return x


def masked_logits(
    layers: list,
    params: dict,
    planes: np.ndarray,
    legal: np.ndarray,
    kernels: dict | None = None,
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
