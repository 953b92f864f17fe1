"""The optional value head of the weights-only format: values of a hand-built head, batched as
one board at a time, saved and read back; files without one load with ``value`` None; a value
entry that does not fit, or a head over the bounds, is one ``ValueError`` before anything of it
is allocated."""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from connectx_gym import Board, Geometry
from connectx_gym.files import NumpyNetPolicy, load_weights, save_weights
from connectx_gym.forward import FORWARD_CHUNK
from connectx_gym.weights import ValueHead, WeightsFile, read_weights, weights_bytes
from tests.connectx_gym.test_files_untrusted import meta_for, refused, write_archive

ROWS, COLUMNS = 6, 7
FEATURES = 2 * ROWS * COLUMNS

#: Logits from all discs; the trunk is ``flatten`` (after=1).
POLICY = [{"op": "flatten"}, {"op": "linear", "weight": "pw", "bias": "pb"}]
#: The value: tanh(0.1 * (own discs - the opponent's)).
DISC_VALUE = [{"op": "linear", "weight": "vw", "bias": "vb"}, {"op": "tanh"}]


def disc_count_arrays() -> dict[str, np.ndarray]:
    own_minus_other = np.concatenate([np.full(FEATURES // 2, 0.1), np.full(FEATURES // 2, -0.1)])
    return {
        "pw": np.zeros((COLUMNS, FEATURES), np.float32),
        "pb": np.zeros(COLUMNS, np.float32),
        "vw": own_minus_other[None].astype(np.float32),
        "vb": np.zeros(1, np.float32),
    }


def random_board(rng: np.random.Generator, stones: int) -> Board:
    """A board of random play, ``stones`` moves long or less (the game not over)."""
    board = Board.empty()
    for _ in range(stones):
        after = board.play(int(rng.choice(board.legal_moves())))
        if after.is_terminal():
            break
        board = after
    return board


def disc_count_network() -> WeightsFile:
    return WeightsFile(Geometry(), POLICY, disc_count_arrays(), {"after": 1, "layers": DISC_VALUE})


def test_a_hand_built_head_gives_its_value_for_the_player_to_move() -> None:
    weights = disc_count_network()
    board = Board.from_moves(Geometry(), [3, 3, 2])  # the mover (second player) has 1 disc, 2 not
    value = weights.values(board.to_planes()[None])
    assert value.shape == (1,)
    np.testing.assert_allclose(value, np.tanh(0.1 * (1 - 2)), rtol=1e-6)
    assert weights.value == ValueHead(1, DISC_VALUE)


def test_values_of_a_batch_are_those_of_each_board_and_round_trip(tmp_path: Path) -> None:
    # the head reads the landing cells the trunk's input_planes found, across batch pieces
    policy = [
        {"op": "input_planes"},
        {"op": "conv", "weight": "cw", "bias": "cb"},
        {"op": "gather_landing"},
    ]
    value = [
        {"op": "conv", "weight": "vcw", "bias": "vcb"},
        {"op": "gather_landing"},
        {"op": "linear", "weight": "vw", "bias": "vb"},
    ]
    rng = np.random.default_rng(0)
    arrays = {
        "cw": rng.normal(size=(1, 4, 1, 1)),
        "cb": rng.normal(size=1),
        "vcw": rng.normal(size=(1, 4, 3, 3)),
        "vcb": rng.normal(size=1),
        "vw": rng.normal(size=(1, COLUMNS)),
        "vb": rng.normal(size=1),
    }
    weights = WeightsFile(Geometry(), policy, arrays, ValueHead(1, value))
    boards = [random_board(rng, stones) for stones in range(3, 23)]
    planes = np.stack([b.to_planes() for b in boards]).astype(np.float32)
    assert len(planes) > FORWARD_CHUNK
    one_by_one = np.concatenate([weights.values(p[None]) for p in planes])
    logits, values = weights.logits_and_values(planes)
    np.testing.assert_allclose(values, one_by_one, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(logits, weights.logits(planes), rtol=1e-6)
    assert weights.values(planes[:0]).shape == (0,)
    for loaded in (
        load_weights(save_weights(weights, tmp_path / "v.npz")),
        read_weights(io.BytesIO(weights_bytes(weights))),
    ):
        assert loaded.value == weights.value
        np.testing.assert_allclose(loaded.values(planes), values, rtol=1e-6)
    policy_view = NumpyNetPolicy(load_weights(tmp_path / "v.npz"))
    np.testing.assert_allclose(policy_view.values(boards), values, rtol=1e-5, atol=1e-6)


def test_a_network_without_a_value_head_has_none() -> None:
    arrays = disc_count_arrays()
    weights = WeightsFile(Geometry(), POLICY, {k: arrays[k] for k in ("pw", "pb")})
    assert weights.value is None
    assert "value" not in weights.meta
    assert read_weights(io.BytesIO(weights_bytes(weights))).value is None
    planes = Board.empty().to_planes()[None]
    assert weights.logits_and_values(planes)[1] is None
    with pytest.raises(ValueError, match="no value head"):
        weights.values(planes)
    with pytest.raises(ValueError, match="no value head"):
        NumpyNetPolicy(weights).values([Board.empty()])


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ([], "'value' must be"),
        ({"after": 1}, "'value' must be"),
        ({"after": 1, "layers": DISC_VALUE, "extra": 0}, "'value' must be"),
        ({"after": True, "layers": DISC_VALUE}, r"'after' must be a whole number in \[0, 2\]"),
        ({"after": 3, "layers": DISC_VALUE}, r"'after' must be a whole number in \[0, 2\]"),
        ({"after": -1, "layers": DISC_VALUE}, r"'after' must be a whole number"),
        ({"after": 1, "layers": {"op": "tanh"}}, "'layers' must be a list"),
        ({"after": 2, "layers": DISC_VALUE}, r"takes 84 inputs, got shape \(7,\)"),
        ({"after": 1, "layers": [{"op": "tanh"}]}, r"outputs shape \(84,\), not one value"),
        ({"after": 0, "layers": DISC_VALUE}, "needs planes|takes 84 inputs"),
        ({"after": 1, "layers": [{"op": "linear", "weight": "nope", "bias": "vb"}]}, "missing"),
        ({"after": 1, "layers": [{"op": "linear", "weight": "pw", "bias": "vb"}]}, "bias"),
    ],
)
def test_a_value_entry_that_does_not_fit_is_refused(value, reason, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=reason):
        WeightsFile(Geometry(), POLICY, disc_count_arrays(), value)
    meta = meta_for(layers=POLICY) | {"value": value}
    refused(write_archive(tmp_path / "bad.npz", meta, disc_count_arrays()), reason)


def test_a_value_array_the_file_lacks_is_refused(tmp_path: Path) -> None:
    arrays = disc_count_arrays()
    del arrays["vw"]
    meta = meta_for(layers=POLICY) | {"value": {"after": 1, "layers": DISC_VALUE}}
    refused(write_archive(tmp_path / "lacking.npz", meta, arrays), "missing array 'vw'")


def test_a_value_head_that_overflows_is_refused() -> None:
    arrays = disc_count_arrays() | {"vb": np.full(1, 3e38, np.float32)}
    big = [
        {"op": "linear", "weight": "vw", "bias": "vb"},
        {"op": "linear", "weight": "x", "bias": "vb"},
    ]
    arrays["x"] = np.full((1, 1), 10.0, np.float32)
    with pytest.raises(ValueError, match=r"value is not finite .* the empty board"):
        WeightsFile(Geometry(), POLICY, arrays, {"after": 1, "layers": big})


def test_the_bounds_count_the_value_head_before_reading_its_arrays(tmp_path: Path) -> None:
    # a value head of a 1x1 convolution to 2^18 channels on a 64x64 board: 4 GiB per board
    policy = [{"op": "input_planes"}, {"op": "conv", "weight": "w", "bias": "b"}]
    policy.append({"op": "gather_landing"})
    value = [
        {"op": "conv", "weight": "big", "bias": "bigb"},
        {"op": "gather_landing"},
        {"op": "linear", "weight": "vw", "bias": "vb"},
    ]
    arrays = {
        "w": np.zeros((1, 4, 1, 1), np.float32),
        "b": np.zeros(1, np.float32),
        "big": np.zeros((1 << 18, 4, 1, 1), np.float32),
        "bigb": np.zeros(1 << 18, np.float32),
        "vw": np.zeros((1, 64), np.float32),
        "vb": np.zeros(1, np.float32),
    }
    meta = meta_for(64, 64, policy) | {"value": {"after": 1, "layers": value}}
    path = write_archive(tmp_path / "bomb.npz", meta, arrays)
    tracemalloc.start()
    try:
        refused(path, "MAX_ACTIVATION_BYTES")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # not even the 4 MB of the head's weight was read
