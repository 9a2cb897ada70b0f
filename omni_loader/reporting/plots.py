"""Plots of saved results: every run as a point, medians and spread, where the time goes, ratios.

Each function builds a :class:`~omni_loader.reporting.figures.ShownFigure` from rows of runs.csv, or returns
None when there is nothing to draw; nothing here writes. Time axes follow :func:`omni_loader.formatting.time_unit`.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import matplotlib
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from .figures import ShownFigure, log_axis
from ..formatting import TIME_SCALE, count, number, short_duration, time_unit, times
from .measurements import label
from ..names import LEAF_PHASES, VARIANTS
from .stats import Comparison, measured, phase_summary, ratio_interval

COLORS = {"baseline": "#d1495b", "optimized": "#00798c"}
DRIFT_PHASES = ("total", "weight_loading")


def _scale(values: list[float]) -> tuple[float, str]:
    """The factor from seconds to the axis unit, and the unit, for an axis drawing ``values`` (seconds)."""
    unit = time_unit(values)
    return TIME_SCALE[unit], unit


def phases_figure(comps: list[Comparison]) -> ShownFigure | None:
    """One panel per timed phase: each run as a point, the median as a bar, min–max as a whisker."""
    timed = _timed(comps)
    if timed is None:
        return None
    cols = 3
    rows = math.ceil(len(timed) / cols)
    # shown about as wide as it is drawn (Lab's output area is ~1,000 px)
    fig = ShownFigure(figsize=(3.3 * cols, 2.9 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, c in zip(axes.flat, timed):
        scale, unit = _scale([*c.baseline.samples, *c.optimized.samples])
        for i, s in enumerate((c.baseline, c.optimized)):
            color = COLORS[s.variant]
            xs = [i + 0.08 * ((k % 5) - 2) for k in range(s.n)]
            ax.scatter(xs, [v * scale for v in s.samples], color=color, alpha=0.75, s=22, zorder=3,
                       label=f"{s.variant} runs")
            ax.errorbar([i + 0.3], [s.median * scale],
                        yerr=[[(s.median - s.min) * scale], [(s.max - s.median) * scale]],
                        fmt="D", color=color, capsize=4, markersize=6, zorder=4)
            # in the axis' unit: a label "140 µs" beside an axis in ms made a reader convert
            ax.annotate(f"{number(s.median * scale)} {unit}", (i + 0.38, s.median * scale), fontsize=8, va="center")
        name = textwrap.fill(label(c.phase), 34)
        if c.optimized.median > 0 and c.ratio > 10:
            log_axis(ax, "y")
            ax.set_title(f"{name}\n{times(c.ratio)} faster (log scale)", fontsize=9)
        else:  # the PR's phrasing says "faster" of any difference: where the kit claims none, the title says so
            ax.set_title(f"{name}\n{c.change()}{'' if c.unit != 's' or c.differs() else ' (no claim)'}", fontsize=9)
        ax.set_xticks([0, 1], list(VARIANTS))
        ax.set_xlim(-0.5, 2.05)  # room for the optimized median's label ("3.06 ms") inside the frame
        ax.set_ylabel(f"time ({unit})")
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(timed):]:
        ax.axis("off")
    handles = [Line2D([], [], marker="o", ls="", color=COLORS[v], label=f"{v}: runs") for v in VARIANTS]
    handles.append(Line2D([], [], marker="D", ls="-", color="gray", label="median with min–max"))
    fig.legend(handles=handles, loc="lower center", ncol=3, bbox_to_anchor=(0.5, -0.02))
    calls = next((c.baseline.median for c in comps if c.phase == "state_dict_calls"), None)
    fig.suptitle(f"Every measured run per phase, {model_size_words(calls)}: median and min–max spread", fontsize=13)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    return fig


# The model a benchmark loaded, told by its baseline's state_dict() calls, so a plot's title says which.
MODEL_BY_BUFFERS = {219: "full-size", 220: "full-size", 51: "tiny", 52: "tiny"}
# A bar segment narrower than this share of the axis is not seen: the legend names it apart, not among the colours.
VISIBLE_SHARE = 0.005


def model_size_words(calls: float | None) -> str:
    """"full-size Token2Wav", "tiny Token2Wav" or "Token2Wav (B buffers)" from the baseline's state_dict() calls."""
    if calls is None or (isinstance(calls, float) and math.isnan(calls)):
        return "Token2Wav"
    size = MODEL_BY_BUFFERS.get(int(calls))
    return f"{size} Token2Wav" if size else f"Token2Wav ({int(calls)} buffers)"


def _frame_model(frame) -> str:
    import pandas as pd

    rows = frame[(frame["variant"] == "baseline") & (frame["phase"] == "total")] if "state_dict_calls" in frame else []
    return model_size_words(float(pd.to_numeric(rows["state_dict_calls"], errors="coerce").median()) if len(rows) else None)


def where_time_goes_figure(frame) -> ShownFigure | None:
    """Stacked bars of leaf-phase medians per variant: where the load time goes.

    Medians do not add up, so the whole load's median is marked on each bar as a tick beside the bar's sum.
    """
    medians = _leaf_medians(frame)
    if medians is None:
        return None
    totals = {v: phase_summary(frame, v, "total").median for v in VARIANTS}
    values = [x for v in medians.values() for x in v if not math.isnan(x)]
    scale, unit = _scale([sum(values), *totals.values()])
    fig = ShownFigure(figsize=(9, 3.8))
    ax = fig.subplots()
    # tab10 has ten colours and there are more phases: the eleventh on gets tab20's light shades
    tab10, tab20 = matplotlib.colormaps["tab10"], matplotlib.colormaps["tab20"]
    colors = [tab10(k) if k < 10 else tab20(2 * (k - 10) + 1) for k in range(len(LEAF_PHASES))]
    widest = 0.0
    longest = max([sum(x for x in v if not math.isnan(x)) * scale for v in medians.values()]
                  + [t * scale for t in totals.values() if not math.isnan(t)]) or 1.0
    # a phase can be seen when its segment is wide enough in some bar; the legend marks the others
    seen = {k for v in medians.values() for k, x in enumerate(v) if not math.isnan(x) and x * scale >= VISIBLE_SHARE * longest * 1.3}
    unseen = [label(p) for k, p in enumerate(LEAF_PHASES)
              if k not in seen and any(not math.isnan(v[k]) for v in medians.values())]
    for j, variant in enumerate(VARIANTS):
        left = 0.0
        for k, (phase, med) in enumerate(zip(LEAF_PHASES, medians[variant])):
            if math.isnan(med):
                continue
            ax.barh(j, med * scale, left=left, color=colors[k], edgecolor="white",
                    label=label(phase) if j == 0 else None)
            left += med * scale
        total = totals[variant]
        text = f"Σ phases {short_duration(left / scale)}"
        end = left
        if not math.isnan(total):
            ax.plot([total * scale] * 2, [j - 0.42, j + 0.42], color="black", lw=1.6, zorder=5)
            text += f"\nwhole load {short_duration(total)}"
            end = max(end, total * scale)
        ax.annotate(text, (end, j), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
        widest = max(widest, end)
    ax.set_xlim(0, widest * 1.3)  # room for the labels inside the frame
    ax.set_yticks(range(len(VARIANTS)), list(VARIANTS))
    ax.set_xlabel(f"median time ({unit})")
    ax.set_title(f"Where the {_frame_model(frame)} load time goes (median of each phase)")
    handles, names = ax.get_legend_handles_labels()
    # every phase keeps its colour in the legend; one no bar shows wide enough to see says so
    names = [f"{n} (too thin to see)" if n in unseen else n for n in names]
    handles.append(Line2D([], [], color="black", lw=1.6))
    names.append("median whole load")
    legend = ax.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8)
    # under the legend, however many rows it takes (anchored to it, so the two never overlap)
    thin = (f"\n{count(len(unseen), 'phase')} of the legend {'is' if len(unseen) == 1 else 'are'} too thin to see at "
            f"this scale (under {100 * VISIBLE_SHARE:g}% of the axis in both bars).") if unseen else ""
    ax.annotate("The bar adds the median of each phase; the tick is the median of the whole load. They differ "
                "because medians\ndo not add up (the run with the median total need not have the median of every phase) "
                "and the clock also runs between phases." + thin, xy=(0.0, 0.0), xycoords=legend, xytext=(0, -4),
                textcoords="offset points", fontsize=7.5, color="#444", va="top", ha="left")
    ax.invert_yaxis()
    return fig


def ratios_vs_pr_figure(comps: list[Comparison], reference: dict[str, Any]) -> ShownFigure | None:
    """Baseline/optimized ratio of each PR measurement: this run beside the PR's. This run's bar carries its 95%
    interval; a row without a claim is drawn hollow and hatched, so it does not read like a claimed one. The PR
    published medians only."""
    pr_rows = _pr_rows(comps, reference)
    if pr_rows is None:
        return None
    mine, refs = pr_rows
    fig = ShownFigure(figsize=(7, 3.8))
    ax = fig.subplots()
    width = 0.38
    drawn: list[float] = []
    for i, r in enumerate(refs):
        pr, c = r["baseline"] / r["optimized"], mine[r["measurement"]]
        ax.bar(i - width / 2, pr, width, color="#8d96a3", label="PR (MI300X, ROCm), median" if i == 0 else None)
        ax.annotate(times(pr), (i - width / 2, pr), ha="center", va="bottom", fontsize=8)
        claimed = c.differs()
        ax.bar(i + width / 2, c.ratio, width, color="#00798c" if claimed else "white", edgecolor="#00798c",
               hatch=None if claimed else "//", label=("this run: a claimed difference" if claimed
                                                       else "this run: no difference claimed"))
        iv = ratio_interval(c)
        top = c.ratio
        if iv:
            # a percentile interval of few runs need not hold the ratio of medians itself
            ax.errorbar([i + width / 2], [c.ratio], yerr=[[max(0.0, c.ratio - iv[0])], [max(0.0, iv[1] - c.ratio)]],
                        fmt="none", ecolor="black", capsize=4, lw=1, label="95% interval of this run's ratio")
            top = max(iv[1], c.ratio)
            drawn += list(iv)
        ax.annotate(times(c.ratio) + ("" if claimed else "\nno claim"), (i + width / 2, top), xytext=(0, 4),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)  # clear of the whisker's cap
        drawn += [pr, c.ratio]
    log_axis(ax, "y")
    drawn = [v for v in drawn if v > 0 and math.isfinite(v)]
    # 1× (no change) stays in view; room for the labels and the legend above the tallest bar
    ax.set_ylim(min(0.7, min(drawn, default=1.0) * 0.7), max(max(drawn, default=1.0), 1.0) * 6)
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(range(len(refs)), [r["label"] for r in refs])
    ax.set_ylabel("baseline / optimized (median ratio, log)")
    calls = next((c.baseline.median for c in comps if c.phase == "state_dict_calls"), None)
    ax.set_title(f"Speed-up of the optimized loader: this run ({model_size_words(calls)}) against the PR "
                 "(the released model)", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), loc="upper right", fontsize=7.5)
    return fig


def drift_figure(frame) -> ShownFigure | None:
    """A phase's seconds against run order (warm-ups hollow): a drift over the benchmark shows as a slope."""
    drift_rows = _drift_rows(frame)
    if drift_rows is None:
        return None
    rows, phases = drift_rows
    model = _frame_model(frame)
    fig = ShownFigure(figsize=(8, 3.2 * len(phases)))
    axes = fig.subplots(len(phases), 1, squeeze=False)
    for ax, phase in zip(axes.flat, phases):
        of_phase = rows[rows["phase"] == phase]
        scale, unit = _scale(list(of_phase["seconds"]))
        for variant, runs in of_phase.groupby("variant", sort=False):
            runs = runs.sort_values("run_id")
            color = COLORS.get(str(variant))
            # counted from 1, as the benchmark's bar counts them ("run 3/12"): the plan's run_id is from 0
            ax.plot(runs["run_id"] + 1, runs["seconds"] * scale, color=color, alpha=0.35, lw=1, label="_line")
            for warm, part in runs.groupby("warmup"):
                ax.scatter(part["run_id"] + 1, part["seconds"] * scale, s=24, zorder=3, color=color,
                           facecolors="none" if warm else color,
                           label=f"{variant} warm-up" if warm else f"{variant}")
        ax.set_title(f"{label(phase)}, {model}: each run in the order it ran", fontsize=10)
        ax.set_xlabel("run, as the progress bar counts them (warm-ups hollow)")
        ax.set_ylabel(f"time ({unit})")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: number(value)))  # "2,000" as the tables write it
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    return fig


# What each plot draws, or None when the rows hold nothing for it: read by its figure function and by
# report_figure_stems (report.md's links, which need no drawing).

def _timed(comps: list[Comparison]) -> list[Comparison] | None:
    return [c for c in comps if c.unit == "s"] or None


def _leaf_medians(frame) -> dict[str, list[float]] | None:
    medians = {v: [phase_summary(frame, v, p).median for p in LEAF_PHASES] for v in VARIANTS}
    return None if all(math.isnan(x) for v in medians.values() for x in v) else medians


def _pr_rows(comps: list[Comparison], reference: dict[str, Any]) -> tuple[dict[str, Comparison], list] | None:
    mine = {c.phase: c for c in comps if c.unit == "s"}
    refs = [r for r in reference["measurements"] if r["unit"] == "s" and r["measurement"] in mine]
    return (mine, refs) if refs else None


def _drift_rows(frame) -> tuple[Any, list[str]] | None:
    if frame.empty or "source" not in frame:
        return None
    rows = frame[(frame["source"] == "load") & (frame["status"] == "ok") & frame["phase"].isin(DRIFT_PHASES)]
    phases = [p for p in DRIFT_PHASES if (rows["phase"] == p).any()]
    return (rows, phases) if phases else None


REPORT_PLOTS = {"phases": (phases_figure, _timed, ("comps",)),
                "where_time_goes": (where_time_goes_figure, _leaf_medians, ("frame",)),
                "ratios_vs_pr": (ratios_vs_pr_figure, _pr_rows, ("comps", "reference")),
                "drift": (drift_figure, _drift_rows, ("frame",))}


def report_figure_stems(frame, comps: list[Comparison], reference: dict[str, Any]) -> list[str]:
    """The stems of the plots :func:`report_figures` draws, in report.md's order, decided without drawing."""
    if measured(frame).empty:
        return []
    given = {"frame": frame, "comps": comps, "reference": reference}
    return [stem for stem, (_, data, needs) in REPORT_PLOTS.items() if data(*(given[n] for n in needs)) is not None]


def report_figures(frame, comps: list[Comparison], reference: dict[str, Any]) -> dict[str, ShownFigure]:
    """Every plot of one results directory, by file stem, in report.md's order (none without measured runs)."""
    given = {"frame": frame, "comps": comps, "reference": reference}
    built = {stem: REPORT_PLOTS[stem][0](*(given[n] for n in REPORT_PLOTS[stem][2]))
             for stem in report_figure_stems(frame, comps, reference)}
    return {stem: fig for stem, fig in built.items() if fig is not None}

