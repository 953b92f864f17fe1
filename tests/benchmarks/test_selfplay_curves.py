"""``benchmarks/selfplay_curves.py``: each seed's measured curves are kept in a file, and seeds
measured elsewhere (``--measured``) join the seeds run or read here in the figure and the tables.

The snapshots' measurement (the shipped labelled splits) is replaced by fixed points: what is
checked here is how records are written, read, refused and combined, not the measurement, which
the script's smoke run covers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

STEPS = (1000, 2000)


@pytest.fixture
def curves(
    monkeypatch: pytest.MonkeyPatch, benchmark_script: Callable[[str], ModuleType]
) -> ModuleType:
    """The script as a module, each seed's mistake rates fixed: ``seed / 100`` on the random
    split and ``seed / 50`` on the game split at every step."""
    pytest.importorskip("scipy")
    pytest.importorskip("matplotlib")
    module = benchmark_script("selfplay_curves.py")

    def fixed_points(out: Path, report: dict[str, Any], split: str) -> dict[str, list[tuple]]:
        seed = int(out.name.removeprefix("seed_"))
        return {
            "random": [(step, seed / 100) for step in STEPS],
            "games": [(step, seed / 50) for step in STEPS],
        }

    monkeypatch.setattr(module, "mistake_points", fixed_points)
    return module


def finished_run(root: Path, seed: int) -> Path:
    """A run folder with the ``report.json`` of a finished two-hour run of ``seed``."""
    out = root / f"seed_{seed}"
    out.mkdir(parents=True)
    report = {
        "timesteps": STEPS[-1],
        "wall_seconds": 7200.0,
        "steps_per_second": 900.0,
        "curriculum": [{"opponents": ["minimax:depth=3"]}],
        "stopped_by_time_limit": True,
        "evaluations": [
            {"timestep": step, "scores": {"minimax:depth=4": 0.5 + seed / 10}} for step in STEPS
        ],
        "panel": {"minimax:depth=4": {"score": 0.6 + seed / 10}},
    }
    (out / "report.json").write_text(json.dumps(report))
    return out


def kept_record(curves: ModuleType, root: Path, seed: int, split: str = "test") -> Path:
    """The ``curves_SPLIT.json`` of a finished run of ``seed`` in ``root``, measured on ``split``
    (fixed points)."""
    out = finished_run(root, seed)
    curves.measure(seed, out, json.loads((out / "report.json").read_text()), split)
    return out / f"curves_{split}.json"


def run_main(module: ModuleType, monkeypatch: pytest.MonkeyPatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["selfplay_curves.py", *argv])
    module.main()


def test_a_measured_seed_is_written_and_read_back_unchanged(
    curves: ModuleType, tmp_path: Path
) -> None:
    out = finished_run(tmp_path, 3)
    record = curves.measure(3, out, json.loads((out / "report.json").read_text()), "test")
    read = curves.read_measured(out / "curves_test.json", "test")
    assert read == record
    assert read["panels"]["random"] == [(1000, 0.03), (2000, 0.03)]
    # the score: the periodic evaluations, the last replaced by the final panel's
    steps, scores = zip(*read["panels"]["minimax:depth=4"], strict=True)
    assert (steps, scores) == (STEPS, pytest.approx((0.8, 0.9)))
    assert read["final_stage"] == ["minimax:depth=3"]


def test_seeds_measured_elsewhere_join_the_figure_and_the_tables(
    curves: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = [kept_record(curves, tmp_path / "elsewhere", seed) for seed in (0, 1)]
    finished_run(tmp_path / "here", 2)
    figure, table = tmp_path / "curves.png", tmp_path / "curves.md"
    run_main(
        curves, monkeypatch,
        "--seeds", "2", "--root", str(tmp_path / "here"), "--figure", str(figure),
        "--table", str(table),
        "--measured", *map(str, elsewhere),
    )  # fmt: skip
    text = table.read_text()
    # random split: 0%, 1%, 2% at each step, their mean 1.0%, each seed in order
    assert "| 2,000 | 1.0% |" in text
    assert "| 0.0%, 1.0%, 2.0% |" in text
    # one run line per seed, in the order of their seeds
    assert [line.split("|")[1].strip() for line in text.splitlines()[2:5]] == ["0", "1", "2"]
    assert figure.stat().st_size > 0
    assert (tmp_path / "here" / "seed_2" / "curves_test.json").is_file()


def test_measured_files_alone_draw_the_figure_and_the_tables_with_no_run(
    curves: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--measured`` without ``--seeds``: the records are all there is; no seed is run or read."""
    kept = {seed: kept_record(curves, tmp_path / "kept", seed) for seed in (1, 3)}

    def no_run(seed: int, out: Path, train_args: list[str]) -> dict[str, Any]:
        raise AssertionError(f"seed {seed} was run or read")

    monkeypatch.setattr(curves, "run_seed", no_run)
    figure, table = tmp_path / "curves.png", tmp_path / "curves.md"
    run_main(
        curves, monkeypatch,
        "--root", str(tmp_path / "absent"), "--figure", str(figure), "--table", str(table),
        "--measured", str(kept[3]), str(kept[1]),
    )  # fmt: skip
    text = table.read_text()
    assert "| 2,000 | 2.0% |" in text  # the mean of 1% and 3% on the random split
    assert [line.split("|")[1].strip() for line in text.splitlines()[2:4]] == ["1", "3"]
    assert figure.stat().st_size > 0
    assert not (tmp_path / "absent").exists()


def test_a_seed_given_twice_is_refused(
    curves: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = kept_record(curves, tmp_path, 2)
    with pytest.raises(SystemExit, match="a seed comes twice"):
        run_main(curves, monkeypatch, "--seeds", "2", "--root", str(tmp_path),
                 "--measured", str(kept))  # fmt: skip


def test_a_measured_seed_that_a_smoke_run_would_replace_is_refused(
    curves: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--smoke`` runs seeds 0 and 1 whatever ``--seeds`` says: a measured seed 0 is refused
    before anything runs, not replaced by the tiny run's."""
    kept = kept_record(curves, tmp_path, 0)
    with pytest.raises(SystemExit, match="a seed comes twice"):
        run_main(curves, monkeypatch, "--smoke", "--seeds", "5",
                 "--measured", str(kept))  # fmt: skip


def test_curves_of_another_split_are_refused(curves: ModuleType, tmp_path: Path) -> None:
    kept = kept_record(curves, tmp_path, 0, "dev")
    with pytest.raises(SystemExit, match="measured on the dev split, not on the test split"):
        curves.read_measured(kept, "test")


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"seed": 0, "panels": {}}', '{"seed": 0}'])
def test_a_file_that_is_not_a_record_is_refused_in_one_line(
    curves: ModuleType, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "curves_test.json"
    path.write_text(text)
    with pytest.raises(SystemExit, match="is not a curves file of this script") as raised:
        curves.read_measured(path, "test")
    assert "\n" not in str(raised.value)
    with pytest.raises(SystemExit, match="is not a curves file"):
        curves.read_measured(tmp_path / "absent.json", "test")
