"""What the traversal sweep's rows say: medians, log-log fits, where a real model sits, per-item costs.

These functions read only the tidy rows of ``traversal.csv``, so a saved sweep can be fitted without torch and
the fitting tested on hand-built rows. A log-log slope is the growth law's exponent: 1 means linear in that x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

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
SYNTHETIC = "synthetic"  # the source of a synthetic tree's rows; a real model's rows name the model
REAL_TOKEN2WAV = "token2wav-"  # the sweep's real model's source: "token2wav-full" or "token2wav-tiny" (its size)


def source_words(source: str) -> str:
    """A tree's source as prose names it: ``token2wav-full`` is "full-size Token2Wav"; an audited architecture
    keeps its transformers name, which is what a reader types to build it."""
    if source.startswith(REAL_TOKEN2WAV):
        return f"{source.removeprefix(REAL_TOKEN2WAV).replace('full', 'full-size')} Token2Wav"
    return source


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

    xs = np.asarray(x, dtype=float)
    lx, ly = np.log10(xs), np.log10(np.asarray(y, dtype=float))
    if lx.size < 2 or np.ptp(lx) == 0:
        raise ValueError("a log-log fit needs at least two distinct x values")
    res = linregress(lx, ly)
    # x_min and x_max are the x values themselves: 10 ** log10(32) is 32.000000000000014
    return LogLogFit(slope=float(res.slope), intercept=float(res.intercept), r2=float(res.rvalue**2),
                     stderr=float(res.stderr), n_points=int(lx.size), x_min=float(xs.min()), x_max=float(xs.max()))


def medians(rows, clock: str = "wall"):  # DataFrame -> DataFrame
    """One row per (experiment, source, N, B, x): median, min and max seconds over the repeats on ``clock``."""
    grouped = rows.groupby(["experiment", "source", "N", "B", "x"], sort=True)[CLOCKS[clock]]
    return grouped.agg(median="median", min="min", max="max", repeats="count").reset_index()


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
        out.append({"experiment": rec.experiment, "source": rec.source, "N": rec.N, "B": rec.B, "x": rec.x,
                    "median_seconds": rec.median, "predicted_seconds": predicted,
                    "measured_over_fit": rec.median / predicted if fit else float("nan"),
                    "inside_fitted_range": bool(fit and fit.x_min <= rec.x <= fit.x_max)})
    return pd.DataFrame(out)


def placement_sentence(placement, clock: str = "wall clock") -> str:
    """Where each real model sits, one line per model from ``placement`` (:func:`place_points`): its N and B, each
    rule's x, how far apart they lie and each rule's median per unit of x."""
    from ..formatting import count, short_duration, times

    if placement is None or placement.empty:
        return "No real model was placed on the lines (token2wav = None)."
    lines = []
    for source, rows in placement.groupby("source", sort=False):
        at = rows.set_index("experiment")
        first = rows.iloc[0]
        name = source_words(source)
        head = f"{name[:1].upper()}{name[1:]}: N = {count(first.N)} modules, B = {count(first.B)} buffers."
        if {"baseline", "optimized"} <= set(at.index):
            xb, xo = float(at.loc["baseline", "x"]), float(at.loc["optimized", "x"])
            mb, mo = float(at.loc["baseline", "median_seconds"]), float(at.loc["optimized", "median_seconds"])
            head += (f" The baseline sits on the B·N line at x = {count(xb)}, the optimized rule on the N + B line at "
                     f"x = {count(xo)}: {times(xb / xo)} apart on the x axis, at {short_duration(mb / xb)} and "
                     f"{short_duration(mo / xo)} per unit of x ({clock}).")
        lines.append(head)
    return "\n".join(lines)


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
    """Least squares ``seconds = per_module * N + per_buffer * B + fixed`` over the synthetic medians, non-negative
    (noisy medians can fake a negative fixed cost) and weighted by 1/median, so the small trees count as much."""
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
    """One line: baseline ÷ (B × one ``state_dict()``) across the trees, and the optimized rule's linear costs."""
    from ..formatting import number, short_duration

    ratio = baseline_over_state_dicts(rows, clock)["baseline_over_B_state_dicts"]
    costs = linear_costs(rows, "optimized", clock)
    head = (f"[{clock} clock] baseline / (B × one state_dict()): median {number(ratio.median())} over {len(ratio)} "
            f"trees (min {number(ratio.min())}, max {number(ratio.max())})" if len(ratio) else
            f"[{clock} clock] no tree ran the baseline")
    fixed = costs["fixed_seconds"]
    return (f"{head}; optimized ≈ {short_duration(costs['per_module_seconds'])} per module + "
            f"{short_duration(costs['per_buffer_seconds'])} per buffer"
            + (f" + {short_duration(fixed)} fixed" if fixed > 0 else ", no measurable fixed cost"))


def slope_beside_saved(result: Any, saved: Any) -> str:
    """This sweep's fitted baseline slope (wall clock) beside the one saved in ``saved``'s ``fits.json``: both slopes,
    their ranges and their difference in standard errors; this slope alone where nothing is saved there."""
    import json
    import math
    from pathlib import Path

    from ..formatting import span

    fit, x = result.fits["baseline"], EXPERIMENTS["baseline"][1].split(" (")[0]

    def fitted(f: dict[str, Any], repeats: Any) -> str:
        low, high = f"{f['x_min']:,.0f}", f"{f['x_max']:,.0f}"
        return (f"{f['n_points']} points, {x} {span(low, high)}, "
                f"{repeats} repeat{'' if repeats == 1 else 's'}")

    here = (f"The {x} line of this sweep: slope {fit.slope:.3f} ± {fit.stderr:.3f}, R² {fit.r2:.4f} "
            f"({fitted(asdict(fit), result.config.repeats)}).")
    path = Path(saved) / "fits.json"
    own = result.files.get("fits_json")
    if own is not None and Path(own).resolve() == path.resolve():
        return f"{here} It is the sweep saved in {path.parent}."
    try:
        record = json.loads(path.read_text())
        other = record["fits"]["baseline"]
    except (OSError, ValueError, KeyError):
        return (f"{here} No sweep is saved in {path.parent} to set it beside (notebook 03 writes its full sweep "
                "there), so it is compared with none.")
    difference = fit.slope - other["slope"]
    spread = math.hypot(fit.stderr, other["stderr"])
    ends = fit.x_max / other["x_max"]
    reach = ("ends where that one ends" if math.isclose(ends, 1) else
             f"ends {1 / ends:,.1f}× lower" if ends < 1 else f"ends {ends:,.1f}× higher")
    z = abs(difference) / spread if spread > 0 else math.nan
    errors = (f", {z:.1f} standard errors of their difference ({'within' if z < 2 else 'more than'} what the two "
              "fits' own uncertainty explains)," if spread > 0 else "")
    repeats = record.get("config", {}).get("repeats")
    return (f"{here} The sweep saved in {path.parent} ({record.get('created', 'undated')}) fits "
            f"{other['slope']:.3f} ± {other['stderr']:.3f} ({fitted(other, repeats)}): the slopes differ by "
            f"{abs(difference):.3f}{errors} and this sweep's fitted range {reach}."
            + level_beside_saved(result, record, Path(saved)))


def level_beside_saved(result: Any, record: dict[str, Any], saved: Any) -> str:
    """The real model's point on both sweeps' baseline lines (wall clock), and whether the sweeps ran in different
    speed modes of the machine (:func:`two_modes`), which would make their levels differ though the code does not."""
    import pandas as pd

    from ..formatting import count, short_duration

    try:
        place = next(p for p in record["placement"] if p["experiment"] == "baseline")
        saved_rows = pd.read_csv(saved / "traversal.csv")
        ours = result.placement_for("wall").set_index("experiment").loc["baseline"]
    except (OSError, ValueError, KeyError, StopIteration, AttributeError):
        return ""

    def repeats(rows: Any) -> list[float]:
        return list(rows[(rows["experiment"] == "baseline") & (rows["source"] == place["source"])][CLOCKS["wall"]])

    here, there = repeats(result.rows), repeats(saved_rows)
    if ours["source"] != place["source"] or not here or not there:
        return ""
    x = EXPERIMENTS["baseline"][1].split(" (")[0]
    said = (f" At the {source_words(place['source'])} ({x} = {place['x']:,}) this sweep's line predicts "
            f"{short_duration(ours['predicted_seconds'])} (its {count(len(here), 'repeat')}' median: "
            f"{short_duration(ours['median_seconds'])}), the saved one's {short_duration(place['predicted_seconds'])} "
            f"({short_duration(place['median_seconds'])}, {count(len(there), 'repeat')}): "
            f"{ours['predicted_seconds'] / place['predicted_seconds']:.2f} times as high.")
    modes = two_modes(here + there)
    if modes is None:
        return said
    fast, slow, cut = modes
    mode = {True: "slow", False: "fast"}
    ran = [mode[pd.Series(r).median() > cut] for r in (here, there)]
    said += (f" Their repeats fall in two clusters, around {short_duration(fast)} and around {short_duration(slow)}, "
             f"two speeds of the machine (its modes, or other work on it): this sweep's ran mostly at the {ran[0]} one "
             f"({sum(x <= cut for x in here)} of {len(here)} fast), the saved sweep's at the {ran[1]} one "
             f"({sum(x <= cut for x in there)} of {len(there)} fast)")
    return said + (", so their levels differ by the machine's speed, not by the code: set their slopes side by side, "
                   "not their levels." if ran[0] != ran[1] else ", the same speed.")


def two_modes(values: Sequence[float], gap: float = 1.3) -> tuple[float, float, float] | None:
    """``(fast, slow, cut)`` of two clusters of ``values`` at least ``gap`` apart, two or more each; else None."""
    import statistics

    v = sorted(x for x in values if x > 0)
    splits = [(v[i + 1] / v[i], i) for i in range(1, len(v) - 2)]
    if not splits or max(splits)[0] < gap:
        return None
    i = max(splits)[1]
    return statistics.median(v[:i + 1]), statistics.median(v[i + 1:]), (v[i] * v[i + 1]) ** 0.5
