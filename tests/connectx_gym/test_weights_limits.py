"""Weights-only files from strangers: the cost of running them is bounded before anything is
allocated, every malformed archive is one ``ValueError``, and a network whose logits overflow is
refused when it is made (and played consistently where it overflows elsewhere)."""

from __future__ import annotations

import io
import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectx_gym import Board, Geometry
from connectx_gym.files import NumpyNetPolicy, load_weights
from connectx_gym.forward import LAYER_COST
from connectx_gym.weights import (
    MAX_ACTIVATION_BYTES,
    MAX_WORK,
    WeightsFile,
    best_legal_column,
    check_cost,
    masked_logits,
    read_weights,
    weights_bytes,
)
from tests.connectx_gym.test_files_untrusted import meta_for, refused, write_archive

SHIPPED = Path(__file__).resolve().parents[2] / "connectx_gym" / "data" / "ppo.npz"


def _conv(out: int, channels: int, size: int = 1) -> dict[str, np.ndarray]:
    return {
        "w": np.zeros((out, channels, size, size), np.float32),
        "b": np.zeros(out, np.float32),
    }


def test_an_activation_bomb_is_refused_before_any_allocation(tmp_path: Path) -> None:
    # a 1x1 convolution to 262,144 channels on a 64x64 board: 4 GiB of output per board
    layers = [
        {"op": "input_planes"},
        {"op": "conv", "weight": "w", "bias": "b"},
        {"op": "gather_landing"},
    ]
    path = write_archive(tmp_path / "bomb.npz", meta_for(64, 64, layers), _conv(1 << 18, 4))
    assert path.stat().st_size < 50_000
    tracemalloc.start()
    try:
        refused(path, "MAX_ACTIVATION_BYTES")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # not even the 4 MB of the weight was read


def test_a_work_bomb_of_one_array_over_many_layers_is_refused(tmp_path: Path) -> None:
    conv = {"op": "conv", "weight": "w", "bias": "b"}
    layers = [{"op": "ones_plane"}, {"op": "conv", "weight": "w0", "bias": "b"}, *[conv] * 2000]
    arrays = {**_conv(64, 64, 3), "w0": np.zeros((64, 3, 1, 1), np.float32)}
    layers += [{"op": "flatten"}, {"op": "linear", "weight": "head", "bias": "hb"}]
    arrays |= {"head": np.zeros((7, 64 * 42), np.float32), "hb": np.zeros(7, np.float32)}
    path = write_archive(tmp_path / "deep.npz", meta_for(6, 7, layers), arrays)
    assert path.stat().st_size < 50_000
    refused(path, r"MAX_WORK \(4,294,967,296\)")


def test_work_counts_arithmetic_outputs_and_layers() -> None:
    shapes = {"w": np.zeros((5, 3, 3, 3)), "b": np.zeros(5)}
    cost = check_cost(
        [{"op": "ones_plane"}, {"op": "conv", "weight": "w", "bias": "b"}], shapes, (2, 4, 6)
    )
    cells = 4 * 6
    assert cost.shape == (5, 4, 6)
    assert cost.largest_activation == 3 * 9 * cells  # the convolution's matrix of windows
    assert cost.work == 3 * cells + 5 * 3 * 9 * cells + 5 * cells + 2 * LAYER_COST


def test_the_shipped_network_is_well_within_the_bounds() -> None:
    weights = read_weights(SHIPPED)
    cost = check_cost(weights.layers, weights.params, (2, 6, 7))
    assert cost.work * 50 < MAX_WORK
    assert cost.largest_activation * 4 * 100 < MAX_ACTIVATION_BYTES


def _small_archive() -> bytes:
    rng = np.random.default_rng(0)
    weights = WeightsFile(
        Geometry(4, 5, 3),
        [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}],
        {"w": rng.normal(size=(5, 40)), "b": np.zeros(5)},
    )
    return weights_bytes(weights)


def _patched_entries(data: bytes, method: int | None = None, flags: int = 0) -> bytes:
    """``data`` (a zip) with every entry's compression method set to ``method`` and ``flags``
    or-ed into its flag bits, in the local headers and the central directory alike."""
    patched = bytearray(data)
    for signature, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = patched.find(signature)
        while start >= 0:
            (old_flags,) = struct.unpack_from("<H", patched, start + flag_at)
            struct.pack_into("<H", patched, start + flag_at, old_flags | flags)
            if method is not None:
                struct.pack_into("<H", patched, start + flag_at + 2, method)
            start = patched.find(signature, start + 4)
    return bytes(patched)


@pytest.mark.parametrize(
    ("method", "flags", "reason"),
    [(99, 0, "NotImplementedError"), (None, 0x1, "RuntimeError")],
    ids=["unknown compression method", "encryption flag"],
)
def test_zip_entries_zipfile_cannot_read_are_value_errors(
    method: int | None, flags: int, reason: str
) -> None:
    data = _patched_entries(_small_archive(), method, flags)
    with pytest.raises(
        ValueError, match=f"crafted.npz is not a connectx-gym weights file.*{reason}"
    ):
        read_weights(io.BytesIO(data), "crafted.npz")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_corrupted_archive_is_a_value_error(data: st.DataObject) -> None:
    archive = bytearray(_small_archive())
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(archive) - 1))
        archive[position] = data.draw(st.integers(0, 255))
    message = ""
    try:
        read_weights(io.BytesIO(bytes(archive)), "corrupted.npz")
    except ValueError as error:  # anything else fails the test
        message = str(error)
    assert not message or message.startswith("corrupted.npz is not a connectx-gym weights file")


def _overflowing(threshold_stones: int) -> WeightsFile:
    """A 6x7 network whose logits are finite below ``threshold_stones`` stones and overflow to
    inf from there on (float32 ends at 3.4e38)."""
    scale = np.float32(3.4e38 / (threshold_stones - 0.5))
    return WeightsFile(
        Geometry(),
        [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}],
        {"w": np.full((7, 84), scale, np.float32), "b": np.zeros(7, np.float32)},
    )


def _save(weights: WeightsFile, path: Path, scale: float = 1.0) -> Path:
    meta = np.array(json.dumps(weights.meta))
    np.savez(path, __meta__=meta, w=weights.params["w"] * np.float32(scale), b=weights.params["b"])
    return path


def test_a_network_whose_logits_overflow_is_refused_when_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"logits are not finite .* a board of 10 stones"):
        _overflowing(5)
    # finite on the probes (at most three quarters of the board), so made and loaded
    late = _overflowing(40)
    load_weights(_save(late, tmp_path / "late.npz"))
    with pytest.raises(ValueError, match=r"early\.npz is not a .*logits are not finite"):
        load_weights(_save(late, tmp_path / "early.npz", scale=8.0))


@pytest.mark.parametrize(
    "bias",
    [
        [np.nan, np.inf, 0, 0, 0, 0, 0],
        [np.nan, 1, 2, -np.inf, 2, np.nan, 0],
        [np.nan] * 7,
        [-np.inf] * 7,
    ],
)
def test_logits_that_overflow_in_play_are_played_as_the_kaggle_agent_plays_them(
    bias: list[float],
) -> None:
    # made finite, then the logits of play overflow: nan is the lowest, inf the highest
    weights = WeightsFile(
        Geometry(),
        [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}],
        {"w": np.zeros((7, 84)), "b": np.zeros(7)},
    )
    weights.params["b"] = np.array(bias, np.float32)
    board = Board.from_moves(Geometry(), [3, 3])
    legal = board.legal_mask()
    logits = masked_logits(weights.layers, weights.params, board.to_planes(), legal)
    kaggle = best_legal_column(logits, legal)
    values = np.where(np.isnan(logits), -np.inf, logits)
    top = values.max()
    best = (
        set(np.flatnonzero(values == top).tolist()) if top > -np.inf else set(board.legal_moves())
    )
    possible = set(np.flatnonzero(values > -np.inf).tolist()) if np.isfinite(top) else best
    assert kaggle in best
    rng = np.random.default_rng(0)
    deterministic = NumpyNetPolicy(weights)
    assert {deterministic.act(board, rng) for _ in range(20)} <= best
    assert not np.isnan(deterministic.scores(board)[legal]).any()
    sampled = NumpyNetPolicy(weights, deterministic=False)
    assert {sampled.act(board, rng) for _ in range(50)} <= possible
