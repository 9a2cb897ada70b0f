"""The traversal sweep's figure: three log-log panels, one per experiment, with the fitted power laws.

Apart from the sweep, since a figure is drawn from saved rows as often as from a fresh sweep, without torch.
"""

from __future__ import annotations

from .fits import EXPERIMENTS, SYNTHETIC, LogLogFit, fit_sweep, medians, source_words
from ..formatting import short_duration

CLOCK_LABELS = {"wall": ("wall time per call", "wall clock"),
                "cpu": ("thread CPU time per call", "thread CPU time")}
# Points: at the notebook's ~770 px of the figure's 130 dpi PNG a tick label reads about 10 px high, a legend 11
TICK_PT, LEGEND_PT, LABEL_PT, TITLE_PT, SUPTITLE_PT = 10, 10, 11, 12, 13


def plot_sweep(rows, fits: dict[str, LogLogFit] | None = None, clock: str = "wall"):  # -> ShownFigure
    """Three log-log panels (a) state_dict vs N, (b) baseline vs B·N, (c) optimized vs N + B, and a
    fourth that holds the legend of the colours; two by two, so a notebook shows it at its own size.
    """
    from matplotlib.lines import Line2D

    from ..reporting.figures import ShownFigure

    fits = fits if fits is not None else fit_sweep(rows, clock)
    med = medians(rows, clock)
    b_values = sorted(med[med.source == SYNTHETIC].B.unique())
    colours = {b: f"C{i % 10}" for i, b in enumerate(b_values)}  # one colour per B across the panels
    fig = ShownFigure(figsize=(9.4, 7.8), layout="constrained")
    *panels, key = fig.subplots(2, 2).flat
    for ax, exp, letter in zip(panels, EXPERIMENTS, "abc"):
        draw_panel(ax, med[med.experiment == exp], fits.get(exp), colours)
        what, xlabel = EXPERIMENTS[exp]
        ax.set_xlabel(xlabel, fontsize=LABEL_PT)
        ax.set_ylabel(CLOCK_LABELS[clock][0], fontsize=LABEL_PT)
        ax.set_title(f"({letter}) {what}", fontsize=TITLE_PT)
    key.axis("off")
    key.legend(handles=[Line2D([], [], marker="o", ls="none", color=colours[b], label=f"synthetic tree, B = {b}")
                        for b in b_values], loc="center", fontsize=LEGEND_PT, title="medians of the repeats, min–max bars",
               title_fontsize=LEGEND_PT, frameon=False)
    fig.suptitle(f"What module traversal costs ({CLOCK_LABELS[clock][1]}), log-log, with fitted power laws",
                 fontsize=SUPTITLE_PT)
    for ax in panels:
        clear_legend(ax)
    return fig


def clear_legend(ax, margin: float = 0.04) -> None:
    """Raise the top of ``ax``'s log y axis until every point and bar lies below its legend (upper left)."""
    import math

    legend = ax.get_legend()
    if legend is None or not ax.has_data():
        return
    for _ in range(3):  # the layout settles the legend's height in axes units; twice or three times suffices
        ax.figure.canvas.draw()
        bottom = legend.get_window_extent().transformed(ax.transAxes.inverted()).y0 - margin
        lo, hi = (math.log10(v) for v in ax.get_ylim())
        top = math.log10(max(v for line in ax.get_lines() for v in line.get_ydata() if v > 0))
        for c in ax.collections:  # the min-max bars
            for seg in getattr(c, "get_segments", lambda: [])():
                top = max([top, *(math.log10(y) for _, y in seg if y > 0)])
        if (top - lo) <= bottom * (hi - lo) or bottom <= 0.2:
            return
        ax.set_ylim(10 ** lo, 10 ** (lo + (top - lo) / bottom))


def tick_duration(seconds: float) -> str:
    """A time axis's tick label: seconds from 1 s on, so decades never read "1,000 ms", else :func:`short_duration`."""
    return short_duration(seconds, "s" if abs(seconds) >= 1 else None)


def draw_panel(ax, med, fit: LogLogFit | None, colours: dict[int, str]) -> None:
    """One experiment's medians on ``ax``: synthetic points by B with min-max bars, the fit, real models as stars."""
    import numpy as np

    from ..reporting.figures import log_axis

    synth = med[med.source == SYNTHETIC]
    for b in sorted(synth.B.unique()):
        sub = synth[synth.B == b].sort_values("x")
        yerr = np.vstack([sub["median"] - sub["min"], sub["max"] - sub["median"]])
        ax.errorbar(sub.x, sub["median"], yerr=yerr, fmt="o", ms=4, capsize=2, color=colours[b],
                    label=f"_synthetic tree, B = {b}")
    if fit:
        xs = np.geomspace(fit.x_min, fit.x_max, 50)
        ax.plot(xs, fit.predict(xs), "k--", lw=1.2, label=f"fit: slope {fit.slope:.3f}, R² {fit.r2:.4f}")
    for rec in med[med.source != SYNTHETIC].itertuples(index=False):
        ax.plot([rec.x], [rec.median], marker="*", ms=14, color="crimson", mec="black", ls="none",
                label=f"{source_words(rec.source)}: {short_duration(rec.median)}\n"
                      f"(N = {rec.N:,}, B = {rec.B})")  # 2 lines: inside
    log_axis(ax, "x")
    log_axis(ax, "y", tick_duration)
    ax.tick_params(labelsize=TICK_PT)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=LEGEND_PT, loc="upper left")
