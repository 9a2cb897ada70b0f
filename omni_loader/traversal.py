"""What module traversal costs: timing both discovery rules on real and synthetic module trees.

The baseline rule rebuilds the state dict once per named buffer, and one ``state_dict()`` walks
every module, so its cost grows as buffers x modules (B·N). The optimized rule walks the tree a
fixed number of times (``named_modules()`` once, ``named_buffers()`` once), so its cost grows as
modules + buffers (N + B).

Two tools live here:

* :func:`time_discovery` times both rules on one model (the real Token2Wav, for the CLI's
  ``discovery-bench``).
* :func:`run_sweep` / :func:`traversal_sweep` build synthetic trees in which N and B vary
  independently, measure (a) one ``state_dict()`` against N, (b) the baseline against B·N and
  (c) the optimized walk against N + B, fit straight lines on log-log axes (the slope is the
  exponent of the growth law: 1 means linear in that x), and place the real Token2Wav on the
  same axes. ``omni-loader traversal --out DIR`` writes the tidy CSV, the fits and the plots.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .discovery import VARIANTS, compare_variants, count_state_dict_calls, find_persistent_buffers


@dataclass
class DiscoveryTiming:
    """Raw per-call samples of both rules on one model, alternating, plus their agreement."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    state_dict_calls: dict[str, int] = field(default_factory=dict)
    agree: bool = False
    summary: str = ""

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def ratio(self) -> float:
        return self.median("baseline") / self.median("optimized")


def time_discovery(model: nn.Module, repeats: int = 5, warmup: int = 1) -> DiscoveryTiming:
    """Time ``find_persistent_buffers`` for both variants, alternating, after ``warmup`` calls each."""
    timing = DiscoveryTiming(samples={v: [] for v in VARIANTS})
    for i in range(warmup + repeats):
        for variant in VARIANTS:
            with count_state_dict_calls(model) as calls:
                start = time.perf_counter()
                find_persistent_buffers(model, variant)
                elapsed = time.perf_counter() - start
            timing.state_dict_calls[variant] = calls.calls
            if i >= warmup:
                timing.samples[variant].append(elapsed)
    agreement = compare_variants(model)
    timing.agree, timing.summary = agreement.agree, agreement.summary()
    return timing


# =========================================================================== synthetic trees


class TreeNode(nn.Module):
    """A small module: one 4-element parameter, children and buffers added by :func:`build_tree`."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(4))


ROOT_PERSISTENT = "scale"  # root-level persistent buffer: its qualified name has no dot
NESTED_PERSISTENT = "inv_freq"  # persistent buffer on the deepest module, like Token2Wav's rotary


def build_tree(n_modules: int, n_buffers: int, fanout: int = 4, buffer_numel: int = 12) -> nn.Module:
    """A module tree with exactly ``n_modules`` modules (root included) and ``n_buffers`` named buffers.

    Modules are :class:`TreeNode` s in a ``fanout``-ary tree filled breadth first (children named
    ``m0``, ``m1``, ...), so depth grows as log N, like a real model rather than a chain that would
    hit Python's recursion limit. Two buffers are persistent: ``scale`` on the root (qualified name
    ``scale``, no leading dot) and ``inv_freq`` on the last, deepest module. The other
    ``n_buffers - 2`` are non-persistent ``filterJ`` buffers of ``buffer_numel`` floats (Token2Wav's
    anti-alias filters have 12 taps), spread evenly over the modules, the root included. When B > N
    some modules hold several.
    """
    if n_modules < 2:
        raise ValueError(f"n_modules must be at least 2 (root + one nested module), not {n_modules}")
    if n_buffers < 2:
        raise ValueError(f"n_buffers must be at least 2 (the two persistent buffers), not {n_buffers}")
    if fanout < 1:
        raise ValueError(f"fanout must be positive, not {fanout}")
    nodes = [TreeNode() for _ in range(n_modules)]
    for i in range(1, n_modules):
        nodes[(i - 1) // fanout].add_module(f"m{(i - 1) % fanout}", nodes[i])
    root = nodes[0]
    root.register_buffer(ROOT_PERSISTENT, torch.ones(1))
    nodes[-1].register_buffer(NESTED_PERSISTENT, torch.ones(8))
    non_persistent = n_buffers - 2
    for j in range(non_persistent):
        owner = nodes[(j * n_modules) // non_persistent]
        owner.register_buffer(f"filter{j}", torch.zeros(buffer_numel), persistent=False)
    return root


def tree_counts(model: nn.Module) -> tuple[int, int]:
    """(N, B): modules as ``named_modules()`` yields them, buffers as ``named_buffers()`` does."""
    return sum(1 for _ in model.named_modules()), sum(1 for _ in model.named_buffers())


# =========================================================================== the sweep

# experiment -> (what is timed, x-axis label)
EXPERIMENTS: dict[str, tuple[str, str]] = {
    "state_dict": ("one model.state_dict()", "N (modules)"),
    "baseline": ("baseline discovery (state_dict() per buffer)", "B·N (buffers × modules)"),
    "optimized": ("optimized discovery (one named_modules() walk)", "N + B (modules + buffers)"),
}
# seconds: wall clock per call (perf_counter); cpu_seconds: this thread's CPU time per call (thread_time),
# which other processes on a busy machine barely disturb; number: calls per timed repeat.
CSV_COLUMNS = ("experiment", "source", "N", "B", "x", "repeat", "seconds", "cpu_seconds", "number")
CLOCKS = {"wall": "seconds", "cpu": "cpu_seconds"}
SYNTHETIC = "synthetic"
FILES = {
    "rows": "traversal.csv",
    "fits_csv": "fits.csv",
    "fits_json": "fits.json",
    "plot_png": "traversal.png",
    "plot_svg": "traversal.svg",
    "plot_cpu_png": "traversal_cpu.png",
    "plot_cpu_svg": "traversal_cpu.svg",
}


def experiment_x(experiment: str, n: int, b: int) -> int:
    """The x each experiment is plotted and fitted against."""
    if experiment == "state_dict":
        return n
    if experiment == "baseline":
        return b * n
    if experiment == "optimized":
        return n + b
    raise ValueError(f"experiment must be one of {tuple(EXPERIMENTS)}, not {experiment!r}")


@dataclass(frozen=True)
class SweepConfig:
    """What the sweep measures. :meth:`full` is the default; :meth:`quick` fits in seconds.

    Every (N, B) pair of ``n_values`` x ``b_values`` is one tree. ``state_dict`` and ``optimized``
    are timed on every tree; ``baseline`` only where B·N <= ``max_baseline_bn`` (its cost is
    a few µs per module per buffer on a 2-core CPU, so the largest trees would take seconds a
    call). Each timed repeat calls the function ``number`` times, ``number`` chosen from the last
    warm-up call so that one repeat lasts at least ``min_time`` seconds; the recorded seconds are
    per call. ``token2wav`` ('full', 'tiny' or None) adds the real model, built on the CPU.
    Repeats are rounds over all models, in an order shuffled per round from ``seed``; before its
    timed round each model gets ``touch`` untimed ``state_dict()`` calls to warm the caches.
    """

    n_values: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096)
    b_values: tuple[int, ...] = (4, 16, 64, 256)
    repeats: int = 7
    warmup: int = 1
    min_time: float = 0.005
    max_baseline_bn: int = 2**19
    fanout: int = 4
    token2wav: str | None = "full"
    token2wav_layout: str = "vllm-omni"
    seed: int = 0  # order of the trees within each repeat round
    touch: int = 5  # untimed state_dict() calls on a model right before its timed round (cache warm-up)

    @classmethod
    def full(cls, **overrides: Any) -> SweepConfig:
        return replace(cls(), **overrides)

    @classmethod
    def quick(cls, **overrides: Any) -> SweepConfig:
        base = cls(n_values=(16, 64, 256, 1024), b_values=(4, 16, 64), repeats=3, warmup=1, min_time=0.001,
                   max_baseline_bn=2**16)
        return replace(base, **overrides)

    def trees(self) -> list[tuple[int, int]]:
        return [(n, b) for n in self.n_values for b in self.b_values]

    def runs_baseline(self, n: int, b: int) -> bool:
        return b * n <= self.max_baseline_bn

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _experiment_calls(model: nn.Module) -> dict[str, Callable[[], object]]:
    return {
        "state_dict": model.state_dict,
        "baseline": lambda: find_persistent_buffers(model, "baseline"),
        "optimized": lambda: find_persistent_buffers(model, "optimized"),
    }


def _per_call_seconds(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """(wall, thread CPU) seconds per call over ``number`` calls, garbage collector off (as timeit does)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for _ in range(number):
            fn()
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
        return wall / number, cpu / number
    finally:
        if was_enabled:
            gc.enable()


def calibrate(model: nn.Module, experiments: Sequence[str], warmup: int = 1,
              min_time: float = 0.0) -> dict[str, int]:
    """Run ``warmup`` untimed calls of each experiment; return the calls per timed repeat of each
    (enough for ``min_time`` seconds, judged from the last warm-up call; 1 without warm-up)."""
    calls = _experiment_calls(model)
    number = dict.fromkeys(experiments, 1)
    for exp in experiments:
        last = None
        for _ in range(warmup):
            last = _per_call_seconds(calls[exp], 1)[0]
        if last is not None and min_time > 0:
            number[exp] = max(1, min(10_000, math.ceil(min_time / max(last, 1e-9))))
    return number


def measure_round(model: nn.Module, number: dict[str, int], repeat: int, source: str = SYNTHETIC,
                  counts: tuple[int, int] | None = None, touch: int = 5) -> list[dict[str, Any]]:
    """One timed repeat of each experiment in ``number`` on ``model``: one tidy row each.

    ``touch`` untimed ``state_dict()`` calls first bring the tree back into the CPU caches (other
    trees were measured in between; on Token2Wav the first calls after that take ~1.5x the steady
    time and it takes about five to settle), so every experiment is timed warm, as the baseline's
    back-to-back rebuilds are. Without it, large trees, timed with few inner calls, would be
    measured cold and small ones warm, bending the slopes upwards.
    """
    n, b = counts or tree_counts(model)
    calls = _experiment_calls(model)
    for _ in range(touch):
        model.state_dict()
    rows = []
    for exp, k in number.items():
        wall, cpu = _per_call_seconds(calls[exp], k)
        rows.append({"experiment": exp, "source": source, "N": n, "B": b, "x": experiment_x(exp, n, b),
                     "repeat": repeat, "seconds": wall, "cpu_seconds": cpu, "number": k})
    return rows


def measure_model(
    model: nn.Module,
    experiments: Sequence[str],
    repeats: int,
    warmup: int = 1,
    min_time: float = 0.0,
    source: str = SYNTHETIC,
) -> list[dict[str, Any]]:
    """Tidy rows for ``experiments`` on one model: warm-ups, then ``repeats`` rounds, alternating."""
    number = calibrate(model, experiments, warmup, min_time)
    counts = tree_counts(model)
    return [row for r in range(repeats) for row in measure_round(model, number, r, source, counts)]


def token2wav_model(size: str = "full", layout: str = "vllm-omni") -> nn.Module:
    """The real Token2Wav module tree, built on the CPU (weights left uninitialised: not needed here)."""
    from .model import build_model, config_dict

    return build_model(config_dict(size), layout=layout, device="cpu")


def run_sweep(config: SweepConfig | None = None, progress: bool = True):  # -> pandas.DataFrame
    """Measure every tree of ``config`` (and the real Token2Wav); one tidy row per timed repeat.

    All models are built and warmed up first; then each repeat is one round over all of them, in a
    fresh random order per round (seeded by ``config.seed``). A burst of load from another process
    therefore lands on different trees in different rounds, and the medians discard it, instead of
    spoiling every repeat of one tree.
    """
    import random

    import pandas as pd

    from .progress import progress_bar

    config = config or SweepConfig.full()
    if config.repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {config.repeats}")
    trees = config.trees()
    total = (len(trees) + bool(config.token2wav)) * (config.repeats + 1)
    plan: list[tuple[str, nn.Module, tuple[int, int], dict[str, int]]] = []
    rows: list[dict[str, Any]] = []
    with progress_bar(total=total, desc="traversal sweep", unit="tree", enabled=progress) as bar:
        bar.set_postfix_str("build + warm up")
        for n, b in trees:
            model = build_tree(n, b, fanout=config.fanout)
            experiments = [e for e in EXPERIMENTS if e != "baseline" or config.runs_baseline(n, b)]
            plan.append((SYNTHETIC, model, (n, b), calibrate(model, experiments, config.warmup, config.min_time)))
            bar.update(1)
        if config.token2wav:
            model = token2wav_model(config.token2wav, config.token2wav_layout)
            number = calibrate(model, list(EXPERIMENTS), config.warmup, config.min_time)
            plan.append((f"token2wav-{config.token2wav}", model, tree_counts(model), number))
            bar.update(1)
        rng = random.Random(config.seed)
        for repeat in range(config.repeats):
            bar.set_postfix_str(f"repeat {repeat + 1}/{config.repeats}")
            for source, model, counts, number in rng.sample(plan, len(plan)):
                rows += measure_round(model, number, repeat, source, counts, touch=config.touch)
                bar.update(1)
    plan.clear()
    order = {e: i for i, e in enumerate(EXPERIMENTS)}
    frame = pd.DataFrame(rows, columns=list(CSV_COLUMNS))
    frame = frame.assign(_src=frame.source != SYNTHETIC, _exp=frame.experiment.map(order))
    frame = frame.sort_values(["_src", "N", "B", "repeat", "_exp"], kind="stable")
    return frame.drop(columns=["_src", "_exp"]).reset_index(drop=True)


# =========================================================================== fits


@dataclass(frozen=True)
class LogLogFit:
    """``log10(y) = intercept + slope * log10(x)``: ``y = 10**intercept * x**slope``."""

    slope: float
    intercept: float
    r2: float
    stderr: float
    n_points: int
    x_min: float
    x_max: float

    def predict(self, x: Any) -> Any:
        import numpy as np

        return 10 ** (self.intercept + self.slope * np.log10(np.asarray(x, dtype=float)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_loglog(x: Sequence[float], y: Sequence[float]) -> LogLogFit:
    """Least-squares line through ``(log10 x, log10 y)``, with R² of that line (scipy's linregress)."""
    import numpy as np
    from scipy.stats import linregress

    lx, ly = np.log10(np.asarray(x, dtype=float)), np.log10(np.asarray(y, dtype=float))
    if lx.size < 2 or np.ptp(lx) == 0:
        raise ValueError("a log-log fit needs at least two distinct x values")
    res = linregress(lx, ly)
    return LogLogFit(
        slope=float(res.slope),
        intercept=float(res.intercept),
        r2=float(res.rvalue**2),
        stderr=float(res.stderr),
        n_points=int(lx.size),
        x_min=float(10 ** lx.min()),
        x_max=float(10 ** lx.max()),
    )


def medians(rows, clock: str = "wall"):  # DataFrame -> DataFrame
    """One row per (experiment, source, N, B, x): median, min and max seconds over the repeats,
    of the wall clock or of the thread's CPU time (``clock`` 'wall' or 'cpu')."""
    grouped = rows.groupby(["experiment", "source", "N", "B", "x"], sort=True)[CLOCKS[clock]]
    out = grouped.agg(median="median", min="min", max="max", repeats="count").reset_index()
    return out


def fit_sweep(rows, clock: str = "wall") -> dict[str, LogLogFit]:
    """One log-log fit per experiment, through the medians of the synthetic trees only."""
    med = medians(rows, clock)
    fits = {}
    for exp in EXPERIMENTS:
        points = med[(med.experiment == exp) & (med.source == SYNTHETIC)]
        if points.x.nunique() >= 2:
            fits[exp] = fit_loglog(points.x, points["median"])
    return fits


def place_points(rows, fits: dict[str, LogLogFit], clock: str = "wall"):  # -> DataFrame
    """Where each non-synthetic model sits: its median against what the fitted line predicts there."""
    import pandas as pd

    med = medians(rows, clock)
    out = []
    for rec in med[med.source != SYNTHETIC].itertuples(index=False):
        fit = fits.get(rec.experiment)
        predicted = float(fit.predict(rec.x)) if fit else float("nan")
        out.append({
            "experiment": rec.experiment,
            "source": rec.source,
            "N": rec.N,
            "B": rec.B,
            "x": rec.x,
            "median_seconds": rec.median,
            "predicted_seconds": predicted,
            "measured_over_fit": rec.median / predicted if fit else float("nan"),
            "inside_fitted_range": bool(fit and fit.x_min <= rec.x <= fit.x_max),
        })
    return pd.DataFrame(out)


def baseline_over_state_dicts(rows, clock: str = "wall"):  # -> DataFrame
    """Per tree: baseline median / (B x one state_dict() median). Near 1: the baseline *is* B rebuilds."""
    med = medians(rows, clock)
    pivot = med.pivot_table(index=["source", "N", "B"], columns="experiment", values="median").reset_index()
    if "baseline" not in pivot:
        return pivot.iloc[0:0]
    pivot = pivot.dropna(subset=["baseline", "state_dict"])
    pivot["baseline_over_B_state_dicts"] = pivot["baseline"] / (pivot["B"] * pivot["state_dict"])
    return pivot[["source", "N", "B", "baseline", "state_dict", "baseline_over_B_state_dicts"]]


def linear_costs(rows, experiment: str = "optimized", clock: str = "wall") -> dict[str, float]:
    """Least squares ``seconds = per_module * N + per_buffer * B + fixed`` over the synthetic medians,
    with every cost held at zero or more.

    A slope of 1 against N + B says the cost is linear in both; this says how much each module and
    each buffer adds (a module costs more than a buffer: it is visited by both walks). The fit is
    non-negative (``scipy.optimize.nnls``) because a cost cannot be: an unconstrained fit of noisy
    medians can trade a larger per-module cost for a negative fixed cost ("+ -42.6 µs"), which
    teaches something false. Points are weighted by 1/median, so the small trees (where the fixed
    cost shows) count as much as the large ones (where the per-item costs do).
    """
    import numpy as np
    from scipy.optimize import nnls

    med = medians(rows, clock)
    pts = med[(med.experiment == experiment) & (med.source == SYNTHETIC)]
    if len(pts) < 3:
        raise ValueError(f"need at least 3 synthetic points of {experiment!r}, have {len(pts)}")
    y = pts["median"].to_numpy(float)
    weight = 1.0 / np.where(y > 0, y, 1.0)
    design = np.column_stack([pts.N.to_numpy(float), pts.B.to_numpy(float), np.ones(len(pts))])
    coef, _ = nnls(design * weight[:, None], y * weight)
    return {"per_module_seconds": float(coef[0]), "per_buffer_seconds": float(coef[1]), "fixed_seconds": float(coef[2])}


def cost_summary(rows, clock: str = "cpu") -> str:
    """One line: baseline ÷ (B × one ``state_dict()``) across the trees, and the optimized rule's cost
    per module, per buffer and fixed, in units a person reads (ns, µs)."""
    from .formatting import number, short_duration

    ratio = baseline_over_state_dicts(rows, clock)["baseline_over_B_state_dicts"]
    costs = linear_costs(rows, "optimized", clock)
    head = (f"[{clock} clock] baseline / (B × one state_dict()): median {number(ratio.median())} over {len(ratio)} "
            f"trees (min {number(ratio.min())}, max {number(ratio.max())})" if len(ratio) else
            f"[{clock} clock] no tree ran the baseline")
    fixed = costs["fixed_seconds"]
    return (f"{head}; optimized ≈ {short_duration(costs['per_module_seconds'])} per module + "
            f"{short_duration(costs['per_buffer_seconds'])} per buffer"
            + (f" + {short_duration(fixed)} fixed" if fixed > 0 else ", no measurable fixed cost"))


# =========================================================================== plots


def plot_sweep(rows, fits: dict[str, LogLogFit] | None = None, clock: str = "wall"):  # -> Figure
    """Three log-log panels (a) state_dict vs N, (b) baseline vs B·N, (c) optimized vs N + B.

    Synthetic medians are coloured by B with min-max bars over the repeats, the fitted line is
    dashed, and the real Token2Wav is a star. Built without pyplot, so no GUI backend is touched.
    """
    import numpy as np
    from matplotlib.figure import Figure

    fits = fits if fits is not None else fit_sweep(rows, clock)
    med = medians(rows, clock)
    synth = med[med.source == SYNTHETIC]
    b_values = sorted(synth.B.unique())
    colours = {b: f"C{i % 10}" for i, b in enumerate(b_values)}
    fig = Figure(figsize=(16, 5.2), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, (exp, (what, xlabel)), letter in zip(axes, EXPERIMENTS.items(), "abc"):
        pts = synth[synth.experiment == exp]
        for b in b_values:
            sub = pts[pts.B == b].sort_values("x")
            if sub.empty:
                continue
            yerr = np.vstack([sub["median"] - sub["min"], sub["max"] - sub["median"]])
            ax.errorbar(sub.x, sub["median"], yerr=yerr, fmt="o", ms=5, capsize=2, color=colours[b],
                        label=f"synthetic tree, B = {b}")
        fit = fits.get(exp)
        if fit:
            xs = np.geomspace(fit.x_min, fit.x_max, 50)
            ax.plot(xs, fit.predict(xs), "k--", lw=1.2,
                    label=f"fit: slope {fit.slope:.3f}, R² {fit.r2:.4f}")
        for rec in med[(med.source != SYNTHETIC) & (med.experiment == exp)].itertuples(index=False):
            ax.plot([rec.x], [rec.median], marker="*", ms=16, color="crimson", mec="black", ls="none",
                    label=f"{rec.source} (N={rec.N}, B={rec.B}): {rec.median * 1e3:.3g} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("wall time per call (s)" if clock == "wall" else "thread CPU time per call (s)")
        ax.set_title(f"({letter}) {what}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"What module traversal costs ({'wall clock' if clock == 'wall' else 'thread CPU time'}): "
                 "medians of repeats, log-log, with fitted power laws")
    return fig


# =========================================================================== writing


@dataclass
class SweepResult:
    """The sweep's rows, fits and where the real model sits, by wall clock and by thread CPU time.

    ``fits``/``placement`` use the wall clock (what a user waits for); ``fits_cpu``/``placement_cpu``
    the thread's CPU time, which is what to trust when other processes compete for the cores.
    """

    rows: Any  # pandas.DataFrame, columns CSV_COLUMNS
    fits: dict[str, LogLogFit]
    placement: Any  # pandas.DataFrame (see place_points)
    config: SweepConfig
    fits_cpu: dict[str, LogLogFit] = field(default_factory=dict)
    placement_cpu: Any = None
    seconds: float = 0.0
    files: dict[str, Path] = field(default_factory=dict)

    def fits_for(self, clock: str) -> dict[str, LogLogFit]:
        return self.fits if clock == "wall" else self.fits_cpu

    def fits_frame(self):  # -> DataFrame
        import pandas as pd

        return pd.DataFrame([
            {"clock": clock, "experiment": e, "x": EXPERIMENTS[e][1], **f.to_dict()}
            for clock in CLOCKS for e, f in self.fits_for(clock).items()
        ])

    def summary(self) -> str:
        lines = [(f"traversal sweep: {len(self.config.trees())} synthetic trees, {self.config.repeats} repeats, "
                  f"{self.seconds:.1f} s")]
        for clock in CLOCKS:
            for exp, fit in self.fits_for(clock).items():
                lines.append(f"  {clock:<4} {exp:<10} vs {EXPERIMENTS[exp][1]:<26} slope {fit.slope:6.3f} "
                             f"± {fit.stderr:.3f}   R² {fit.r2:.4f}   ({fit.n_points} points)")
        for clock, placement in (("wall", self.placement), ("cpu", self.placement_cpu)):
            if placement is None:
                continue
            for rec in placement.itertuples(index=False):
                where = "inside" if rec.inside_fitted_range else "outside"
                lines.append(f"  {clock:<4} {rec.source} {rec.experiment:<10} x={rec.x:>8,}  median "
                             f"{rec.median_seconds * 1e3:9.3f} ms = {rec.measured_over_fit:.2f}x the fitted line "
                             f"({where} the fitted x range)")
        return "\n".join(lines)


def write_sweep(out_dir: str | Path, result: SweepResult) -> dict[str, Path]:
    """Write traversal.csv, fits.csv, fits.json and the plots (PNG and SVG, wall and CPU) into ``out_dir``."""
    from .metadata import environment, now_iso

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {key: out / name for key, name in FILES.items()}
    result.rows.to_csv(files["rows"], index=False)
    result.fits_frame().to_csv(files["fits_csv"], index=False)
    record: dict[str, Any] = {
        "created": now_iso(),
        "config": result.config.to_dict(),
        "seconds": result.seconds,
        "experiments": {e: {"timed": what, "x": x} for e, (what, x) in EXPERIMENTS.items()},
        "columns": {"seconds": "wall clock per call", "cpu_seconds": "thread CPU time per call"},
    }
    for clock, suffix in (("wall", ""), ("cpu", "_cpu")):
        ratio = baseline_over_state_dicts(result.rows, clock)
        placement = result.placement if clock == "wall" else result.placement_cpu
        record["fits" + suffix] = {e: f.to_dict() for e, f in result.fits_for(clock).items()}
        record["placement" + suffix] = placement.to_dict(orient="records") if placement is not None else []
        record["baseline_over_B_state_dicts_median" + suffix] = (
            float(ratio["baseline_over_B_state_dicts"].median()) if len(ratio) else None)
        try:
            record["optimized_linear_costs" + suffix] = linear_costs(result.rows, "optimized", clock)
        except ValueError:
            record["optimized_linear_costs" + suffix] = None
    record["environment"] = environment("cpu")
    files["fits_json"].write_text(json.dumps(record, indent=2, default=str))
    for clock, png, svg in (("wall", "plot_png", "plot_svg"), ("cpu", "plot_cpu_png", "plot_cpu_svg")):
        fig = plot_sweep(result.rows, result.fits_for(clock), clock)
        fig.savefig(files[png], dpi=110)
        fig.savefig(files[svg])
    result.files = files
    return files


def traversal_sweep(
    out_dir: str | Path | None = None,
    quick: bool = False,
    repeats: int | None = None,
    progress: bool = True,
    **overrides: Any,
) -> SweepResult:
    """Run the sweep (``quick`` or full settings, ``repeats`` and any :class:`SweepConfig` field
    overridden), fit it, and write it into ``out_dir`` when given."""
    if repeats is not None:
        overrides["repeats"] = repeats
    config = (SweepConfig.quick if quick else SweepConfig.full)(**overrides)
    start = time.perf_counter()
    rows = run_sweep(config, progress=progress)
    fits, fits_cpu = fit_sweep(rows, "wall"), fit_sweep(rows, "cpu")
    result = SweepResult(rows=rows, fits=fits, placement=place_points(rows, fits, "wall"), config=config,
                         fits_cpu=fits_cpu, placement_cpu=place_points(rows, fits_cpu, "cpu"),
                         seconds=time.perf_counter() - start)
    if out_dir is not None:
        write_sweep(out_dir, result)
    return result


# =========================================================================== CLI


def cmd_traversal(args: argparse.Namespace) -> int:
    overrides: dict[str, Any] = {"token2wav": None if args.token2wav == "none" else args.token2wav}
    if args.warmup is not None:
        overrides["warmup"] = args.warmup
    result = traversal_sweep(args.out, quick=args.quick, repeats=args.repeats, progress=not args.no_progress,
                             **overrides)
    print(result.summary())
    print(f"wrote {', '.join(p.name for p in result.files.values())} to {args.out}")
    return 0


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "traversal",
        help="sweep synthetic module trees: cost of state_dict() and both discovery rules vs N and B",
        description="Time one state_dict() against N modules, the baseline discovery against B·N and the "
                    "optimized one against N + B on synthetic trees, fit log-log slopes, place the real "
                    "Token2Wav on the curves, and write traversal.csv, fits.csv, fits.json and plots to --out.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (files in it are replaced)")
    p.add_argument("--quick", action="store_true", help="small trees, 3 repeats: seconds instead of minutes")
    p.add_argument("--repeats", type=_count(1), metavar="N", help="timed repeats per point (default 7, quick 3)")
    p.add_argument("--warmup", type=_count(0), metavar="N", help="warm-up calls per point (default 1)")
    p.add_argument("--token2wav", choices=("full", "tiny", "none"), default="full",
                   help="real Token2Wav to place on the curves (default full, built on the CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_traversal)
