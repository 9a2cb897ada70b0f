"""Plots of saved results: every run as a point, medians and spread, where the time goes.

Rendered from the rows in runs.csv (and the comparisons derived from them), as PNG and SVG under
``plots/``. Nothing here measures anything.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

from .formatting import number, short_duration, times  # noqa: E402
from .stats import Comparison, measured, phase_summary  # noqa: E402

COLORS = {"baseline": "#d1495b", "optimized": "#00798c"}
VARIANTS = ("baseline", "optimized")


def _save(fig: Any, directory: Path, stem: str) -> list[Path]:
    """PNG and SVG of ``fig``, and beside them ``<stem>.csv``: the values drawn, read back from its artists."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{stem}.png", directory / f"{stem}.svg"]
    for p in paths:
        fig.savefig(p, dpi=130 if p.suffix == ".png" else None, bbox_inches="tight")
    paths.append(write_figure_data(fig, directory / f"{stem}.csv"))
    plt.close(fig)
    return paths


FIGURE_DATA_COLUMNS = ("panel", "title", "xlabel", "ylabel", "kind", "label", "x", "y", "width", "height", "value",
                       "text")


def figure_data(fig: Any) -> list[dict[str, Any]]:
    """What a figure shows, one row per drawn value, read from its artists (not from the data behind them).

    ``kind`` is ``bar`` (x, y, width, height of the rectangle; ``value`` its length), ``point`` (a
    scatter point), ``line`` (a vertex of a line; ``text`` its marker), ``text`` (an annotation at
    x, y), ``xtick`` or ``ytick`` (a category's tick label at its position). Values are in the plotted unit
    (see ``ylabel`` / ``xlabel``); ``panel`` numbers the axes in the figure's order.
    """
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.text import Annotation

    rows: list[dict[str, Any]] = []
    for panel, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        base = {"panel": panel, "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel()}

        def add(kind: str, label: Any = "", **values: Any) -> None:
            shown = isinstance(label, str) and not label.startswith("_")  # "_child3": matplotlib's, not a label
            rows.append({**base, "kind": kind, "label": label if shown else "", **values})

        for container in ax.containers:
            if isinstance(container, BarContainer):
                for patch, value in zip(container.patches, container.datavalues):
                    add("bar", container.get_label(), x=patch.get_x(), y=patch.get_y(), width=patch.get_width(),
                        height=patch.get_height(), value=float(value))
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                for x, y in collection.get_offsets():
                    add("point", collection.get_label(), x=float(x), y=float(y))
        for line in ax.lines:
            for x, y in zip(line.get_xdata(), line.get_ydata()):
                add("line", line.get_label(), x=float(x), y=float(y), text=str(line.get_marker()))
        for t in ax.texts:
            x, y = t.xy if isinstance(t, Annotation) else t.get_position()
            add("text", x=float(x), y=float(y), text=t.get_text())
        for kind, axis in (("xtick", ax.xaxis), ("ytick", ax.yaxis)):
            for pos, lab in zip(axis.get_ticklocs(), axis.get_ticklabels()):
                if _is_category(lab.get_text()):  # a named category, not a number on a scale
                    add(kind, **{kind[0]: float(pos)}, text=lab.get_text())
    return rows


def _is_category(text: str) -> bool:
    if not text or text.startswith("$"):  # mathtext: a scale's number (10^2)
        return False
    try:
        float(text.replace("\u2212", "-"))
    except ValueError:
        return True
    return False


def write_figure_data(fig: Any, path: Path) -> Path:
    import csv

    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIGURE_DATA_COLUMNS)
        writer.writeheader()
        writer.writerows({c: ("" if row.get(c) is None else row.get(c)) for c in FIGURE_DATA_COLUMNS}
                         for row in figure_data(fig))
    return path


_plain = matplotlib.ticker.FuncFormatter(lambda value, _pos: number(value))


def _unit(values: list[float]) -> tuple[float, str]:
    top = max(values) if values else 0
    return (1.0, "s") if top >= 10 else (1e3, "ms")


def plot_phase_runs(frame, comps: list[Comparison], directory: Path) -> list[Path]:
    """One panel per timed phase: each run as a point, the median as a bar, min–max as a whisker."""
    timed = [c for c in comps if c.unit == "s"]
    if not timed:
        return []
    cols = 3
    rows = math.ceil(len(timed) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for ax, c in zip(axes.flat, timed):
        scale, unit = _unit([*c.baseline.samples, *c.optimized.samples])
        for i, s in enumerate((c.baseline, c.optimized)):
            color = COLORS[s.variant]
            xs = [i + 0.08 * ((k % 5) - 2) for k in range(s.n)]
            ax.scatter(xs, [v * scale for v in s.samples], color=color, alpha=0.75, s=22, zorder=3,
                       label=f"{s.variant} runs")
            ax.errorbar([i + 0.3], [s.median * scale],
                        yerr=[[(s.median - s.min) * scale], [(s.max - s.median) * scale]],
                        fmt="D", color=color, capsize=4, markersize=6, zorder=4)
            ax.annotate(short_duration(s.median), (i + 0.38, s.median * scale), fontsize=8, va="center")
        if c.optimized.median > 0 and c.ratio > 10:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(_plain)  # 10, 100 rather than 10¹, 10²
            ax.set_title(f"{c.phase}\n{times(c.ratio)} faster (log scale)", fontsize=10)
        else:
            ax.set_title(f"{c.phase}\n{c.change()}", fontsize=10)
        ax.set_xticks([0, 1], list(VARIANTS))
        ax.set_xlim(-0.5, 1.8)
        ax.set_ylabel(f"time ({unit})")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(timed):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], marker="o", ls="", color=COLORS[v], label=f"{v}: runs") for v in VARIANTS]
    handles.append(plt.Line2D([], [], marker="D", ls="-", color="gray", label="median with min–max"))
    fig.legend(handles=handles, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.02))
    fig.suptitle("Every measured run per phase: median and min–max spread", fontsize=13)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return _save(fig, directory, "phases")


def plot_where_time_goes(frame, directory: Path) -> list[Path]:
    """Stacked bars of leaf-phase medians per variant: where the load time goes.

    The bar is the sum of the phase medians, which is not the median of the whole load: medians do
    not add up (the run with the median total need not have the median of every phase), and the
    clock also runs between phases. So the whole load's median is marked on each bar as a tick and
    both figures are written out, instead of leaving a reader to wonder why the bar and the table
    disagree.
    """
    from .loader import LEAF_PHASES

    medians = {v: [phase_summary(frame, v, p).median for p in LEAF_PHASES] for v in VARIANTS}
    if all(math.isnan(x) for v in medians.values() for x in v):
        return []
    totals = {v: phase_summary(frame, v, "total").median for v in VARIANTS}
    values = [x for v in medians.values() for x in v if not math.isnan(x)]
    scale, unit = _unit([sum(values), *[t for t in totals.values() if not math.isnan(t)]])
    fig, ax = plt.subplots(figsize=(9, 3.8))
    cmap = plt.get_cmap("tab10")
    widest = 0.0
    for j, variant in enumerate(VARIANTS):
        left = 0.0
        for k, (phase, med) in enumerate(zip(LEAF_PHASES, medians[variant])):
            if math.isnan(med):
                continue
            ax.barh(j, med * scale, left=left, color=cmap(k), edgecolor="white",
                    label=phase if j == 0 else None)
            left += med * scale
        total = totals[variant]
        label = f"Σ phases {short_duration(left / scale)}"
        end = left
        if not math.isnan(total):
            ax.plot([total * scale] * 2, [j - 0.42, j + 0.42], color="black", lw=1.6, zorder=5)
            label += f"\nwhole load {short_duration(total)}"
            end = max(end, total * scale)
        ax.annotate(label, (end, j), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
        widest = max(widest, end)
    ax.set_xlim(0, widest * 1.3)  # room for the labels inside the frame
    ax.set_yticks(range(len(VARIANTS)), list(VARIANTS))
    ax.set_xlabel(f"median time ({unit})")
    ax.set_title("Where the Token2Wav load time goes (median of each phase)")
    handles, names = ax.get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="black", lw=1.6))
    names.append("median whole load")
    ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=5, fontsize=8)
    ax.text(0.0, -0.4, "The bar adds the median of each phase; the tick is the median of the whole load. They differ "
            "because medians\ndo not add up (the run with the median total need not have the median of every phase) and "
            "the clock also runs between phases.", fontsize=7.5, color="#444", va="top", transform=ax.transAxes)
    ax.invert_yaxis()
    return _save(fig, directory, "where_time_goes")


def plot_ratios(comps: list[Comparison], reference: dict[str, Any], directory: Path) -> list[Path]:
    """Baseline/optimized ratio of each PR measurement: this run beside the PR's."""
    mine = {c.phase: c for c in comps if c.unit == "s"}
    refs = [r for r in reference["measurements"] if r["unit"] == "s" and r["measurement"] in mine]
    if not refs:
        return []
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.38
    for i, r in enumerate(refs):
        pr = r["baseline"] / r["optimized"]
        ours = mine[r["measurement"]].ratio
        for dx, value, color, label in ((-width / 2, pr, "#8d96a3", "PR (MI300X, ROCm)"),
                                        (width / 2, ours, "#00798c", "this run")):
            ax.bar(i + dx, value, width, color=color, label=label if i == 0 else None)
            ax.annotate(times(value), (i + dx, value), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_plain)
    drawn = [v for r in refs for v in (r["baseline"] / r["optimized"], mine[r["measurement"]].ratio) if v > 0]
    # 1x (no change) stays in view; room for the labels and the legend above the tallest bar
    ax.set_ylim(min(0.7, min(drawn, default=1.0) * 0.7), max(max(drawn, default=1.0), 1.0) * 4)
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(range(len(refs)), [r["label"] for r in refs])
    ax.set_ylabel("baseline / optimized (median ratio, log)")
    ax.set_title("Speed-up of the optimized loader: this run against the PR")
    ax.legend(loc="upper right")
    return _save(fig, directory, "ratios_vs_pr")


DRIFT_PHASES = ("total", "weight_loading")


def plot_drift(frame, directory: Path) -> list[Path]:
    """A phase's seconds against run order (warm-ups hollow): a drift over the benchmark shows as a slope.

    Run order is the plan's (run_id); the per-run wall-clock stamps (run_started) order them the same.
    """
    if frame.empty or "source" not in frame:
        return []
    rows = frame[(frame["source"] == "load") & (frame["status"] == "ok") & frame["phase"].isin(DRIFT_PHASES)]
    phases = [p for p in DRIFT_PHASES if (rows["phase"] == p).any()]
    if not phases:
        return []
    fig, axes = plt.subplots(1, len(phases), figsize=(5.5 * len(phases), 3.4), squeeze=False)
    for ax, phase in zip(axes.flat, phases):
        of_phase = rows[rows["phase"] == phase]
        scale, unit = _unit(list(of_phase["seconds"]))
        for variant, runs in of_phase.groupby("variant", sort=False):
            runs = runs.sort_values("run_id")
            color = COLORS.get(str(variant))
            ax.plot(runs["run_id"], runs["seconds"] * scale, color=color, alpha=0.35, lw=1, label="_line")
            for warm, part in runs.groupby("warmup"):
                ax.scatter(part["run_id"], part["seconds"] * scale, s=24, zorder=3, color=color,
                           facecolors="none" if warm else color,
                           label=f"{variant} warm-up" if warm else f"{variant}")
        ax.set_title(f"{phase}: seconds against run order", fontsize=10)
        ax.set_xlabel("run (plan order; warm-ups hollow)")
        ax.set_ylabel(f"time ({unit})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, directory, "drift")


def write_plots(directory: str | Path, frame, comps: list[Comparison], reference: dict[str, Any]) -> list[Path]:
    """All plots of one results directory, under ``plots/``."""
    out = Path(directory) / "plots"
    if measured(frame).empty:
        return []
    return [*plot_phase_runs(frame, comps, out), *plot_where_time_goes(frame, out),
            *plot_ratios(comps, reference, out), *plot_drift(frame, out)]
