"""Weights files from strangers: every bound of the loader, each refusal a ValueError naming the
file and the reason, quickly and without inflating what the network does not use."""

from __future__ import annotations

import io
import json
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from connectx_gym import Board, Geometry, make_policy
from connectx_gym import weights as weights_module
from connectx_gym.files import load_file, load_weights, save_weights
from connectx_gym.weights import WeightsFile, best_legal_column
from tests.connectx_gym.test_files import random_weights

LINEAR = [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}]


def write_archive(path: Path, meta: Any, arrays: dict[str, bytes | np.ndarray]) -> Path:
    """An ``.npz`` written member by member, so that members can lie about themselves."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        text = meta if isinstance(meta, str) else json.dumps(meta)
        members = {"__meta__": np.array(text), **arrays}
        for name, value in members.items():
            if isinstance(value, np.ndarray):
                buffer = io.BytesIO()
                np.save(buffer, value)
                value = buffer.getvalue()
            archive.writestr(name + ".npy", value)
    return path


def meta_for(rows: int = 6, columns: int = 7, layers: Any = None) -> dict[str, Any]:
    return {
        "format": "connectx-gym-weights",
        "version": 1,
        "rows": rows,
        "columns": columns,
        "inarow": 4,
        "layers": LINEAR if layers is None else layers,
    }


def linear_arrays(rows: int = 6, columns: int = 7, outputs: int | None = None) -> dict[str, Any]:
    outputs = columns if outputs is None else outputs
    return {
        "w": np.ones((outputs, 2 * rows * columns), np.float32),
        "b": np.zeros(outputs, np.float32),
    }


def refused(path: Path, reason: str) -> None:
    start = time.perf_counter()
    with pytest.raises(ValueError, match=reason) as caught:
        load_weights(path)
    assert str(path) in str(caught.value)
    assert time.perf_counter() - start < 5


def test_geometry_refuses_huge_boards_at_once() -> None:
    start = time.perf_counter()
    for rows, columns in [(6, 10**6), (10**6, 7), (100, 100), (1025, 1)]:
        with pytest.raises(ValueError, match=r"must be <=|larger than"):
            Geometry(rows, columns, 4)
    assert time.perf_counter() - start < 1
    largest = Geometry(4, 1024, 4)  # the largest boards are built quickly
    assert largest.bottom == sum(1 << (c * largest.height) for c in range(1024))


@pytest.mark.parametrize(
    ("board", "reason"),
    [
        ({"columns": 10**6}, r"columns must be a whole number in \[1, 1024\]"),
        ({"rows": 100, "columns": 100}, "larger than 4096 cells"),
        ({"rows": "6"}, "rows must be a whole number"),
        ({"columns": True}, "columns must be a whole number"),
    ],
)
def test_board_in_metadata_is_checked_first(
    tmp_path: Path, board: dict[str, Any], reason: str
) -> None:
    meta = {**meta_for(), **board}
    refused(write_archive(tmp_path / "big.npz", meta, linear_arrays()), reason)


@pytest.mark.slow
def test_unused_arrays_are_never_inflated(tmp_path: Path) -> None:
    # 400 MB of zeros compress to about 400 KB; the network does not name them.
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("__meta__.npy", _npy(np.array(json.dumps(meta_for()))))
        for name, value in linear_arrays().items():
            archive.writestr(name + ".npy", _npy(value))
        with archive.open("padding.npy", "w", force_zip64=True) as member:
            chunk = bytes(1 << 24)
            for _ in range(25):
                member.write(chunk)
    assert path.stat().st_size < 2_000_000
    tracemalloc.start()
    weights = load_weights(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert set(weights.params) == {"w", "b"}
    assert peak < 20_000_000


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_array_size_is_checked_against_its_header_before_reading(tmp_path: Path) -> None:
    header_only = _npy(np.zeros((7, 84), np.float32))[:128]  # declares 7x84, holds nothing
    arrays = {"w": header_only, "b": np.zeros(7, np.float32)}
    refused(write_archive(tmp_path / "short.npz", meta_for(), arrays), "size does not match")


def test_parameter_count_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weights_module, "MAX_PARAMETERS", 100)
    path = write_archive(tmp_path / "big.npz", meta_for(), linear_arrays())
    refused(path, "more than 100 parameters")


def test_deeply_nested_metadata_is_refused(tmp_path: Path) -> None:
    for depth in (100, 100_000):
        layers = "[" * depth + "]" * depth
        text = json.dumps(meta_for()).replace(json.dumps(LINEAR), layers)
        path = write_archive(tmp_path / f"deep{depth}.npz", text, linear_arrays())
        with pytest.raises(ValueError, match=str(path)):
            load_weights(path)


def test_oversized_metadata_is_refused(tmp_path: Path) -> None:
    meta = {**meta_for(), "notes": "x" * (2 << 20)}
    refused(write_archive(tmp_path / "long.npz", meta, linear_arrays()), "more than")


@pytest.mark.parametrize(
    ("arrays", "layers", "reason"),
    [
        (linear_arrays(outputs=100), None, "not 7 logits"),
        ({"w": np.ones((7, 50), np.float32), "b": np.zeros(7)}, None, "takes 50 inputs"),
        ({"w": np.ones((7, 84), np.float32), "b": np.zeros(3)}, None, "bias"),
        ({"w": np.ones((7, 84), np.int64), "b": np.zeros(7)}, None, "not floats"),
        (linear_arrays(), [{"op": "flatten"}, {"op": "ones_plane"}], "needs planes"),
        (linear_arrays(), [{"op": "explode"}], "unknown layer op"),
        (linear_arrays(), [{"op": "gather_landing"}], "before any 'input_planes'"),
        (linear_arrays(), {"op": "flatten"}, "must be a list"),
    ],
)
def test_shapes_are_checked_at_load(
    tmp_path: Path, arrays: dict[str, Any], layers: Any, reason: str
) -> None:
    path = write_archive(tmp_path / "bad.npz", meta_for(layers=layers), arrays)
    refused(path, reason)


def test_non_finite_weights_are_refused(tmp_path: Path) -> None:
    arrays = linear_arrays()
    arrays["w"][0, 0] = np.nan
    refused(write_archive(tmp_path / "nan.npz", meta_for(), arrays), "not finite")


def test_valid_files_still_load(tmp_path: Path) -> None:
    weights = random_weights(Geometry(5, 6, 4))
    loaded = load_weights(save_weights(weights, tmp_path / "ok.npz"))
    for name, value in weights.params.items():
        np.testing.assert_array_equal(loaded.params[name], value)
    policy = make_policy(str(tmp_path / "ok.npz"))
    board = Board.empty(5, 6, 4)
    assert board.can_play(policy.act(board, np.random.default_rng(0)))


def test_weights_file_refuses_wrong_shapes_when_built() -> None:
    with pytest.raises(ValueError, match="not one logit per column"):
        WeightsFile(Geometry(), LINEAR, linear_arrays(outputs=100))


def test_best_legal_column_never_answers_an_illegal_one() -> None:
    legal = np.array([False, True, False, True])
    assert best_legal_column(np.array([9.0, 1.0, 8.0, 2.0]), legal) == 3
    assert best_legal_column(np.array([np.nan, np.nan, np.nan, np.nan]), legal) == 1
    assert best_legal_column(np.array([np.inf, -np.inf, np.inf, -np.inf]), legal) == 1


def test_exported_agent_never_answers_an_illegal_column(tmp_path: Path) -> None:
    from connectx_train.export import export_kaggle

    # A network that always prefers column 0, on a board whose column 0 is full.
    arrays = linear_arrays(rows=2, columns=3)
    arrays["w"][:] = 0
    arrays["b"] = np.array([5.0, 1.0, 2.0], np.float32)
    path = write_archive(tmp_path / "greedy.npz", meta_for(rows=2, columns=3), arrays)
    exported = export_kaggle(path, tmp_path / "main.py")
    namespace: dict[str, Any] = {}
    exec(compile(exported.read_text(), str(exported), "exec"), namespace)
    config = {"rows": 2, "columns": 3, "inarow": 4}
    assert namespace["agent"]({"board": [0] * 6, "mark": 1}, config) == 0
    assert namespace["agent"]({"board": [1, 0, 0, 2, 0, 0], "mark": 1}, config) == 2


_LOADED: list[str] = []


def _record_npz_load(path: Path) -> None:
    _LOADED.append(".npz")


def _record_zip_load(path: Path) -> None:
    _LOADED.append(".zip")


def test_a_link_is_loaded_as_what_it_leads_to_or_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agent.npz`` linking to an SB3 ``.zip`` would unpickle it: the loader is chosen by the
    file the link leads to, and a name whose suffix differs from it is refused."""
    model = tmp_path / "model.zip"
    model.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: no loader may see it
    link = tmp_path / "agent.npz"
    link.symlink_to(model)
    loaded: list[str] = []
    monkeypatch.setattr(f"{__name__}._LOADED", loaded)
    loaders = {".npz": f"{__name__}:_record_npz_load", ".zip": f"{__name__}:_record_zip_load"}
    monkeypatch.setattr("connectx_gym.files.file_loaders", lambda: loaders)
    with pytest.raises(ValueError, match=r"agent\.npz leads to a \.zip file, not a \.npz one"):
        load_file(link)
    assert loaded == []
    load_file(model)  # the file itself, by its own name, goes to its own loader
    assert loaded == [".zip"]
    monkeypatch.undo()
    weights = save_weights(random_weights(Geometry(4, 5, 3)), tmp_path / "w.npz")
    (tmp_path / "same.npz").symlink_to(weights)  # a link to a file of its own suffix loads
    assert make_policy(str(tmp_path / "same.npz")).weights.geometry == Geometry(4, 5, 3)


@pytest.mark.parametrize(
    ("name", "message"),
    [("a\x00b.npz", "NUL byte"), ("x" * 256 + ".npz", "File name too long")],
)
def test_names_no_file_system_takes_are_one_value_error(
    tmp_path: Path, name: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_policy(str(tmp_path / name))
