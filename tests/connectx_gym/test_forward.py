"""The numpy forward pass (connectx_gym.forward): Winograd 3x3 convolutions against the direct
one, the kernel each convolution gets, and the shipped network's moves under both."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectx_gym import forward
from connectx_gym.files import load_file, shipped_weights
from connectx_gym.forward import (
    WINOGRAD_MIN_CHANNELS,
    conv2d_same,
    conv_kernel,
    forward_layers,
    im2col_kernel,
)
from tests.connectx_gym.test_files import conv_reference


@pytest.mark.parametrize(
    "shape", [(1, 16, 6, 7), (2, 16, 1, 1), (2, 17, 1, 5), (3, 16, 4, 4), (1, 24, 5, 8)]
)
def test_winograd_matches_reference(shape: tuple[int, int, int, int]) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=shape)
    weight = rng.normal(size=(5, shape[1], 3, 3))
    bias = rng.normal(size=5)
    assert conv_kernel(weight).shape == (16, shape[1], 5)  # the Winograd kernel
    expected = conv_reference(x, weight, bias)
    np.testing.assert_allclose(conv2d_same(x, weight, bias), expected, rtol=1e-9, atol=1e-9)
    single = conv2d_same(x.astype(np.float32), weight.astype(np.float32), bias.astype(np.float32))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, expected, rtol=1e-4, atol=1e-4)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 3),
    channels=st.integers(WINOGRAD_MIN_CHANNELS, WINOGRAD_MIN_CHANNELS + 4),
    height=st.integers(1, 9),
    width=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_winograd_equals_im2col(n: int, channels: int, height: int, width: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, channels, height, width))
    weight, bias = rng.normal(size=(3, channels, 3, 3)), rng.normal(size=3)
    direct = conv2d_same(x, weight, bias, im2col_kernel(weight))
    np.testing.assert_allclose(conv2d_same(x, weight, bias), direct, rtol=1e-9, atol=1e-9)


def test_kernel_kind_follows_size_and_channels() -> None:
    rng = np.random.default_rng(0)
    few = rng.normal(size=(8, WINOGRAD_MIN_CHANNELS - 1, 3, 3))
    many = rng.normal(size=(8, WINOGRAD_MIN_CHANNELS, 3, 3))
    wide = rng.normal(size=(8, WINOGRAD_MIN_CHANNELS, 5, 5))
    assert conv_kernel(few).shape == (9 * (WINOGRAD_MIN_CHANNELS - 1), 8)
    assert conv_kernel(many).shape == (16, WINOGRAD_MIN_CHANNELS, 8)
    assert conv_kernel(wide).shape == (25 * WINOGRAD_MIN_CHANNELS, 8)
    assert conv_kernel(many.astype(np.float32)).dtype == np.float32


def test_transforms_are_read_only() -> None:
    for matrix in forward._winograd_transforms(np.dtype(np.float32)):
        with pytest.raises(ValueError, match="read-only"):
            matrix[0, 0] = 2.0


@pytest.mark.slow
def test_shipped_network_plays_the_same_moves_either_way() -> None:
    weights = load_file(shipped_weights("ppo"))
    direct = {name: im2col_kernel(weights.params[name]) for name in weights.kernels}
    assert any(kernel.ndim == 3 for kernel in weights.kernels.values())  # it runs Winograd
    rng = np.random.default_rng(5)
    planes = np.zeros((400, 2, 6, 7), dtype=np.float32)
    for index in range(len(planes)):  # random stacks of discs of either owner
        heights = rng.integers(0, 7, size=7)
        for column, height in enumerate(heights):
            planes[index, rng.integers(0, 2, size=height), 5 - np.arange(height), column] = 1
    fast = forward_layers(weights.layers, weights.params, planes, kernels=weights.kernels)
    slow = forward_layers(weights.layers, weights.params, planes, kernels=direct)
    np.testing.assert_allclose(fast, slow, rtol=1e-4, atol=1e-4)
    clear = np.sort(slow, axis=1)[:, -1] - np.sort(slow, axis=1)[:, -2] > 1e-3
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(fast.argmax(axis=1)[clear], slow.argmax(axis=1)[clear])


def test_the_forward_pass_holds_linear_weights_so_that_their_transpose_is_contiguous() -> None:
    weights = load_file(shipped_weights("ppo"))
    linear = [name for name, array in weights.params.items() if array.ndim == 2]
    assert linear  # the shipped network has linear layers
    for name in linear:
        assert weights.params[name].flags["C_CONTIGUOUS"]  # as read, and as saved
        assert weights._run_params[name].T.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(weights._run_params[name], weights.params[name])
    planes = (np.random.default_rng(3).random((20, 2, 6, 7)) < 0.3).astype(np.float32)
    row_major = forward_layers(weights.layers, weights.params, planes, kernels=weights.kernels)
    np.testing.assert_allclose(weights.logits(planes), row_major, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [3, WINOGRAD_MIN_CHANNELS])
def test_empty_batch(channels: int) -> None:
    weight, bias = np.ones((2, channels, 3, 3)), np.zeros(2)
    assert conv2d_same(np.zeros((0, channels, 4, 5)), weight, bias).shape == (0, 2, 4, 5)
    weights = load_file(shipped_weights("ppo"))
    empty = np.zeros((0, 2, 6, 7), dtype=np.float32)
    logits = forward_layers(weights.layers, weights.params, empty, kernels=weights.kernels)
    assert logits.shape == (0, 7)


# -- the table of operations ----------------------------------------------------------------------
def every_operation_network(
    rows: int, columns: int, rng: np.random.Generator
) -> tuple[list[dict], dict[str, np.ndarray]]:
    """A small network that uses every operation of :data:`forward.OPERATIONS` (a new operation
    fails :func:`test_every_operation_has_a_shape_rule_and_a_kernel` until it is added here)."""
    cells = rows * columns
    shapes = {
        "stem.w": (3, 5, 3, 3), "stem.b": (3,), "body.w": (3, 3, 1, 1), "body.b": (3,),
        "column.w": (1, 3, 3, 3), "column.b": (1,), "head.w": (6, 3 * cells), "head.b": (6,),
        "out.w": (columns, columns + 6), "out.b": (columns,),
    }  # fmt: skip
    params = {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}
    column = [{"op": "conv", "weight": "column.w", "bias": "column.b"}, {"op": "gather_landing"}]
    dense = [{"op": "flatten"}, {"op": "linear", "weight": "head.w", "bias": "head.b"}]
    layers = [
        {"op": "input_planes"},
        {"op": "ones_plane"},
        {"op": "conv", "weight": "stem.w", "bias": "stem.b"},
        {"op": "tanh"},
        {"op": "residual", "body": [{"op": "conv", "weight": "body.w", "bias": "body.b"}]},
        {"op": "relu"},
        {"op": "branches", "branches": [column, [*dense, {"op": "relu"}]]},
        {"op": "linear_plus_prefix", "weight": "out.w", "bias": "out.b"},
    ]
    return layers, params


def operations_used(layers: list[dict]) -> set[str]:
    used = set()
    for layer in layers:
        used.add(layer["op"])
        for body in forward.OPERATIONS[layer["op"]].bodies(layer):
            used |= operations_used(body)
    return used


def test_every_operation_has_a_shape_rule_and_a_kernel() -> None:
    rows, columns = 4, 5
    layers, params = every_operation_network(rows, columns, np.random.default_rng(0))
    assert operations_used(layers) == set(forward.OPERATIONS)
    for name, operation in forward.OPERATIONS.items():
        assert callable(operation.shape), name
        assert callable(operation.run), name
    planes = np.random.default_rng(1).integers(0, 2, size=(3, 2, rows, columns)).astype(np.float32)
    planes[:, 1] *= 1 - planes[:, 0]  # no cell holds two discs
    out = forward_layers(layers, params, planes, kernels=forward.conv_kernels(layers, params))
    assert out.shape[1:] == forward.output_shape(layers, params, (2, rows, columns)) == (columns,)


def test_the_shape_rules_refuse_what_does_not_fit() -> None:
    layers, params = every_operation_network(4, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown layer op 'softmax'"):
        forward.output_shape([*layers, {"op": "softmax"}], params, (2, 4, 5))
    with pytest.raises(ValueError, match="needs planes"):
        forward.output_shape([{"op": "flatten"}, {"op": "conv"}], params, (2, 4, 5))
    with pytest.raises(ValueError, match="does not fit input"):
        forward.output_shape(layers, params, (3, 4, 5))
    with pytest.raises(ValueError, match="before any 'input_planes'"):
        forward.output_shape(layers[1:], params, (4, 4, 5))


@pytest.mark.parametrize("boards", [forward.FORWARD_CHUNK + 1, 2 * forward.FORWARD_CHUNK + 3])
def test_a_batch_in_pieces_gives_each_board_its_own_result(boards: int) -> None:
    rows, columns = 4, 5
    layers, params = every_operation_network(rows, columns, np.random.default_rng(2))
    kernels = forward.conv_kernels(layers, params)
    planes = np.random.default_rng(3).integers(0, 2, size=(boards, 2, rows, columns))
    planes = planes.astype(np.float32)
    planes[:, 1] *= 1 - planes[:, 0]
    saved: dict = {}
    together = forward_layers(layers, params, planes, saved=saved, kernels=kernels)
    alone = [
        forward_layers(layers, params, planes[k : k + 1], kernels=kernels) for k in range(boards)
    ]
    assert together.shape == (boards, columns)
    np.testing.assert_allclose(together, np.concatenate(alone), rtol=1e-5, atol=1e-5)
    # what the caller's ``saved`` holds covers every board, as from one piece
    one_piece: dict = {}
    forward._Run(params, one_piece, kernels).run(layers, planes.transpose(0, 2, 3, 1))
    assert saved.keys() == one_piece.keys() == {"landing"}
    np.testing.assert_array_equal(saved["landing"], one_piece["landing"])
    features = np.random.default_rng(4).normal(size=(boards, 6)).astype(np.float32)
    linear = [{"op": "linear", "weight": "w", "bias": "b"}]
    weight_bias = {"w": np.ones((2, 6), np.float32), "b": np.zeros(2, np.float32)}
    flat = forward_layers(linear, weight_bias, features)
    np.testing.assert_allclose(flat, features @ weight_bias["w"].T, rtol=1e-6)
