"""The traversal sweep's figure: three log-log panels, one per experiment, with the fitted power laws.

Why apart from the sweep: a figure is drawn from saved rows (``traversal.csv``) as often as from a
fresh sweep, and drawing needs matplotlib but not torch (imported when a figure is drawn). The figure
is a :class:`~omni_loader.reporting.figures.ShownFigure`, built without pyplot, so no GUI backend or global state is
touched: a notebook displays it, ``savefig`` writes it, and nothing leaks between figures.
"""

from __future__ import annotations

from .fits import EXPERIMENTS, SYNTHETIC, LogLogFit, fit_sweep, medians
from ..formatting import short_duration

CLOCK_LABELS = {"wall": ("wall time per call", "wall clock"),
                "cpu": ("thread CPU time per call", "thread CPU time")}


def plot_sweep(rows, fits: dict[str, LogLogFit] | None = None, clock: str = "wall"):  # -> ShownFigure
    """Three log-log panels (a) state_dict vs N, (b) baseline vs B·N, (c) optimized vs N + B, and a
    fourth that holds the legend of the colours.

    Synthetic medians are coloured by B with min-max bars over the repeats, the fitted line is
    dashed, and each real model (Token2Wav) is a star. Two by two and about 1,000 pixels wide, so a
    notebook shows it at its own size (three panels in a row were shrunk to 62%, the legends to
    about 5 px); times on the axes read as times (``10 µs``, ``1 ms``), never as ``10⁻⁵``.
    """
    from matplotlib.lines import Line2D

    from ..reporting.figures import ShownFigure

    fits = fits if fits is not None else fit_sweep(rows, clock)
    med = medians(rows, clock)
    b_values = sorted(med[med.source == SYNTHETIC].B.unique())
    colours = {b: f"C{i % 10}" for i, b in enumerate(b_values)}  # one colour per B across the panels
    fig = ShownFigure(figsize=(7.6, 6.6), layout="constrained")
    axes = fig.subplots(2, 2).flat
    for ax, exp, letter in zip(axes, EXPERIMENTS, "abc"):
        draw_panel(ax, med[med.experiment == exp], fits.get(exp), colours)
        what, xlabel = EXPERIMENTS[exp]
        ax.set_xlabel(xlabel, fontsize=8.5)
        ax.set_ylabel(CLOCK_LABELS[clock][0], fontsize=8.5)
        ax.set_title(f"({letter}) {what}", fontsize=9.5)
    key = list(fig.axes)[3]
    key.axis("off")
    key.legend(handles=[Line2D([], [], marker="o", ls="none", color=colours[b], label=f"synthetic tree, B = {b}")
                        for b in b_values], loc="center", fontsize=8.5, title="medians of the repeats, min–max bars",
               title_fontsize=8.5, frameon=False)
    fig.suptitle(f"What module traversal costs ({CLOCK_LABELS[clock][1]}), log-log, with fitted power laws",
                 fontsize=10.5)
    return fig


def draw_panel(ax, med, fit: LogLogFit | None, colours: dict[int, str]) -> None:
    """One experiment's medians on ``ax``: synthetic points by B with min-max bars, the fit, real models as stars.

    The colours of B are explained once, by the figure; each panel's legend names its fit and stars."""
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
                label=f"{rec.source} (N={rec.N:,}, B={rec.B}): {short_duration(rec.median)}")
    log_axis(ax, "x")
    log_axis(ax, "y", short_duration)
    ax.tick_params(labelsize=7.5)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
