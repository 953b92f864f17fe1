"""``connectx accuracy --png``: bars of the mistake rates with their 95% intervals, per phase and
set (labelled sets) or per set (Pons' files)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from connectx_baselines.perfect_play import PerfectPlayResult, PhaseResult, SetResults
from connectx_gym.cli import main
from tests.baselines.test_accuracy_command import accuracy, write_pons

PNG = b"\x89PNG\r\n\x1a\n"
PHASES = ("opening", "early", "middle", "late")


def phase(positions: int, mistakes: int) -> PhaseResult:
    return PhaseResult(positions, mistakes, positions - mistakes, positions)


def labelled(split: str, mistakes: list[int]) -> PerfectPlayResult:
    phases = {name: phase(100, count) for name, count in zip(PHASES, mistakes, strict=True)}
    return PerfectPlayResult("agent", split, 0, phases, phase(400, sum(mistakes)))


def drawn_bars(result: PerfectPlayResult | SetResults) -> dict[str, tuple[list[float], list[str]]]:
    """Per legend label: the bars' heights and the x-axis labels under them."""
    from connectx_baselines.accuracy_plot import mistake_rate_figure

    figure = mistake_rate_figure(result)
    axes = figure.axes[0]
    ticks = {round(t, 6): label.get_text() for t, label in zip(
        axes.get_xticks(), axes.get_xticklabels(), strict=True)}  # fmt: skip
    bars = {}
    for container in axes.containers:
        if not hasattr(container, "patches"):
            continue  # the error bars
        heights = [patch.get_height() for patch in container.patches]
        centres = [round(patch.get_x() + patch.get_width() / 2) for patch in container.patches]
        bars[container.get_label()] = (heights, [ticks[c] for c in centres])
    return bars


def test_labelled_sets_are_drawn_per_phase_side_by_side() -> None:
    pytest.importorskip("matplotlib")
    games, random = labelled("test", [20, 10, 30, 5]), labelled("test", [8, 4, 2, 0])
    bars = drawn_bars(SetResults("agent", 0, {"games": games, "random": random}, "test split"))
    assert list(bars) == ["games (400 positions)", "random (400 positions)"]
    heights, under = bars["games (400 positions)"]
    assert under == [*PHASES, "all"]
    np.testing.assert_allclose(heights, [0.2, 0.1, 0.3, 0.05, 65 / 400])
    heights, _ = bars["random (400 positions)"]
    np.testing.assert_allclose(heights, [0.08, 0.04, 0.02, 0.0, 14 / 400])


def test_error_bars_are_the_wilson_intervals() -> None:
    pytest.importorskip("matplotlib")
    from connectx_baselines.accuracy_plot import mistake_rate_figure

    result = labelled("dev", [20, 10, 30, 5])
    axes = mistake_rate_figure(result).axes[0]
    (_, _, (segments,)) = next(c for c in axes.containers if not hasattr(c, "patches"))
    expected = [result.phases[p].mistake_ci95 for p in PHASES] + [result.overall.mistake_ci95]
    np.testing.assert_allclose(
        [sorted(y for _, y in segment) for segment in segments.get_segments()], expected
    )


def test_pons_sets_are_one_bar_each_in_their_order() -> None:
    pytest.importorskip("matplotlib")
    sets = {
        "End-Easy": PerfectPlayResult("agent", "pons", 0, {}, phase(50, 1)),
        "Middle-Easy": PerfectPlayResult("agent", "pons", 0, {}, phase(40, 10)),
    }
    bars = drawn_bars(SetResults("agent", 0, sets, "Pons' sets"))
    assert len(bars) == 1
    ((heights, under),) = bars.values()
    np.testing.assert_allclose(heights, [0.02, 0.25])
    assert under == ["End-Easy\n(50)", "Middle-Easy\n(40)"]


def test_accuracy_png_of_the_two_splits(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "accuracy.png"
    code, out, err = accuracy(capsys, "onestep", "--split", "dev", "--png", str(png))
    assert code == 0, err
    assert "| phase |" in out  # the table is still printed
    data = png.read_bytes()
    assert data[:8] == PNG
    assert len(data) > 10_000
    assert [p.name for p in tmp_path.iterdir()] == ["accuracy.png"]  # no temporary left


def test_accuracy_png_of_a_pons_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    write_pons(tmp_path / "Test_L2_R1", ["44455554221", "3333444"])
    write_pons(tmp_path / "Test_L3_R1", ["1234567712345", "3333444"])
    png = tmp_path / "pons.png"
    code, _, err = accuracy(capsys, "random", "--pons", str(tmp_path), "--png", str(png))
    assert code == 0, err
    data = png.read_bytes()
    assert data[:8] == PNG
    assert len(data) > 5_000


def test_accuracy_png_errors_come_before_the_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = main(["accuracy", "onestep", "--png", str(tmp_path / "missing" / "a.png")])
    captured = capsys.readouterr()
    assert code != 0
    assert captured.out == ""
    assert "missing" in captured.err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    code = main(["accuracy", "onestep", "--png", str(tmp_path / "a.png")])
    captured = capsys.readouterr()
    assert code != 0
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [captured.err.strip()]
    assert "connectx-gym[train]" in captured.err
