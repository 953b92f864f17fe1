"""Labelled-positions files that are not: one-line errors that name the file and what is wrong,
and no memory asked for before the sizes are checked (``connectx_baselines.position_sets``)."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from connectx_baselines import position_sets
from connectx_baselines.position_sets import DEFAULT_POSITIONS, ILLEGAL, load_positions


def shipped_arrays() -> dict[str, np.ndarray]:
    with np.load(DEFAULT_POSITIONS, allow_pickle=False) as data:
        return {name: data[name].copy() for name in data.files}


def with_meta(arrays: dict[str, np.ndarray], **changes: object) -> dict[str, np.ndarray]:
    meta = json.loads(str(arrays["meta"]))
    meta.update(changes)
    return {**arrays, "meta": np.array(json.dumps(meta))}


def first_row(arrays: dict[str, np.ndarray], name: str, value: object) -> dict[str, np.ndarray]:
    changed = arrays[name].copy()
    changed[0] = value
    return {**arrays, name: changed}


def after_a_win(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    moves, plies = arrays["moves"].copy(), arrays["plies"].copy()
    moves[0, :9] = [0, 1, 0, 1, 0, 1, 0, 1, 2]  # column 0 has four in a row after move 7
    moves[0, 9:] = -1
    plies[0] = 9
    return {**arrays, "moves": moves, "plies": plies}


def other_board(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return with_meta(arrays, geometry={"rows": 999, "columns": 7, "inarow": 4})


def filled_first_column(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return first_row(arrays, "moves", np.r_[[0] * 7, arrays["moves"][0, 7:]])


BAD_ARRAYS = {
    "no geometry": (lambda a: with_meta(a, geometry=None), "no geometry"),
    "meta not JSON": (lambda a: {**a, "meta": np.array("{oops")}, "Expecting"),
    "meta an array": (lambda a: {**a, "meta": np.zeros(3)}, "meta must be one string"),
    "board too large": (other_board, "largest supported"),
    "no scores": (lambda a: {k: v for k, v in a.items() if k != "scores"}, "no scores array"),
    "float scores": (lambda a: {**a, "scores": a["scores"].astype(float)}, "not integers"),
    "short plies": (lambda a: {**a, "plies": a["plies"][:-1]}, "same n"),
    "moves of another board": (lambda a: {**a, "moves": a["moves"][:, :30]}, "[n, 42]"),
    "column out of range": (lambda a: first_row(a, "moves", 9), "not a column"),
    "not padded": (lambda a: {**a, "plies": a["plies"] - 1}, "padded"),
    "plies out of range": (lambda a: first_row(a, "plies", 60), "plies are not"),
    "full column": (filled_first_column, "full column"),
    "after a win": (after_a_win, "after its game"),
    "illegal score not full": (lambda a: first_row(a, "scores", ILLEGAL), "not full"),
    "score out of range": (lambda a: first_row(a, "scores", 40), "outside"),
    "phase": (lambda a: first_row(a, "phase", 7), "phase index"),
    "split": (lambda a: first_row(a, "split", 2), "split index"),
}
MALFORMED = "not a labelled-positions file"


def assert_one_line_naming(error: pytest.ExceptionInfo[ValueError], path: Path, what: str) -> None:
    message = str(error.value)
    assert message.splitlines() == [message]
    assert str(path) in message
    assert "not a labelled-positions file" in message
    assert what in message


@pytest.mark.parametrize("case", BAD_ARRAYS)
def test_a_malformed_file_is_a_one_line_error_naming_it(tmp_path: Path, case: str) -> None:
    change, what = BAD_ARRAYS[case]
    path = tmp_path / "bad.npz"
    np.savez_compressed(path, **change(shipped_arrays()))
    with pytest.raises(ValueError, match=MALFORMED) as error:
        load_positions(path)
    assert_one_line_naming(error, path, what)


def test_the_unchanged_arrays_load(tmp_path: Path) -> None:
    path = tmp_path / "good.npz"
    np.savez_compressed(path, **shipped_arrays())
    assert load_positions(path, split="all").moves == load_positions(split="all").moves


def test_a_truncated_or_foreign_file_is_a_one_line_error(tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(DEFAULT_POSITIONS.read_bytes()[:5000])
    foreign = tmp_path / "array.npz"
    with foreign.open("wb") as file:
        np.save(file, np.zeros(3))
    text = tmp_path / "text.npz"
    text.write_text("moves\n")
    for path in (truncated, foreign, text):
        with pytest.raises(ValueError, match=MALFORMED) as error:
            load_positions(path)
        assert_one_line_naming(error, path, "")


def huge_header_file(path: Path, shape: tuple[int, ...]) -> None:
    """A positions file whose ``moves`` header claims ``shape`` but holds a few bytes."""
    arrays = shipped_arrays()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<i8", "fortran_order": False, "shape": shape}
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            if name == "moves":
                archive.writestr("moves.npy", header.getvalue() + bytes(1000))
            else:
                with archive.open(f"{name}.npy", "w") as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)


def test_a_file_that_asks_for_gigabytes_is_refused_before_allocating(tmp_path: Path) -> None:
    path = tmp_path / "greedy.npz"
    huge_header_file(path, (10_000_000, 42))  # 3.4 GB of int64 claimed, 1 KB stored
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=MALFORMED) as error:
            load_positions(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_one_line_naming(error, path, "needs 3,360,000,000 bytes")
    assert peak < 50 * 2**20


def test_the_size_limits_are_checked_on_the_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "good.npz"
    np.savez_compressed(path, **shipped_arrays())
    monkeypatch.setattr(position_sets, "MAX_POSITIONS", 1000)
    with pytest.raises(ValueError, match=MALFORMED) as error:
        load_positions(path)
    assert_one_line_naming(error, path, "more than the 1,000 allowed")
    monkeypatch.setattr(position_sets, "MAX_POSITIONS", 2000)
    monkeypatch.setattr(position_sets, "MAX_ARRAY_BYTES", 100_000)
    with pytest.raises(ValueError, match=MALFORMED) as error:
        load_positions(path)
    assert_one_line_naming(error, path, "more than the 100,000 allowed")


def test_accuracy_names_a_malformed_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from connectx_gym.cli import main

    path = tmp_path / "bad.npz"
    np.savez_compressed(path, **with_meta(shipped_arrays(), geometry=None))
    assert main(["accuracy", "onestep", "--positions", str(path)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert str(path) in err
    assert "no geometry" in err
