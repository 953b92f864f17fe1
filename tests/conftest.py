"""Shared fixtures (Pascal Pons' benchmark positions, which live outside the repository) and
the ``slow`` marker of whole folders.

The folders mirror the packages (``connectx_gym/``, ``baselines/``, ``train/``) plus cross-cutting
ones (``architecture/``, ``browser/``, ``docs/``, ``ray/``, ``benchmarks/``); helpers that tests
import live in ``support/``. ``pytest -m "not slow"`` leaves out training, Ray, browser,
benchmark-script and docs tests, and the tests marked slow one by one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The suite's workers (pytest-xdist) and the commands they start each run OpenMP thread pools
# (torch's, numba's) on the same few cores: threads that busy-wait after a parallel region take
# the cores the others need. Waiting passively changes no result, only where the time goes; set
# before torch or numba load their OpenMP runtime, and inherited by every subprocess.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

#: The repository root, so that tests import the data-making programs of ``tools/`` (not installed).
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: ``../shared`` next to the repository root; Pons' ``Test_L*_R*`` files are in ``data/pons``.
SHARED_DIR = Path(__file__).parents[1].parent / "shared"
PONS_DIR = SHARED_DIR / "data" / "pons"

PonsPositions = Callable[[str, "int | None"], list[tuple[list[int], int]]]


def pytest_configure(config: pytest.Config) -> None:
    """Stop at once, in one line, when this distribution's entry points are not installed: the
    search policies and the training commands come through them (connectx_gym.plugins)."""
    from connectx_gym.plugins import POLICIES_GROUP, plugins

    if "minimax" not in plugins(POLICIES_GROUP):
        raise pytest.UsageError(
            "the entry points of connectx-gym are not installed (the search policies come "
            "through them): run pip install -e . --no-deps in the repository root"
        )


#: folders whose every test is ``slow``: they train networks, start Ray, drive a browser, run the
#: benchmark scripts or build the docs site and run its examples. Elsewhere a test that takes
#: more than about a second (a subprocess, a server, a search checked against a slow reference)
#: carries ``@pytest.mark.slow`` itself, so that ``pytest -m "not slow"`` stays a quick loop.
SLOW_FOLDERS = ("train", "ray", "browser", "benchmarks", "docs")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW_FOLDERS` ``slow``."""
    tests = Path(__file__).resolve().parent
    for item in items:
        parts = item.path.resolve().relative_to(tests).parts
        if parts and parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def pons_dir() -> Path:
    """The directory of Pons' test positions; skips the test when ``../shared`` is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"{SHARED_DIR} is absent (Pons' positions are not part of the repository)")
    return PONS_DIR


def read_pons(path: Path, limit: int | None = None) -> list[tuple[list[int], int]]:
    """``(moves as 0-indexed columns, score)`` pairs from a Pons ``Test_L*_R*`` file.

    A line is ``<moves as 1-indexed columns> <score>``; score > 0: the side to move wins with
    ``22 - score`` of its own stones on the board, 0: draw, < 0: the side to move loses.
    """
    positions = []
    with path.open() as lines:
        for line in lines:
            if limit is not None and len(positions) >= limit:
                break
            moves, score = line.split()
            positions.append(([int(c) - 1 for c in moves], int(score)))
    return positions


@pytest.fixture(scope="session")
def pons_positions(pons_dir: Path) -> PonsPositions:
    """``pons_positions("Test_L3_R1", limit)``: the first ``limit`` positions of that file."""

    def load(name: str, limit: int | None = None) -> list[tuple[list[int], int]]:
        return read_pons(pons_dir / name, limit)

    return load


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_a_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """SB3 models made without ``tensorboard_log`` log to ``$SB3_LOGDIR``, else to a new
    ``SB3-<time>`` folder in the system's temporary directory that nothing removes: the
    tests' (their subprocesses' too) go where pytest cleans up."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3_logs")))
        yield
