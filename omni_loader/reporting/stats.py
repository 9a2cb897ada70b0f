"""Statistics over saved rows: per-phase summaries, A/B comparisons, verdicts.

Computed from ``runs.csv`` rows (measured, successful runs only); a :class:`Summary` keeps its raw samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..names import short_digest
from ..results.planner import FIXED_ALPHA
from ..formatting import duration, time_unit  # the one unit rule

HIGH_SPREAD = 0.10  # IQR / median above which a summary carries a warning
ALPHA = FIXED_ALPHA  # one claim's error rate; a sequential design's looks test at shares of it
STATISTICS = ("n", "median", "q1", "q3", "iqr", "min", "max")  # a Summary's figures, as a table's columns


@dataclass(frozen=True)
class Summary:
    """The samples of one phase for one variant, and the statistics they imply."""

    variant: str
    phase: str
    samples: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.samples)

    @cached_property
    def _quartiles(self) -> tuple[float, float, float]:
        q1, med, q3 = np.percentile(self.samples, [25, 50, 75]) if self.samples else (math.nan,) * 3
        return float(q1), float(med), float(q3)

    @property
    def median(self) -> float:
        return self._quartiles[1]

    @property
    def q1(self) -> float:
        return self._quartiles[0]

    @property
    def q3(self) -> float:
        return self._quartiles[2]

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def min(self) -> float:
        return min(self.samples) if self.samples else math.nan

    @property
    def max(self) -> float:
        return max(self.samples) if self.samples else math.nan

    @property
    def relative_iqr(self) -> float:
        return self.iqr / self.median if self.median else math.nan

    @property
    def high_spread(self) -> bool:
        return self.n >= 2 and self.relative_iqr > HIGH_SPREAD

    def as_row(self) -> dict[str, Any]:
        return {"variant": self.variant, "phase": self.phase, **{k: getattr(self, k) for k in STATISTICS}}


@dataclass(frozen=True)
class Comparison:
    """Baseline against optimized for one measurement."""

    phase: str
    baseline: Summary
    optimized: Summary
    unit: str = "s"  # "s" for times, "calls" / "bytes" for counts
    p_value: float | None = None
    ci_low: float | None = None  # bootstrap interval of median(optimized) - median(baseline)
    ci_high: float | None = None
    notes: list[str] = field(default_factory=list)
    alpha: float = ALPHA  # the error rate this comparison tests at (a sequential design's look: its share)

    @property
    def difference(self) -> float:
        return self.optimized.median - self.baseline.median

    @property
    def percent(self) -> float:
        return 100.0 * abs(self.difference) / self.baseline.median if self.baseline.median else math.nan

    @property
    def ratio(self) -> float:
        return self.baseline.median / self.optimized.median if self.optimized.median else math.inf

    @property
    def ranges_overlap(self) -> bool:
        return ranges_overlap(self.baseline.samples, self.optimized.samples)

    @property
    def significant(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha

    def change(self, row_unit: str | None = None) -> str:
        return phrase_change(self.baseline.median, self.optimized.median, self.unit, row_unit)

    @property
    def interval_excludes_zero(self) -> bool:
        """The bootstrap interval of Δ median lies wholly on one side of zero."""
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 0 or self.ci_high < 0)

    def differs(self, floor: NoiseFloor | None = None) -> bool:
        """The kit's verdict on a time: a difference is claimed when the (1 − ``alpha``) bootstrap interval
        of Δ median excludes zero, the rank test agrees (Mann-Whitney p < ``alpha``) and the difference exceeds any
        A/A noise floor. One slow run moves medians and ranks little, where it decides the PR's min–max rule."""
        if self.unit != "s" or not self.interval_excludes_zero or not self.significant:
            return False
        return floor is None or math.isnan(floor.resolvable_fraction) or floor.resolves(self)

    def verdict(self, floor: NoiseFloor | None = None) -> str:
        """The kit's verdict (:meth:`differs`) in words; counts are deterministic or not."""
        if self.unit != "s":
            return "deterministic count" if self.baseline.min == self.baseline.max else "count varies between runs"
        if self.baseline.n < 2 or self.optimized.n < 2:
            return "too few runs for a test"
        if self.differs(floor):
            direction = "faster" if self.difference < 0 else "slower"
            beyond = "; beyond the A/A noise floor" if floor is not None and not math.isnan(
                floor.resolvable_fraction) else ""
            return f"{direction} ({self.level} CI of Δ median excludes 0, Mann-Whitney p={self.p_value:.3g}{beyond})"
        if self.interval_excludes_zero and self.significant:
            return "within the A/A noise floor: no difference claimed"
        if smallest_p(self.baseline.n, self.optimized.n) >= self.alpha:
            return (f"no difference claimed: {self.baseline.n}+{self.optimized.n} runs cannot reach "
                    f"p < {self.alpha:g} (their smallest p is {smallest_p(self.baseline.n, self.optimized.n):.2g}; "
                    f"{runs_to_reach(self.alpha)} runs a side can)")
        return f"no difference claimed ({self.level} CI of Δ median includes 0 or Mann-Whitney p={self.p_value:.3g})"

    @property
    def level(self) -> str:
        """The interval's confidence in words: '95%' at the kit's 0.05, '99%' at a first look's 0.01."""
        return confidence_words(self.alpha)

    def pr_rule(self) -> str:
        """The PR's own rule, for the PR-format rows: separate min–max ranges, or no claim."""
        if self.unit != "s":
            return "—"
        if self.baseline.n < 2 or self.optimized.n < 2:
            return "too few runs"
        return "ranges overlap: no claim" if self.ranges_overlap else "ranges separate"


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided exact Mann-Whitney p ``n1`` + ``n2`` runs can give (3 + 3: 0.1, no claim at 0.05)."""
    return 2 / math.comb(n1 + n2, n1) if n1 and n2 else 1.0  # at most 2 / C(2, 1) = 1 with a run a side


def runs_to_reach(alpha: float) -> int:
    """The fewest runs a side whose smallest p is under ``alpha``, said beside 'no difference claimed'."""
    return next(n for n in range(2, 1000) if smallest_p(n, n) < alpha)


def ranges_overlap(a: tuple[float, ...] | list[float], b: tuple[float, ...] | list[float]) -> bool:  # any point shared
    return bool(a) and bool(b) and max(min(a), min(b)) <= min(max(a), max(b))


def phrase_change(baseline: float, optimized: float, unit: str = "s", row_unit: str | None = None) -> str:
    """The PR's phrasing: '455.382 ms faster, 99.66%', '1,150.313 ms faster, 98.99%', 'Removed 219 calls'.

    A time difference is written in the unit of its row (:func:`formatting.time_unit`), as the PR did.
    """
    if unit == "calls":
        if baseline == optimized:
            return "unchanged"
        if optimized == 0:
            return f"Removed {baseline:g} calls"
        n = abs(baseline - optimized)
        return f"{n:g} {'fewer' if optimized < baseline else 'more'} call{'' if n == 1 else 's'}"
    if unit == "bytes":
        diff = optimized - baseline
        return "unchanged" if diff == 0 else f"{diff / 2**20:+,.1f} MiB"
    diff = baseline - optimized
    if diff == 0:
        return "unchanged"
    pct = 100.0 * abs(diff) / baseline if baseline else math.nan
    unit_of_row = row_unit or time_unit(baseline)
    return f"{duration(abs(diff), unit_of_row)} {'faster' if diff > 0 else 'slower'}, {pct:.2f}%"


def mann_whitney(a: tuple[float, ...], b: tuple[float, ...]) -> float | None:
    """Two-sided Mann-Whitney U p-value (exact for small samples), or None when undefined."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import mannwhitneyu

    if len(set(a) | set(b)) == 1:
        return 1.0
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def bootstrap_median_difference(
    a: tuple[float, ...], b: tuple[float, ...], confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of ``median(b) - median(a)``, or None when a sample has < 2 points."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import bootstrap

    def stat(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(y, axis=axis) - np.median(x, axis=axis)

    res = bootstrap((np.asarray(a), np.asarray(b)), stat, confidence_level=confidence, n_resamples=resamples,
                    method="percentile", rng=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def ratio_interval(c: Comparison) -> tuple[float, float] | None:
    """95% bootstrap interval of baseline/optimized, from that of the median log-times' difference."""
    if c.unit != "s" or any(x <= 0 for x in (*c.baseline.samples, *c.optimized.samples)):
        return None
    ci = bootstrap_median_difference(tuple(math.log(x) for x in c.optimized.samples),
                                     tuple(math.log(x) for x in c.baseline.samples))
    return (math.exp(ci[0]), math.exp(ci[1])) if ci else None


def confidence_words(alpha: float) -> str:
    """``1 - alpha`` as a reader writes it: 0.05 -> '95%', 0.04 -> '96%'."""
    return f"{100 * (1 - alpha):.3g}%"


def compare(baseline: Summary, optimized: Summary, unit: str = "s", alpha: float = ALPHA) -> Comparison:
    """Build a :class:`Comparison` with its test, its (1 − ``alpha``) interval and spread warnings."""
    p = ci = None
    if unit == "s":
        p = mann_whitney(baseline.samples, optimized.samples)
        ci = bootstrap_median_difference(baseline.samples, optimized.samples, confidence=1 - alpha)
    notes = [
        f"{s.variant} spread is high: IQR is {100 * s.relative_iqr:.0f}% of the median"
        for s in (baseline, optimized)
        if unit == "s" and s.high_spread
    ]
    return Comparison(
        phase=baseline.phase, baseline=baseline, optimized=optimized, unit=unit, p_value=p,
        ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None, notes=notes, alpha=alpha,
    )


# --------------------------------------------------------------------------- from rows


def measured(frame):  # pandas.DataFrame -> pandas.DataFrame
    """Rows of measured (not warm-up), successful runs."""
    return frame[(~frame["warmup"]) & (frame["status"] == "ok")]


def phase_summary(frame, variant: str, phase: str, source: str = "load") -> Summary:
    """Samples of one phase from rows of ``source`` ('load' for loader phases, 'server' for serve-ab's)."""
    rows = measured(frame)
    rows = rows[(rows["variant"] == variant) & (rows["phase"] == phase) & (rows["source"] == source)]
    return Summary(variant, phase, tuple(float(x) for x in rows.sort_values("run_id")["seconds"]))


def run_summary(frame, variant: str, column: str) -> Summary:
    """A per-run column (a count or a memory figure) as a Summary, one sample per measured run."""
    rows = measured(frame)
    rows = rows[(rows["variant"] == variant) & (rows["source"] == "load")].drop_duplicates("run_id")
    values = [float(v) for v in rows[column] if str(v) not in ("", "nan")]
    return Summary(variant, column, tuple(values))


def summary_table(frame):  # -> pandas.DataFrame
    """One row per variant and phase: n, median, quartiles, IQR, min, max; variants in plan order."""
    import pandas as pd

    first = {v: i for i, v in enumerate(frame.sort_values("run_id", kind="stable")["variant"].drop_duplicates())}
    keys = measured(frame)[["source", "variant", "phase"]].drop_duplicates()
    keys = keys.assign(s=pd.factorize(keys["source"])[0], v=keys["variant"].map(first)).sort_values(["s", "v"], kind="stable")
    out = [{"source": s, **phase_summary(frame, v, p, s).as_row()} for s, v, p, *_ in keys.itertuples(index=False)]
    return pd.DataFrame(out, columns=["source", "variant", "phase", *STATISTICS])


@dataclass(frozen=True)
class NoiseFloor:
    """What an A/A benchmark (the same variant in both arms) says about one phase on this machine.

    The smallest resolvable change is the larger of the A/A difference of medians and its bootstrap interval's
    half-width, relative to the A/A median.
    """

    phase: str
    arm1: Summary
    arm2: Summary
    ci_low: float | None
    ci_high: float | None

    @property
    def median(self) -> float:
        return float(np.median([*self.arm1.samples, *self.arm2.samples])) if self.arm1.n + self.arm2.n else math.nan

    @property
    def resolvable_seconds(self) -> float:
        if self.ci_low is None or self.ci_high is None:
            return math.nan
        return max(abs(self.arm2.median - self.arm1.median), (self.ci_high - self.ci_low) / 2)

    @property
    def resolvable_fraction(self) -> float:
        return self.resolvable_seconds / self.median if self.median else math.nan

    def resolves(self, comparison: Comparison) -> bool:
        """True when an A/B difference is larger than this floor (relative to the baseline median)."""
        return comparison.percent / 100 > self.resolvable_fraction


def noise_floor(frame, phase: str, arms: tuple[str, str] = ("aa-1", "aa-2")) -> NoiseFloor | None:
    """The A/A floor of ``phase`` from rows with source 'aa', or None when there are none."""
    one, two = (phase_summary(frame, arm, phase, "aa") for arm in arms)
    if one.n < 2 or two.n < 2:
        return None
    ci = bootstrap_median_difference(one.samples, two.samples)
    return NoiseFloor(phase, one, two, ci[0] if ci else None, ci[1] if ci else None)


def equivalence(frame, variants: list[str] | tuple[str, ...] | None = None) -> dict[str, Any]:
    """Did every successful run of every variant (A/A runs included) load the same model?

    The same digest of every tensor *and* the same counts: other persistent buffers can still end as equal tensors.
    """
    rows = frame[(frame["status"] == "ok") & frame["source"].isin(["load", "aa"])]
    runs = rows.drop_duplicates("run_id")
    # Every planned arm must have loaded something: an arm whose runs all failed is not "equivalent".
    arms = list(dict.fromkeys([*(variants or ("baseline", "optimized")), *runs["variant"]]))
    # Every row of every run, not only its first: a digest or count changed on one phase row is a different load.
    digests = {v: sorted(set(rows[rows["variant"] == v]["digest"].astype(str))) for v in arms}
    counts = {c: {v: sorted(set(rows[rows["variant"] == v][c].astype(str))) for v in arms} for c in EQUAL_COUNTS}
    all_digests = set().union(*digests.values())
    same_counts = {c: len(set().union(*per_arm.values())) == 1 for c, per_arm in counts.items()}
    ok = len(all_digests) == 1 and all(digests.values()) and "" not in all_digests and all(same_counts.values())
    if ok:
        fixed = ", ".join(_counted(next(iter(set().union(*counts[c].values()))), c) for c in counts)
        statement = (f"equivalent: all {len(runs)} runs of {_arms_phrase(arms)} loaded identical tensors "
                     f"({short_digest(next(iter(all_digests)))}; {fixed})")
    elif len(all_digests) != 1 or not all(digests.values()) or "" in all_digests:
        statement = f"NOT equivalent: {_digest_phrase(digests)}"
    else:
        statement = "NOT equivalent: " + "; ".join(
            f"{c.replace('_', ' ')} differ: " + ", ".join(f"{v} {'/'.join(vals) or 'none'}" for v, vals in per_arm.items())
            for c, per_arm in counts.items() if not same_counts[c])
    return {"equivalent": ok, "runs": int(len(runs)), "digests": digests, "statement": statement}


# Per-run counts that must be equal for two loads to be the same load.
EQUAL_COUNTS = ("weights_loaded", "persistent_buffers")
_ONE = {"weights_loaded": "weight loaded", "persistent_buffers": "persistent buffer"}  # "1 persistent buffers" read wrong


def _counted(value: str, column: str) -> str:
    return f"{value} {_ONE[column] if value == '1' else column.replace('_', ' ')}"


def _digest_phrase(digests: dict[str, list[str]]) -> str:
    """Which arm loaded what, in one line: 'baseline 1a2b3c4d…; optimized 1a2b3c4d…, 9f8e7d6c…; assign none'."""
    def short(ds: list[str]) -> str:
        return ", ".join(short_digest(d) for d in ds) or "no successful run"

    return "digests differ between runs or variants: " + "; ".join(f"{v} {short(ds)}" for v, ds in digests.items())


def _arms_phrase(arms: list[str]) -> str:
    variants = [a for a in arms if not a.startswith("aa-")]
    text = "both variants" if len(variants) == 2 else f"all {len(variants)} variants ({', '.join(variants)})"
    return text + (" and the A/A arms" if len(variants) < len(arms) else "")


def memory_verdict(baseline: Summary, optimized: Summary, tolerance: float = 0.02) -> str:
    """'unchanged' when the medians are within ``tolerance`` of each other or the ranges overlap. From a baseline median
    of 0 no relative change exists: separate ranges are then a change, said without a percentage (equal medians of 0
    always have overlapping ranges)."""
    if not baseline.n or not optimized.n:
        return "not measured"
    if ranges_overlap(baseline.samples, optimized.samples):
        return "unchanged (within noise)"
    if not baseline.median:
        return "changed (from a median of 0)"
    rel = abs(optimized.median - baseline.median) / baseline.median
    return "unchanged (within noise)" if rel <= tolerance else f"changed by {100 * rel:.1f}%"
