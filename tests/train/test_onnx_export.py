"""ONNX export: onnxruntime plays the model's own deterministic moves, from an SB3 .zip and from a
weights-only .npz, with a dynamic batch; bad input ends in one-line errors."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

import torch  # noqa: E402 - after the skips

from connectx_gym import cli  # noqa: E402
from connectx_gym.bitboard import Geometry  # noqa: E402
from connectx_gym.env import ConnectXEnv  # noqa: E402
from connectx_gym.files import save_weights  # noqa: E402
from connectx_gym.weights import OPERATIONS, WeightsFile, forward_layers  # noqa: E402
from connectx_train import onnx_export  # noqa: E402
from connectx_train.config import TrainConfig  # noqa: E402
from connectx_train.model import model_weights, new_model  # noqa: E402
from connectx_train.networks import TORCH_OPERATIONS  # noqa: E402
from connectx_train.onnx_export import (  # noqa: E402
    MASKED_LOGIT,
    OPSET,
    LayersModule,
    export_onnx,
    onnx_logits,
    random_positions,
)
from tests.connectx_gym.test_forward import every_operation_network  # noqa: E402


def make_model(out: Path, rows: int, columns: int, inarow: int, seed: int):
    config = TrainConfig(rows=rows, columns=columns, inarow=inarow, seed=seed)
    model = new_model(config, ConnectXEnv(rows, columns, inarow), out)
    # A fresh network has near-uniform logits; spread them so that argmaxes are well separated.
    with torch.no_grad():
        model.policy.action_net.weight.mul_(40)
    return model


@pytest.fixture(scope="module")
def sb3_export(tmp_path_factory):
    """A fresh 6x7 MaskablePPO model saved as .zip and exported by ``connectx export-onnx``
    (the only export of this file: the exporter takes seconds)."""
    out = tmp_path_factory.mktemp("onnx_zip")
    model = make_model(out, 6, 7, 4, seed=3)
    model.save(out / "model.zip")
    model.tmp_zip = str(out / "model.zip")
    with pytest.warns(UserWarning, match="unpickles"):
        status = cli.main(["export-onnx", str(out / "model.zip"), "-o", str(out / "agent.onnx")])
    assert status == 0
    return model, out / "agent.onnx"


def test_onnx_moves_equal_sb3_model_moves(sb3_export):
    model, path = sb3_export
    obs, masks = random_positions(Geometry(), 3000, np.random.default_rng(7))
    expected, _ = model.predict(
        obs.astype(np.int8), deterministic=True, action_masks=masks.astype(bool)
    )
    logits = onnx_logits(path, obs, masks)
    assert logits.dtype == np.float32
    assert logits.shape == (3000, 7)
    np.testing.assert_array_equal(logits.argmax(axis=1), expected)
    assert (logits[masks == 0] == np.float32(MASKED_LOGIT)).all()
    assert (logits[masks == 1] > MASKED_LOGIT / 2).all()
    # The batch dimension is dynamic: one position at a time gives the same logits.
    for index in (0, 1, 2999):
        single = onnx_logits(path, obs[index : index + 1], masks[index : index + 1])
        np.testing.assert_allclose(single[0], logits[index], rtol=1e-5, atol=1e-5)


def test_onnx_graph_declares_its_interface(sb3_export):
    _, path = sb3_export
    graph = onnx.load(path)
    onnx.checker.check_model(graph)
    shapes = {
        value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        for value in [*graph.graph.input, *graph.graph.output]
    }
    assert shapes == {
        "obs": ["batch", 2, 6, 7],
        "action_mask": ["batch", 7],
        "logits": ["batch", 7],
    }
    float32 = onnx.TensorProto.FLOAT
    assert all(
        value.type.tensor_type.elem_type == float32
        for value in [*graph.graph.input, *graph.graph.output]
    )
    assert [entry.version for entry in graph.opset_import if entry.domain == ""] == [OPSET]
    metadata = {entry.key: entry.value for entry in graph.metadata_props}
    assert metadata == {"connectx.rows": "6", "connectx.columns": "7", "connectx.inarow": "4"}


def test_npz_and_zip_give_the_same_network(sb3_export, tmp_path):
    model, _ = sb3_export
    save_weights(model_weights(model, Geometry()), tmp_path / "model.npz")
    from_npz = onnx_export._load(tmp_path / "model.npz")
    with pytest.warns(UserWarning, match="unpickles"):
        from_zip = onnx_export._load(Path(model.tmp_zip))
    assert from_npz.layers == from_zip.layers
    assert from_npz.geometry == from_zip.geometry == Geometry()
    for name, array in from_zip.params.items():
        np.testing.assert_array_equal(from_npz.params[name], array)


def test_the_torch_table_covers_every_operation_and_computes_the_same():
    assert set(TORCH_OPERATIONS) == set(OPERATIONS)
    rows, columns = 4, 5
    layers, params = every_operation_network(rows, columns, np.random.default_rng(2))
    weights = WeightsFile(Geometry(rows, columns, 3), layers, params)
    obs, masks = random_positions(weights.geometry, 50, np.random.default_rng(3))
    with torch.no_grad():
        got = LayersModule(weights)(torch.from_numpy(obs), torch.from_numpy(masks)).numpy()
    expected = forward_layers(layers, params, obs)
    legal = masks > 0
    np.testing.assert_allclose(got[legal], expected[legal], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("rows", "columns", "inarow"), [(5, 4, 3), (7, 8, 4), (1, 5, 3)])
def test_torch_module_equals_the_numpy_forward_pass(tmp_path, rows, columns, inarow):
    # The module that is exported, on other boards: the logits of the .npz network's numpy
    # forward pass (what NumpyNetPolicy plays the argmax of), masked.
    geometry = Geometry(rows, columns, inarow)
    weights = model_weights(make_model(tmp_path, rows, columns, inarow, seed=rows), geometry)
    obs, masks = random_positions(geometry, 500, np.random.default_rng(rows))
    with torch.no_grad():
        got = LayersModule(weights)(torch.from_numpy(obs), torch.from_numpy(masks)).numpy()
    expected = np.where(masks > 0, forward_layers(weights.layers, weights.params, obs), -np.inf)
    np.testing.assert_array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    legal = masks > 0
    np.testing.assert_allclose(got[legal], expected[legal], rtol=1e-4, atol=1e-4)
    assert (got[~legal] == np.float32(MASKED_LOGIT)).all()


def test_export_check_catches_a_wrong_graph(sb3_export, tmp_path):
    _, path = sb3_export
    other = model_weights(make_model(tmp_path, 6, 7, 4, seed=9), Geometry())
    with pytest.raises(ValueError, match="differ"):
        onnx_export._check_export(path, other, 200)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.npz", None, "no such model"),
        ("model.txt", b"x", r"expected a \.npz weights file or an SB3 \.zip"),
        ("model.npz", b"not a zip", "not a connectx-gym weights file"),
        ("model.zip", b"not a zip", "not a loadable MaskablePPO model"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, name, content, message):
    model = tmp_path / name
    if content is not None:
        model.write_bytes(content)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # SB3's unpickling warning for .zip
        status = cli.main(["export-onnx", str(model), "-o", str(tmp_path / "a.onnx")])
    assert status != 0
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.startswith("connectx export-onnx: error:")
    assert re.search(message, error)
    assert not (tmp_path / "a.onnx").exists()


def test_missing_onnx_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match=r'pip install "connectx-gym\[onnx,train\]"'):
        export_onnx(tmp_path / "model.npz", tmp_path / "a.onnx")


def test_check_is_capped_and_the_cap_is_named(tmp_path, capsys):
    from connectx_train.export import MAX_CHECK_POSITIONS

    model = save_weights(
        model_weights(make_model(tmp_path, 6, 7, 4, 0), Geometry()), tmp_path / "m.npz"
    )
    try:
        status = cli.main(["export-onnx", str(model), "--check", "1000000000"])
    except SystemExit as exit_:  # argparse: one line
        status = exit_.code
    error = capsys.readouterr().err.strip()
    assert status == 2
    assert len(error.splitlines()) == 1
    assert f"must be <= {MAX_CHECK_POSITIONS}" in error
    assert "--check" in error
    with pytest.raises(ValueError, match="MAX_CHECK_POSITIONS"):
        export_onnx(model, tmp_path / "a.onnx", check=MAX_CHECK_POSITIONS + 1)
    assert not (tmp_path / "a.onnx").exists()


def test_shipped_weights_export_by_name_as_export_kaggle_does(tmp_path, capsys):
    output = tmp_path / "ppo.onnx"
    assert cli.main(["export-onnx", "ppo", "-o", str(output), "--check", "20"]) == 0
    assert output.is_file()
    assert "wrote" in capsys.readouterr().err  # a status line, on stderr


def _logits_growing_with_stones(scale: float) -> WeightsFile:
    """A 4x4 network (5 in a row: no game ends before the board is full) whose logits are
    ``scale`` times the stones."""
    return WeightsFile(
        Geometry(4, 4, 5),
        [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}],
        {"w": np.full((4, 32), scale, np.float32), "b": np.zeros(4, np.float32)},
    )


def test_a_network_whose_logits_overflow_is_one_clear_line(tmp_path, capsys):
    # finite on the probes (at most 12 stones), inf from 14 stones on: loaded, then the check
    # positions (up to 15 stones) find the overflow
    late = save_weights(_logits_growing_with_stones(3.4e38 / 13.5), tmp_path / "late.npz")
    status = cli.main(["export-onnx", str(late), "-o", str(tmp_path / "a.onnx"), "--check", "300"])
    error = capsys.readouterr().err.strip()
    assert status != 0
    assert len(error.splitlines()) == 1
    assert re.search(r"logits are not finite .* on \d+ of the 300 check positions", error)
    assert "nan" not in error.replace("inf or nan", "")
    # inf on the probes already: refused when the file is read, naming it
    early = tmp_path / "early.npz"
    np.savez(
        early,
        __meta__=np.array(json.dumps(_logits_growing_with_stones(1.0).meta)),
        w=np.full((4, 32), 3.4e38 / 3.5, np.float32),
        b=np.zeros(4, np.float32),
    )
    status = cli.main(["export-onnx", str(early), "-o", str(tmp_path / "a.onnx")])
    error = capsys.readouterr().err.strip()
    assert status != 0
    assert re.search(
        r"early\.npz is not a connectx-gym weights file: the network's logits are "
        r"not finite",
        error,
    )
    assert not (tmp_path / "a.onnx").exists()
