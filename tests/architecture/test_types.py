"""The type hints check: mypy, configured in ``pyproject.toml`` ([tool.mypy]), finds no error.

The wheel says ``Typing :: Typed`` and ships ``py.typed``, so its hints are part of its interface.
mypy cannot follow the editable install's import hook to the folders ``baselines/`` and ``train/``
(installed as ``connectx_baselines`` and ``connectx_train``); it finds them through the links in
``tools/typecheck/`` (``mypy_path``), which must keep pointing at the folders of ``package-dir``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The one command of docs/contributing.md.
MYPY = ["-m", "mypy", "-p", "connectx_gym", "-p", "connectx_baselines", "-p", "connectx_train"]
#: A cold run (no .mypy_cache) of the three packages takes minutes on two busy cores.
TIMEOUT_SECONDS = 1200


def test_typecheck_links_name_the_installed_packages() -> None:
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    package_dirs = config["tool"]["setuptools"]["package-dir"]
    links = ROOT / config["tool"]["mypy"]["mypy_path"]
    renamed = {name: folder for name, folder in package_dirs.items() if name != folder}
    assert renamed, "pyproject's package-dir renames no folder: tools/typecheck/ is not needed"
    for name, folder in renamed.items():
        assert (links / name).resolve() == (ROOT / folder).resolve(), (
            f"{links / name} should link to {folder}/"
        )
    present = {path.name for path in links.iterdir()}
    assert present == set(renamed), f"tools/typecheck/ holds {sorted(present)}"


@pytest.mark.slow
def test_mypy_finds_no_error() -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    try:
        result = subprocess.run(
            [sys.executable, *MYPY],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"mypy took more than {TIMEOUT_SECONDS} s")
    report = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, f"mypy {' '.join(MYPY[2:])} found errors:\n{report[-8000:]}"
    assert "Success: no issues found" in result.stdout, report
