"""The traversal sweep's figure: three log-log panels, one per experiment, with the fitted power laws.

Why apart from the sweep: a figure is drawn from saved rows (``traversal.csv``) as often as from a
fresh sweep, and drawing needs matplotlib but not torch. The figure is built on
``matplotlib.figure.Figure`` directly, never through pyplot, so no GUI backend or global state is
touched: a notebook displays it, ``savefig`` writes it, and nothing leaks between figures.
"""

from __future__ import annotations

from .fits import EXPERIMENTS, SYNTHETIC, LogLogFit, fit_sweep, medians
from ..formatting import short_duration

CLOCK_LABELS = {"wall": ("wall time per call (s)", "wall clock"),
                "cpu": ("thread CPU time per call (s)", "thread CPU time")}


def plot_sweep(rows, fits: dict[str, LogLogFit] | None = None, clock: str = "wall"):  # -> Figure
    """Three log-log panels (a) state_dict vs N, (b) baseline vs B·N, (c) optimized vs N + B.

    Synthetic medians are coloured by B with min-max bars over the repeats, the fitted line is
    dashed, and each real model (Token2Wav) is a star.
    """
    from matplotlib.figure import Figure

    fits = fits if fits is not None else fit_sweep(rows, clock)
    med = medians(rows, clock)
    b_values = sorted(med[med.source == SYNTHETIC].B.unique())
    colours = {b: f"C{i % 10}" for i, b in enumerate(b_values)}  # one colour per B across the panels
    fig = Figure(figsize=(16, 5.2), layout="constrained")
    for ax, exp, letter in zip(fig.subplots(1, 3), EXPERIMENTS, "abc"):
        draw_panel(ax, med[med.experiment == exp], fits.get(exp), colours)
        what, xlabel = EXPERIMENTS[exp]
        ax.set_xlabel(xlabel)
        ax.set_ylabel(CLOCK_LABELS[clock][0])
        ax.set_title(f"({letter}) {what}", fontsize=10)
    fig.suptitle(f"What module traversal costs ({CLOCK_LABELS[clock][1]}): "
                 "medians of repeats, log-log, with fitted power laws")
    return fig


def draw_panel(ax, med, fit: LogLogFit | None, colours: dict[int, str]) -> None:
    """One experiment's medians on ``ax``: synthetic points by B with min-max bars, the fit, real models as stars."""
    import numpy as np

    synth = med[med.source == SYNTHETIC]
    for b in sorted(synth.B.unique()):
        sub = synth[synth.B == b].sort_values("x")
        yerr = np.vstack([sub["median"] - sub["min"], sub["max"] - sub["median"]])
        ax.errorbar(sub.x, sub["median"], yerr=yerr, fmt="o", ms=5, capsize=2, color=colours[b],
                    label=f"synthetic tree, B = {b}")
    if fit:
        xs = np.geomspace(fit.x_min, fit.x_max, 50)
        ax.plot(xs, fit.predict(xs), "k--", lw=1.2, label=f"fit: slope {fit.slope:.3f}, R² {fit.r2:.4f}")
    for rec in med[med.source != SYNTHETIC].itertuples(index=False):
        ax.plot([rec.x], [rec.median], marker="*", ms=16, color="crimson", mec="black", ls="none",
                label=f"{rec.source} (N={rec.N}, B={rec.B}): {short_duration(rec.median)}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
