"""learning_curves.png: one colour per opponent across panels, the mistake rate against perfect
play with its interval, curriculum stages named, legends outside the plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from connectx_train.learning_curves import (
    MISTAKE_LABEL,
    learning_curves_figure,
    plot_learning_curves,
    series_colours,
)

PANEL = ("random", "onestep", "alphabeta:depth=4")


def synthetic_report(*, mistakes: bool = True) -> dict[str, Any]:
    evaluations = [
        {
            "timestep": step,
            "scores": {spec: step / 4000 for spec in PANEL},
            **(
                {"mistake_rate": 0.4 - step / 1e4, "mistake_ci95": [0.3 - step / 1e4, 0.5]}
                if mistakes
                else {}
            ),
        }
        for step in (1000, 2000, 3000)
    ]
    return {
        "timesteps": 3072,
        "evaluations": evaluations,
        "train_curve": [
            {"timestep": step, "stage": 0, "random": 0.6, "self": 0.5} for step in (512, 1024)
        ]
        + [{"timestep": 2048, "stage": 1, "onestep": 0.3, "self": 0.5}],
        "panel": {spec: {"score": 0.5, "ci95": [0.4, 0.6]} for spec in PANEL},
        "perfect_play": (
            {"overall": {"mistake_rate": 0.2, "mistake_ci95": [0.15, 0.25]}} if mistakes else None
        ),
        "curriculum": [
            {"stage": 0, "timestep": 0, "opponents": ["random"]},
            {"stage": 1, "timestep": 1536, "opponents": ["random", "onestep"]},
        ],
    }


def line_colours(axis: Any) -> dict[str, Any]:
    """Colour of each labelled line of ``axis`` (matplotlib names unlabelled ones ``_...``)."""
    return {
        line.get_label(): line.get_color()
        for line in axis.get_lines()
        if not line.get_label().startswith("_")
    }


def test_each_opponent_has_one_colour_in_every_panel_and_none_repeats() -> None:
    figure = learning_curves_figure(synthetic_report())
    scores, wins = line_colours(figure.axes[0]), line_colours(figure.axes[1])
    assert set(scores) == set(PANEL)
    assert set(wins) == {"random", "onestep", "self"}
    for name in set(scores) & set(wins):
        assert scores[name] == wins[name], name
    named = scores | wins
    assert len({tuple(colour) for colour in named.values()}) == len(named)


def test_more_than_ten_series_take_tab20_distinct_colours() -> None:
    names = [f"opponent{index}" for index in range(15)]
    colours = series_colours(names)
    assert len({tuple(colour) for colour in colours.values()}) == 15
    assert series_colours(reversed(names)) == colours


def test_the_mistake_rate_has_its_panel_with_its_interval() -> None:
    figure = learning_curves_figure(synthetic_report())
    assert len(figure.axes) == 3
    mistakes = figure.axes[2]
    labels = mistakes.get_legend_handles_labels()[1]
    assert MISTAKE_LABEL in labels
    assert "95% CI (dev split)" in labels
    assert "mistake rate (test split, final)" in labels
    (line,) = [line for line in mistakes.get_lines() if line.get_label() == MISTAKE_LABEL]
    assert np.asarray(line.get_ydata(), dtype=float).tolist() == pytest.approx([0.3, 0.2, 0.1])


def test_the_final_rate_is_labelled_with_the_split_the_report_read() -> None:
    report = synthetic_report()
    report["perfect_play"]["split"] = "dev"  # connectx train --report-split dev
    labels = learning_curves_figure(report).axes[2].get_legend_handles_labels()[1]
    assert "mistake rate (dev split, final)" in labels
    assert "mistake rate (test split, final)" not in labels


def test_a_board_without_labelled_positions_has_two_panels() -> None:
    figure = learning_curves_figure(synthetic_report(mistakes=False))
    assert len(figure.axes) == 2


def test_stages_are_named_and_legends_sit_outside_the_plots() -> None:
    figure = learning_curves_figure(synthetic_report())
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert texts == ["0: random", "1: random+onestep"]
    for axis in figure.axes:
        legend = axis.get_legend()
        assert legend is not None
        figure.canvas.draw()
        assert legend.get_window_extent().x0 >= axis.get_window_extent().x1


def test_the_png_is_written(tmp_path: Path) -> None:
    path = tmp_path / "learning_curves.png"
    plot_learning_curves(synthetic_report(), path)
    assert path.read_bytes().startswith(b"\x89PNG")
