"""``connectx accuracy --png``: the mistake rate against perfect play as bars with 95% intervals.

Labelled sets (the game split and the random split, or one labelled file) are drawn per phase:
one group of bars per phase (``opening``, ``early``, ``middle``, ``late``) and one for all
positions, one bar per set. Sets without phases (Pons' benchmark files) are drawn one bar per
set, in the result's order. Each bar is a :class:`~connectx_baselines.perfect_play.PhaseResult`'s
``mistake_rate`` with its Wilson ``mistake_ci95`` as the error bar, and its rate written above.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from connectx_baselines.perfect_play import PerfectPlayResult, PhaseResult, SetResults
from connectx_gym.outputs import write_atomically

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["mistake_rate_figure", "plot_mistake_rates"]

#: the group of all positions, after the phases
ALL = "all"


def _groups(result: PerfectPlayResult | SetResults) -> tuple[dict[str, PerfectPlayResult], str]:
    """The sets by name, and the plot's heading."""
    if isinstance(result, SetResults):
        about = f"{result.about}, seed {result.seed}"
        return dict(result.results), f"{result.policy} against perfect play ({about})"
    about = f"{result.split} split, seed {result.seed}"
    return {result.split: result}, f"{result.policy} against perfect play ({about})"


def _bars(
    sets: dict[str, PerfectPlayResult],
) -> tuple[list[str], dict[str, list[PhaseResult | None]], bool]:
    """The x-axis categories, per series the results drawn at each (None: no bar), and whether
    the categories are phases (else sets, one series)."""
    if all(result.phases for result in sets.values()):
        phases = list(dict.fromkeys(p for result in sets.values() for p in result.phases))
        series: dict[str, list[PhaseResult | None]] = {
            name: [*(result.phases.get(phase) for phase in phases), result.overall]
            for name, result in sets.items()
        }
        return [*phases, ALL], series, True
    return list(sets), {ALL: [result.overall for result in sets.values()]}, False


def mistake_rate_figure(result: PerfectPlayResult | SetResults) -> Figure:
    """The figure of :func:`plot_mistake_rates`: one bar container per series (a set, or
    ``"all"`` for Pons' sets), labelled with its name, each bar with its error bar."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure
    from matplotlib.ticker import PercentFormatter

    sets, title = _groups(result)
    categories, series, by_phase = _bars(sets)
    figure = Figure(
        figsize=(max(6.0, 2 + max(1.3, 0.8 * len(series)) * len(categories)), 4.5),
        layout="constrained",
    )
    axes = figure.subplots()
    width = 0.8 / len(series)
    palette = colormaps["tab10"]
    highest = 0.0
    for index, (name, found) in enumerate(series.items()):
        drawn = [(x, r) for x, r in enumerate(found) if r is not None and r.positions]
        if not drawn:
            continue
        xs = np.array([x for x, _ in drawn]) + (index - (len(series) - 1) / 2) * width
        rates = np.array([r.mistake_rate for _, r in drawn])
        bounds = np.array([r.mistake_ci95 for _, r in drawn])
        errors = np.clip(np.stack([rates - bounds[:, 0], bounds[:, 1] - rates]), 0, None)
        label = f"{name} ({sets[name].overall.positions} positions)" if by_phase else name
        axes.bar(xs, rates, width, label=label, color=palette(index % palette.N))
        axes.errorbar(xs, rates, yerr=errors, fmt="none", ecolor="black", capsize=3, lw=1)
        for x, rate, top in zip(xs, rates, bounds[:, 1], strict=True):
            axes.text(x, top, f"{rate:.1%}", ha="center", va="bottom", size=8)
        highest = max(highest, float(bounds[:, 1].max()))
    labels = categories
    if by_phase:  # all positions apart from the phases
        axes.axvline(len(categories) - 1.5, color="grey", linestyle=":", linewidth=1)
    if not by_phase:  # Pons' sets: the positions under each name
        labels = [f"{c}\n({sets[c].overall.positions})" for c in categories]
    axes.set_xticks(range(len(categories)), labels)
    axes.set_ylim(0, min(1.0, highest * 1.15 + 0.02))
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_ylabel("mistake rate (95% interval)")
    axes.set_xlabel("game phase" if by_phase else "set (positions)")
    axes.set_title(title, size=10)
    axes.grid(axis="y", alpha=0.3)
    if by_phase:
        figure.legend(loc="outside lower center", ncols=len(series), fontsize=8)
    return figure


def plot_mistake_rates(result: PerfectPlayResult | SetResults, path: str | Path) -> Path:
    """Write :func:`mistake_rate_figure` of ``result`` to ``path`` as a PNG (needs
    matplotlib); returns the path."""
    figure = mistake_rate_figure(result)
    return write_atomically(
        path, lambda temporary: figure.savefig(temporary, dpi=100, format="png")
    )
