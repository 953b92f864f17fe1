"""Output files: written atomically to regular files; a directory, device node or symbolic link
named as the output is refused with one line and left as it was (never replaced)."""

from __future__ import annotations

import errno
import importlib.util
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from connectx_gym.cli import main
from connectx_gym.files import WeightsFile, save_weights
from connectx_gym.outputs import (
    OutputPathError,
    atomic_output,
    check_output_path,
    open_atomically,
    write_text_atomically,
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse usage errors
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tiny_weights(path: Path) -> Path:
    from connectx_gym import Geometry

    rng = np.random.default_rng(0)
    layers = [{"op": "flatten"}, {"op": "linear", "weight": "w", "bias": "b"}]
    params = {"w": rng.normal(size=(7, 84)), "b": np.zeros(7)}
    return save_weights(WeightsFile(Geometry(), layers, params), path)


def make_device(path: Path) -> Path:
    """A character device node (1, 3: the numbers of a null device) in a temporary folder."""
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as error:
        pytest.skip(f"cannot make a device node here ({error})")
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


def test_atomic_write_replaces_a_regular_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    write_text_atomically(target, "new")
    assert target.read_text() == "new"
    assert leftovers(tmp_path) == []


def test_symlink_is_refused_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("keep")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(OutputPathError, match="symbolic link"):
        write_text_atomically(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "keep"
    assert leftovers(tmp_path) == []


def test_device_node_is_refused_and_kept(tmp_path: Path) -> None:
    device = make_device(tmp_path / "null")
    with pytest.raises(OutputPathError, match="device"):
        write_text_atomically(device, "x")
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_directory_and_missing_folder_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OutputPathError, match="directory"):
        check_output_path(tmp_path)
    with pytest.raises(OutputPathError, match="no folder"):
        check_output_path(tmp_path / "missing" / "file.txt")


def test_full_disk_names_the_path_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "games.jsonl"
    target.write_text("old")

    def full_disk(path: Path) -> None:
        path.write_text("partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    with (
        pytest.raises(OSError, match="No space left") as caught,
        atomic_output(target) as temporary,
    ):
        full_disk(temporary)
    assert caught.value.filename == str(target)
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_error_in_the_block_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "games.jsonl"
    target.write_text("old")

    def interrupted() -> None:
        with open_atomically(target) as file:
            file.write("half")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        interrupted()
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_save_weights_refuses_a_symlink(tmp_path: Path) -> None:
    real = tiny_weights(tmp_path / "real.npz")
    before = real.read_bytes()
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    with pytest.raises(OutputPathError, match="symbolic link"):
        tiny_weights(link)
    assert link.is_symlink()
    assert real.read_bytes() == before


def test_export_kaggle_onto_a_symlink_is_one_line_and_keeps_the_link(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if importlib.util.find_spec("sb3_contrib") is None:
        pytest.skip("needs the train extra")
    model = tiny_weights(tmp_path / "model.npz")
    real = tmp_path / "real.py"
    real.write_text("keep")
    link = tmp_path / "main.py"
    link.symlink_to(real)
    code, _, err = run(capsys, "export-kaggle", str(model), "-o", str(link))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "symbolic link" in err
    assert str(link) in err
    assert link.is_symlink()
    assert real.read_text() == "keep"


def test_export_kaggle_onto_a_device_node_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if importlib.util.find_spec("sb3_contrib") is None:
        pytest.skip("needs the train extra")
    model = tiny_weights(tmp_path / "model.npz")
    device = make_device(tmp_path / "null")
    code, _, err = run(capsys, "export-kaggle", str(model), "-o", str(device))
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "device" in err
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_export_onnx_onto_a_device_node_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if importlib.util.find_spec("onnx") is None:
        pytest.skip("needs the onnx extra")
    if importlib.util.find_spec("sb3_contrib") is None:
        pytest.skip("needs the train extra")
    model = tiny_weights(tmp_path / "model.npz")
    device = make_device(tmp_path / "null")
    code, _, err = run(capsys, "export-onnx", str(model), "-o", str(device), "--check", "0")
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert "device" in err
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_save_games_and_png_onto_links_and_devices_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("keep")
    link = tmp_path / "games.jsonl"
    link.symlink_to(real)
    code, _, err = run(
        capsys, "evaluate", "random", "random", "--games", "2", "--save-games", str(link)
    )
    assert code == 2
    assert "symbolic link" in err
    assert len(err.strip().splitlines()) == 1
    assert link.is_symlink()
    assert real.read_text() == "keep"
    device = make_device(tmp_path / "null")
    code, _, err = run(
        capsys, "tournament", "random", "onestep", "--games", "2", "--png", str(device)
    )
    assert code == 2
    assert "device" in err
    assert len(err.strip().splitlines()) == 1  # refused before any game (no progress lines)
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_save_games_writes_a_regular_file(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    games = tmp_path / "games.jsonl"
    code, _, _ = run(
        capsys, "evaluate", "random", "random", "--games", "2", "--save-games", str(games)
    )
    assert code == 0
    assert len(games.read_text().splitlines()) == 2
    assert leftovers(tmp_path) == []


def test_temporary_files_of_killed_writers_are_removed_by_the_next_write(tmp_path: Path) -> None:
    import subprocess
    import sys

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(finished.stdout)  # a process id that no longer runs
    target = tmp_path / "state.json"
    stale = tmp_path / f"state.json.{dead}-0a1b2c3d.tmp.json"
    stale.write_text("half")
    alive = tmp_path / f"state.json.{os.getpid()}-0a1b2c3d.tmp.json"  # a writer still at work
    alive.write_text("busy")
    other = tmp_path / f"other.json.{dead}-0a1b2c3d.tmp.json"  # another target's
    other.write_text("half")
    write_text_atomically(target, "{}")
    assert not stale.exists()
    assert alive.exists()
    assert other.exists()


def test_a_full_disk_while_saving_weights_names_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from connectx_gym import files

    def full_disk(weights: object, file: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "final.npz"
    monkeypatch.setattr(files, "write_weights", full_disk)
    with pytest.raises(OSError, match="No space left") as caught:
        tiny_weights(target)
    assert caught.value.filename == str(target)
    assert str(target) in str(caught.value)
    assert not target.exists()
    assert leftovers(tmp_path) == []
