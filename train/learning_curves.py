"""The run's ``learning_curves.png``, drawn from its report (:mod:`connectx_train.finish`).

Up to three panels over training steps: the periodic panel scores (with the final panel's score
and 95% interval as a star), the training win rates per opponent, and the mistake rate against
perfect play on the labelled positions' dev split (with its 95% interval, and the final test-split
rate as a star) when the board has a shipped labelled set. Each opponent keeps one colour in every
panel; curriculum stages are dotted lines named by their opponents; legends sit right of the plots.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectx_gym.outputs import write_atomically

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MISTAKE_LABEL", "learning_curves_figure", "plot_learning_curves", "series_colours"]

#: the legend label of the periodic mistake-rate curve (``eval/mistake_rate_dev`` in TensorBoard)
MISTAKE_LABEL = "mistake rate (dev split)"
_MISTAKE_COLOUR = "black"


def series_colours(names: Iterable[str]) -> dict[str, Any]:
    """One colour per distinct name, in sorted order, from ``tab10`` (``tab20`` past ten names,
    cycling past twenty), so the same opponent has the same colour in every panel."""
    from matplotlib import colormaps

    ordered = sorted(set(names))
    palette = colormaps["tab10" if len(ordered) <= 10 else "tab20"]
    return {name: palette(index % palette.N) for index, name in enumerate(ordered)}


def learning_curves_figure(report: dict[str, Any]) -> Figure:
    """The figure of :func:`plot_learning_curves` (the caller closes it); each drawn series is
    a line labelled with its opponent, or :data:`MISTAKE_LABEL` for the mistake rate."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import StrMethodFormatter

    evaluations = report["evaluations"]
    curve = report["train_curve"]
    train_labels = sorted({key for point in curve for key in point} - {"timestep", "stage"})
    colours = series_colours([*report["panel"], *train_labels])
    perfect = report.get("perfect_play")
    has_mistakes = perfect is not None or any("mistake_rate" in e for e in evaluations)
    figure = Figure(figsize=(10, 9 if has_mistakes else 6.5), layout="constrained")
    axes = figure.subplots(3 if has_mistakes else 2, 1, sharex=True)
    scores, wins = axes[0], axes[1]

    for spec in report["panel"]:
        points = [(e["timestep"], e["scores"][spec]) for e in evaluations if spec in e["scores"]]
        if points:
            scores.plot(*zip(*points, strict=True), marker="o", color=colours[spec], label=spec)
        final = report["panel"][spec]
        low, high = final["ci95"]
        scores.errorbar(
            report["timesteps"],
            final["score"],
            yerr=[[final["score"] - low], [high - final["score"]]],
            marker="*",
            markersize=11,
            capsize=3,
            color=colours[spec],
            label=None if points else spec,
        )
    scores.set_ylabel("panel score\n(star: final panel, 95% CI)")
    scores.set_ylim(-0.02, 1.02)

    for label in train_labels:
        points = [(p["timestep"], p[label]) for p in curve if label in p]
        wins.plot(*zip(*points, strict=True), color=colours[label], label=label)
    wins.set_ylabel("training win rate")
    wins.set_ylim(-0.02, 1.02)

    if has_mistakes:
        _draw_mistake_rates(axes[2], evaluations, perfect, report["timesteps"])
    _mark_stages(axes, report["curriculum"])
    for axis in axes:
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[1]:
            axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("steps")
    axes[-1].set_xlim(left=0)
    axes[-1].xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    return figure


def _draw_mistake_rates(
    axis: Axes, evaluations: list[dict[str, Any]], perfect: dict[str, Any] | None, end: int
) -> None:
    """The periodic dev-split mistake rate with its 95% band where logged, and the final
    report's rate (the test split unless the run said otherwise) with its interval."""
    from matplotlib.ticker import PercentFormatter

    logged = [e for e in evaluations if "mistake_rate" in e]
    if logged:
        steps = [e["timestep"] for e in logged]
        axis.plot(
            steps,
            [e["mistake_rate"] for e in logged],
            marker="o",
            color=_MISTAKE_COLOUR,
            label=MISTAKE_LABEL,
        )
        banded = [e for e in logged if "mistake_ci95" in e]
        if banded:
            axis.fill_between(
                [e["timestep"] for e in banded],
                [e["mistake_ci95"][0] for e in banded],
                [e["mistake_ci95"][1] for e in banded],
                color=_MISTAKE_COLOUR,
                alpha=0.12,
                label="95% CI (dev split)",
            )
    if perfect is not None:
        overall = perfect["overall"]
        rate = overall["mistake_rate"]
        low, high = overall["mistake_ci95"]
        axis.errorbar(
            end,
            rate,
            yerr=[[rate - low], [high - rate]],
            marker="*",
            markersize=11,
            capsize=3,
            linestyle="none",
            color="tab:red",
            label=f"mistake rate ({perfect.get('split', 'test')} split, final)",
        )
    axis.set_ylabel("mistakes against\nperfect play")
    axis.set_ylim(bottom=0)
    axis.yaxis.set_major_formatter(PercentFormatter(1.0))


def _mark_stages(axes: Iterable[Axes], curriculum: list[dict[str, Any]]) -> None:
    """A dotted line at each curriculum stage's first step, named on the top panel by the
    stage's opponents."""
    axes = list(axes)
    top = axes[0]
    for stage in curriculum:
        step = stage["timestep"]
        if stage["stage"] > 0:
            for axis in axes:
                axis.axvline(step, color="grey", linestyle=":", linewidth=1)
        top.annotate(
            f"{stage['stage']}: {'+'.join(stage['opponents'])}",
            xy=(step, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(2, 3),
            textcoords="offset points",
            rotation=30,
            fontsize="small",
            color="dimgrey",
            va="bottom",
            ha="left",
        )


def plot_learning_curves(report: dict[str, Any], path: Path) -> None:
    """Write :func:`learning_curves_figure` of ``report`` to ``path`` as a PNG."""
    figure = learning_curves_figure(report)
    write_atomically(path, lambda temporary: figure.savefig(temporary, dpi=100, format="png"))
