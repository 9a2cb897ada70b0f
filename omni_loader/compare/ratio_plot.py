"""``compare``'s figure: the speed-up of each results directory beside the PR's, one panel per timed row
(matplotlib is imported only when ``compare`` draws)."""

from __future__ import annotations

import math
from typing import Any

from matplotlib.lines import Line2D

from ..reporting.figures import ShownFigure, log_axis
from ..reporting.measurements import LABELS
from .side_by_side import SideBySide


def directories_ratio_figure(result: SideBySide) -> ShownFigure:
    """``compare``'s plot: one panel per timed PR row, each directory's ratio with its 95% interval (a cross where a
    check failed), the PR's ratio dashed, 1× solid."""
    timed = [p for p in result.pr_rows if p != "state_dict_calls"]
    labels = [e.label for e in result.entries]
    fig = ShownFigure(figsize=(max(4.5, 0.9 * len(labels) + 2.5) * len(timed), 4.2), layout="constrained")
    axes = fig.subplots(1, len(timed), squeeze=False)[0]
    for ax, phase in zip(axes, timed):
        _ratio_panel(ax, result, phase)
        ax.set_xticks(range(len(labels)), labels, rotation=25, ha="right")
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ref = result.reference_row(phase)
        # The PR's figure in the title, not on its line: at the top of the range the frame struck a label through.
        ax.set_title(LABELS[phase] + (f"\nPR 7061: {ref['baseline'] / ref['optimized']:.3g}×" if ref else ""))
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    handles.pop("95% interval", None)
    handles["95% interval"] = Line2D([], [], color="#00798c", lw=2, alpha=0.5)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(len(handles), 4),
               fontsize=8)
    # the model size: a tiny model's ratio is not the PR's model's
    models = " and ".join(dict.fromkeys(_model(e) for e in result.entries))
    fig.suptitle(f"Speed-up of the optimized loader per results directory ({models}), against the PR's "
                 "(the released model)")
    return fig


def _model(entry: Any) -> str:
    """"full-size Token2Wav" or "tiny Token2Wav", from the baseline's state_dict() calls (one per named buffer)."""
    from ..reporting.plots import model_size_words

    calls = entry.comparison("state_dict_calls")
    return model_size_words(calls.baseline.median if calls else None)


def _ratio_panel(ax: Any, result: SideBySide, phase: str) -> None:
    for flagged, marker, name in ((False, "o", "ratio of medians"), (True, "X", "ratio of medians (check failed)")):
        points = [(i, e.comparison(phase).ratio) for i, e in enumerate(result.entries)
                  if e.comparison(phase) and result.mismatched(e.label) == flagged
                  and math.isfinite(e.comparison(phase).ratio)]
        if points:
            ax.scatter([x for x, _ in points], [y for _, y in points], marker=marker, s=36, zorder=4,
                       color="#d1495b" if flagged else "#00798c", label=name)
    for i, e in enumerate(result.entries):
        iv = e.intervals.get(phase)
        if iv:
            ax.plot([i, i], list(iv), color="#00798c", lw=2, alpha=0.5, solid_capstyle="butt", label="95% interval")
        c = e.comparison(phase)
        if c and math.isfinite(c.ratio):
            ax.annotate(f"{c.ratio:.3g}×", (i, c.ratio), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=8)
    ref = result.reference_row(phase)
    if ref:
        pr = ref["baseline"] / ref["optimized"]
        ax.axhline(pr, color="#8d96a3", ls="--", lw=1.4, label="PR 7061 (released model, MI300X, as published)")
    ax.axhline(1, color="black", lw=0.8, label="no change (1×)")
    # a ratio's label is centred on its point: at the range's ends 15% of margin holds it whole (5% did not)
    ax.margins(y=0.15)
    log_axis(ax, "y")  # 10, 100, 6: not 10¹, 10², 6×10⁰
    ax.set_ylabel("baseline / optimized (median ratio, log)")
    ax.grid(axis="y", alpha=0.3)
