"""Audit any transformers architecture for the ``state_dict()``-in-a-loop pattern.

Any model with many buffers and many modules pays Token2Wav's B·N. Each architecture is built from its default
config on the meta device (no weights) and reported with its tree's size, both rules' results, their hazards and
times.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from .discovery_timing import time_discovery
from .fits import REAL_TOKEN2WAV, LogLogFit, source_words
from .trees import tree_counts

AUDIT_COLUMNS = ("arch", "model_class", "modules", "named_buffers", "persistent_buffers", "agree", "hazards",
                 "baseline_calls", "baseline_seconds", "optimized_seconds", "ratio", "build_seconds", "error")


@dataclass(frozen=True)
class AuditRow:
    """One architecture: what its tree holds and what both discovery rules cost on it."""

    arch: str
    model_class: str = ""
    modules: int = 0
    named_buffers: int = 0
    persistent_buffers: int = 0
    agree: bool | None = None
    hazards: list[str] = field(default_factory=list)
    baseline_calls: int = 0
    baseline_seconds: float = math.nan
    optimized_seconds: float = math.nan
    build_seconds: float = math.nan
    error: str = ""  # why it could not be built; the other fields are then empty

    @property
    def ratio(self) -> float:
        return self.baseline_seconds / self.optimized_seconds if self.optimized_seconds else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hazards": "; ".join(self.hazards), "ratio": self.ratio}


def architectures() -> list[str]:
    """Every model type transformers' ``AutoModel`` knows, sorted."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


def build_on_meta(arch: str) -> nn.Module:
    """``AutoModel`` of ``arch``'s default config on the meta device (raises on any failure)."""
    import torch
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(arch)
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModel.from_config(config)


def audit_model(arch: str, model: nn.Module, repeats: int = 3, build_seconds: float = math.nan) -> AuditRow:
    """Both rules on ``model``, alternating, ``repeats`` timed calls each after one warm-up."""
    timing = time_discovery(model, repeats=repeats, warmup=1)
    agreement = timing.agreement
    modules, buffers = tree_counts(model)
    return AuditRow(
        arch=arch, model_class=type(model).__name__, modules=modules, named_buffers=buffers,
        persistent_buffers=len(agreement.optimized), agree=agreement.agree, hazards=[str(h) for h in agreement.hazards],
        baseline_calls=timing.state_dict_calls["baseline"], baseline_seconds=timing.median("baseline"),
        optimized_seconds=timing.median("optimized"), build_seconds=build_seconds,
    )


def audit_arch(arch: str, repeats: int = 3) -> AuditRow:
    """Build ``arch`` and audit it; a model that cannot be built gives a row with its one-line error."""
    start = time.perf_counter()
    try:
        model = build_on_meta(arch)
    except Exception as exc:  # noqa: BLE001 - any failure to build is a finding of the sweep, not a crash
        reason = f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:200]
        return AuditRow(arch=arch, error=reason)
    return audit_model(arch, model, repeats, time.perf_counter() - start)


class ArchitectureAudit(tuple):
    """Both discovery rules timed on transformers architectures, one :class:`AuditRow` each, in order: as a table
    (:meth:`frame`) and placed on a traversal sweep's B·N line (:meth:`on_curve`)."""

    def frame(self):  # -> pandas.DataFrame
        """Tidy rows (one per architecture), costliest baseline first, failures last (:func:`audit_frame`)."""
        return audit_frame(list(self))

    def on_curve(self, sweep: Any) -> OnCurve:
        """The architectures placed on ``sweep``'s baseline line, beside the sweep's own real model."""
        fit = sweep.fits["baseline"]
        return OnCurve(place_on_curve(list(self), fit, sweep.placement), fit)


@dataclass(frozen=True)
class OnCurve:
    """Architectures (and the sweep's real model) on a sweep's baseline B·N line: ``frame``, one row each with the
    measured time over the line's prediction; ``fit``, the line."""

    frame: Any  # pandas.DataFrame
    fit: LogLogFit

    def range_sentence(self) -> str:
        """Which models lie outside the x range the line was fitted on (their places extrapolate it)."""
        from ..formatting import span

        outside = self.frame[~self.frame["inside_fitted_range"].astype(bool)]
        fitted = f"B·N {span(f'{self.fit.x_min:,.0f}', f'{self.fit.x_max:,.0f}')}"
        if outside.empty:
            return f"Every model lies inside the fitted range ({fitted})."
        names = ", ".join(f"{source_words(r.arch)} ({r.x:,.0f})" for r in outside.itertuples(index=False))
        return (f"The line was fitted on {fitted}; {names} lie outside it, so their places extrapolate the line "
                "beyond the trees it was measured on.")

    def factor_sentence(self, factor: float = 2.0) -> str:
        """Which models' baselines lie within ``factor`` of the line's prediction, and for each one outside, its cost
        per module visit against the line's and whether its place extrapolates the line."""
        from ..formatting import count, short_duration, span

        placed, fit = self.frame, self.fit
        ratio = placed["measured_over_fit"].astype(float)
        near = (ratio >= 1 / factor) & (ratio <= factor)
        within = ", ".join(f"{source_words(r.arch)} ({r.measured_over_fit:.2f})"
                           for r in placed[near].itertuples(index=False))
        lines = [f"Within a factor of {factor:g} of the line (baseline ÷ predicted "
                 f"{span(f'{1 / factor:g}', f'{factor:g}')}): {within or 'none'}."]
        for r in placed[~near].itertuples(index=False):
            beyond = "" if r.inside_fitted_range else (
                f"; its B·N lies beyond the fitted range (which ends at {count(fit.x_max)}), so part of the gap may "
                "be the line's extension rather than the model")
            lines.append(f"Outside it: {source_words(r.arch)} ({r.measured_over_fit:.2f}) took "
                         f"{short_duration(r.baseline_seconds)} where the line predicts "
                         f"{short_duration(r.predicted_seconds)} at B·N = {count(r.x)}: "
                         f"{short_duration(r.baseline_seconds / r.x)} per module visit against the line's "
                         f"{short_duration(r.predicted_seconds / r.x)}: its modules cost "
                         f"{r.measured_over_fit:.2f}× as much to visit as the line says synthetic ones do at that "
                         f"size{beyond}.")
        if len(lines) == 1:
            lines.append("The B·N law carries over to every model here, at about the synthetic trees' price per "
                         "visit.")
        return " ".join(lines)

    def plot(self):  # -> Figure
        """The models on the line, labelled (:func:`plot_on_curve`)."""
        return plot_on_curve(self.frame, self.fit)


def audit(archs: Iterable[str] | None = None, repeats: int = 3, progress: bool = True,
          clock: Any = time.perf_counter) -> ArchitectureAudit:
    """Audit every architecture in ``archs`` (default: :func:`architectures`) in one process; the bar's time left
    prices the models to come at the median of those audited so far, the first left out, as it also pays the
    process's one-off costs."""
    from transformers.utils import logging as hf_logging

    from ..progress import BAR_FORMAT, TICK, Countdown, Redrawer, Step, StepBar, progress_bar

    hf_logging.set_verbosity_error()
    archs = list(architectures() if archs is None else archs)
    rows, model = [], Step("model")
    with progress_bar(total=len(archs), desc="audit, models", unit="model", enabled=progress, bar_format=BAR_FORMAT,
                      postfix="importing transformers' auto classes") as bar:
        from transformers import AutoConfig, AutoModel  # noqa: F401 - a one-off cost, paid before the first model

        steps = StepBar(bar, Countdown([model] * len(archs), clock, warm_ups=1),
                        unknown="time left after the second model")
        with Redrawer(steps, TICK):
            for arch in archs:
                steps.begin(model, arch)
                rows.append(audit_arch(arch, repeats))
            steps.finish(f"done: {len(archs)} model{'' if len(archs) == 1 else 's'} audited")
    return ArchitectureAudit(rows)


def audit_frame(rows: list[AuditRow]):  # -> pandas.DataFrame
    """Tidy rows (one per architecture), costliest baseline first, failures last."""
    import pandas as pd

    frame = pd.DataFrame([r.to_dict() for r in rows], columns=list(AUDIT_COLUMNS))
    frame["built"] = frame["error"] == ""
    return frame.sort_values(["built", "baseline_seconds"], ascending=[False, False]).drop(columns="built")


def audit_markdown(rows: list[AuditRow], top: int | None = 10) -> str:
    """The costliest ``top`` built models by baseline time, then a line on the others and the failures."""
    from ..formatting import count, markdown_table, short_duration, times

    built = sorted((r for r in rows if not r.error), key=lambda r: -r.baseline_seconds)
    shown = built[:top] if top else built
    table = markdown_table(
        [[r.arch, r.model_class, count(r.modules), count(r.named_buffers), count(r.persistent_buffers),
          count(r.baseline_calls), short_duration(r.baseline_seconds), short_duration(r.optimized_seconds),
          times(r.ratio), "yes" if r.agree else "**NO**", "; ".join(r.hazards) or "none"] for r in shown],
        ["Architecture", "Model class", "Modules N", "Buffers B", "Persistent", "Baseline state_dict() calls",
         "Baseline", "Optimized", "Ratio", "Rules agree", "Hazards"],
        right=range(2, 9))
    failed = [r for r in rows if r.error]
    disagree = [r.arch for r in built if not r.agree]
    flagged = [r.arch for r in built if r.hazards]
    lines = [table, f"{len(built)} of {len(rows)} architectures built on the meta device"
             + (f"; showing the {len(shown)} costliest by baseline time" if len(shown) < len(built) else "") + ".",
             f"Rules disagree on: {', '.join(disagree) or 'none'}. "
             f"Modules that could make the optimized rule wrong (hazards) in: {', '.join(flagged) or 'none'}."]
    if failed:
        lines.append(f"Not built ({len(failed)}): " + "; ".join(f"{r.arch} ({r.error[:80]})" for r in failed[:20])
                     + (" …" if len(failed) > 20 else ""))
    return "\n\n".join(lines) + "\n"


def write_audit(rows: list[AuditRow], out_dir: str | Path) -> dict[str, Path]:
    """Write audit.csv (every architecture, tidy) and audit.md (the whole table) into ``out_dir``."""
    from ..safe_files import ensure_dir, open_file, refuse_links, write_text

    out = ensure_dir(out_dir)  # a linked folder is refused, never written into
    files = {"csv": out / "audit.csv", "markdown": out / "audit.md"}
    refuse_links(out, [p.name for p in files.values()])  # both checked before the first byte is written
    with open_file(files["csv"], "w", newline="") as fh:  # never through a link (omni_loader.safe_files)
        audit_frame(rows).to_csv(fh, index=False)
    write_text(files["markdown"], audit_markdown(rows, top=None))
    return files


def place_on_curve(rows: list[AuditRow], fit: LogLogFit, sweep_placement: Any = None):  # -> pandas.DataFrame
    """Each built model's baseline time against the sweep's B·N line (models without buffers are left out), with
    the real models the sweep itself placed on it (``sweep_placement``), sorted by B·N."""
    import pandas as pd

    out = []
    for r in rows:
        if r.error or not r.named_buffers:
            continue
        x = r.named_buffers * r.modules
        predicted = float(fit.predict(x))
        out.append({"arch": r.arch, "N": r.modules, "B": r.named_buffers, "x": x,
                    "baseline_seconds": r.baseline_seconds, "predicted_seconds": predicted,
                    "measured_over_fit": r.baseline_seconds / predicted,
                    "inside_fitted_range": fit.x_min <= x <= fit.x_max})
    placed = pd.DataFrame(out).sort_values("x") if out else pd.DataFrame(out)
    if sweep_placement is None or sweep_placement.empty:
        return placed
    real = sweep_placement[sweep_placement["experiment"] == "baseline"].rename(
        columns={"source": "arch", "median_seconds": "baseline_seconds"})
    extra = real[["arch", "N", "B", "x", "baseline_seconds", "predicted_seconds", "measured_over_fit",
                  "inside_fitted_range"]]
    return pd.concat([placed, extra], ignore_index=True).sort_values("x", ignore_index=True)


def plot_on_curve(placed, fit: LogLogFit):  # -> Figure
    """The audit's models on the synthetic B·N line, log-log, labelled, the line dotted beyond its fitted range."""
    import numpy as np

    from ..formatting import TIME_SCALE, time_unit
    from ..reporting.figures import ShownFigure, log_axis

    unit = time_unit(placed["baseline_seconds"])
    scale = TIME_SCALE[unit]
    fig = ShownFigure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.subplots()
    inside = np.geomspace(fit.x_min, fit.x_max, 50)
    ax.plot(inside, fit.predict(inside) * scale, color="gray", lw=1.5,
            label=f"synthetic trees: time ∝ (B·N)$^{{{fit.slope:.2f}}}$")  # a superscript, not "^0.95"
    lo, hi = min(fit.x_min, placed["x"].min()), max(fit.x_max, placed["x"].max())
    for a, b in ((lo, fit.x_min), (fit.x_max, hi)):
        if b > a:
            xs = np.geomspace(a, b, 20)
            ax.plot(xs, fit.predict(xs) * scale, color="gray", lw=1.2, ls=":", label="_extrapolated")
    real = placed["arch"].astype(str).str.startswith(REAL_TOKEN2WAV)
    sizes = np.where(real, 220.0, 36.0)  # marker areas (points²): the star, the dots
    ax.scatter(placed.loc[~real, "x"], placed.loc[~real, "baseline_seconds"] * scale, s=36, color="#00798c",
               zorder=3, label="audited models (meta device)")
    if real.any():
        ax.scatter(placed.loc[real, "x"], placed.loc[real, "baseline_seconds"] * scale, marker="*", s=220,
                   color="crimson", edgecolor="black", zorder=4, label="Token2Wav (the sweep's real model)")
    left, right = np.log10(lo), np.log10(hi)
    ax.set_xlim(10 ** (left - 0.05 * (right - left)), 10 ** (right + 0.3 * (right - left) + 0.1))  # the last label fits right
    ys = np.concatenate([placed["baseline_seconds"].to_numpy(float), fit.predict([lo, hi])]) * scale
    bottom, top = np.log10(ys[ys > 0].min()), np.log10(ys[ys > 0].max())
    span = max(top - bottom, 0.5)
    ax.set_ylim(10 ** (bottom - 0.08 * span), 10 ** (top + 0.15 * span))  # room above the highest point and its label
    log_axis(ax, "x")
    log_axis(ax, "y")
    ax.set_xlabel("B·N (named buffers × modules)")
    ax.set_ylabel(f"baseline discovery, median ({unit})")
    ax.set_title("The state_dict()-per-buffer cost across architectures")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    place_labels(ax, [source_words(a) for a in placed["arch"].astype(str)], placed["x"].to_numpy(float),
                 placed["baseline_seconds"].to_numpy(float) * scale, sizes)
    return fig


def place_labels(ax, labels: list[str], xs, ys, sizes, fontsize: float = 8) -> list:
    """Label each point at the first of its four corners that stays inside the axes and clear of the labels,
    markers (area ``sizes[i]`` points²) and legend, else where it overlaps least."""
    fig = ax.figure
    fig.canvas.draw()
    frame = ax.get_window_extent()
    px = fig.dpi / 72
    centres = ax.transData.transform(list(zip(xs, ys)))
    blocked = [(cx - r, cy - r, cx + r, cy + r) for (cx, cy), r in  # the markers
               zip(centres, ((s ** 0.5) / 2 * px + 1 for s in sizes))]
    legend = ax.get_legend()
    if legend is not None:
        blocked.append(tuple(legend.get_window_extent().extents))
    placed_labels = []
    for label, x, y, r in zip(labels, xs, ys, (((s ** 0.5) / 2 + 2) for s in sizes)):
        best = None
        for dx, dy, ha, va in ((r, r * 0.6, "left", "bottom"), (r, -r * 0.6, "left", "top"),
                               (-r, r * 0.6, "right", "bottom"), (-r, -r * 0.6, "right", "top")):
            text = ax.annotate(label, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                               ha=ha, va=va)
            box = tuple(text.get_window_extent().extents)
            outside = (max(0, frame.x0 - box[0]) + max(0, box[2] - frame.x1) + max(0, frame.y0 - box[1])
                       + max(0, box[3] - frame.y1)) * 1e6  # worse than any overlap
            cost = outside + sum(overlap(box, other) for other in blocked)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, text, box)
            else:
                text.remove()
            if cost == 0:
                break
        blocked.append(best[2])
        placed_labels.append(best[1])
    return placed_labels


def overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """The area two boxes ``(x0, y0, x1, y1)`` share (0 when they do not touch)."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
