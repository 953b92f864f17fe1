"""One concern per module: every Python module of the project is under 500 lines."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the folders of the project's Python code (the packages, the benchmarks, the data-making
#: tools, the docs' hooks, the tests)
FOLDERS = ("connectx_gym", "baselines", "train", "benchmarks", "tools", "docs", "tests")
MAX_LINES = 499


def test_every_module_is_under_500_lines() -> None:
    modules = [path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(modules) > 100
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in modules}
    too_long = [
        f"{path.relative_to(ROOT)}: {lines}" for path, lines in lengths.items() if lines > MAX_LINES
    ]
    assert not too_long, "modules of 500 lines or more (split one concern out): " + ", ".join(
        too_long
    )
