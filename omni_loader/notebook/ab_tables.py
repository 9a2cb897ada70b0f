"""An A/B's tables as a notebook reader scans them: the PR's rows, the controls with each enclosing row's
saving taken apart, and the variants beyond the PR, each a styled table computed from the saved rows.

``report.md``'s cells are phrases that run to several lines in an output area; here a cell holds one number in
the unit its header names, and a verdict is one word whose rule is said once (:func:`verdict_legend`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..formatting import TIME_SCALE, table, time_unit
from ..reporting.controls import MATERIAL, ControlReport, control_report, pair_reports
from ..reporting.measurements import PR_ROWS, label, noise_floors, row_unit
from ..results.suite import Suite
from ..reporting.report_tables import BEYOND_ROWS, beyond_comparisons
from ..reporting.sequential import design_alpha
from ..reporting.stats import (ALPHA, HIGH_SPREAD, Comparison, NoiseFloor, compare, confidence_words,
                               memory_verdict, run_summary)
from ..names import OUTER_LOAD_WEIGHTS
from .showing import unbroken

# The rows that enclose other phases, named short where a cell lists them.
SHORT_ROWS = {"weight_loading": "weight loading", OUTER_LOAD_WEIGHTS: "vLLM's load_weights", "total": "whole load"}
RSS_COLUMN = "rss_peak_bytes"
TO = "\u00a0…\u00a0"  # between the two ends of a range: non-breaking, so a range never breaks across lines


# The verdict words of a table, each one phrase that never wraps (its spaces non-breaking): the rule behind them is
# said once, under the tables (verdict_legend), and report.md writes each verdict out as a sentence.
FASTER, SLOWER, NO_CLAIM, TOO_FEW = "faster", "slower", "no claim", "too few runs"
VERDICT_WORDS = (FASTER, SLOWER, NO_CLAIM, TOO_FEW)


# Where a line may break inside a quantity: between a number and its unit, and at the dash of a range "0.961–0.970".
QUANTITY_GAPS = re.compile(r"(?<=\d) (?=(?:ns|µs|ms|s|%|x|KiB|MiB|GiB|bytes)(?![\w]))|(?<=\d)–(?=[−-]?\d)")


def whole_quantities(text: Any) -> Any:
    """A cell of words that may wrap, each quantity (a number and unit, a range) kept on one line."""
    if not isinstance(text, str):
        return text
    return QUANTITY_GAPS.sub(lambda m: "\u00a0" if m.group(0) == " " else TO, text)


def verdict_word(c: Comparison, floor: NoiseFloor | None = None) -> str:
    """The kit's verdict in a word or two that never wrap (:data:`VERDICT_WORDS`)."""
    if c.unit != "s":
        return "deterministic" if c.baseline.min == c.baseline.max else "varies"
    if c.baseline.n < 2 or c.optimized.n < 2:
        return unbroken(TOO_FEW)
    if c.differs(floor):
        return FASTER if c.difference < 0 else SLOWER
    return unbroken(NO_CLAIM)


def verdict_legend(first: str = "baseline", second: str = "optimized", alpha: float = ALPHA) -> str:
    """The rule behind the verdict words and what a saving is, said once under the tables."""
    return (f"*saving*: the median of `{first}` less that of `{second}` (negative: `{second}` is slower); "
            f"*verdict*: **{FASTER}** or **{SLOWER}** where the {confidence_words(alpha)} bootstrap interval of the "
            f"difference of medians excludes 0 and the Mann-Whitney test agrees (p < {alpha:g}), beyond the A/A noise "
            f"floor where one was measured; **{NO_CLAIM}** where either fails (no difference is claimed); "
            f"**{TOO_FEW}** where a side has too few runs for a test. `report.md` writes each verdict out as a "
            "sentence.")


def spread_line(comps: list[Comparison]) -> str:
    """The report's *Spread warnings* in one paragraph ('' when no phase's spread is high)."""
    timed = [c for c in comps if c.unit == "s"]
    high = [c for c in timed if c.notes]
    if not high:
        return ""
    first, second = high[0].baseline.variant, high[0].optimized.variant

    def share(s) -> str:
        return f"{100 * s.relative_iqr:.0f}%" if math.isfinite(s.relative_iqr) else "n/a"

    phases = ", ".join(f"{label(c.phase)} {share(c.baseline)}\u00a0/\u00a0{share(c.optimized)}" for c in high)
    return (f"**Spread warnings**: in {len(high)} of {len(timed)} timed phases a variant's interquartile range is "
            f"above {100 * HIGH_SPREAD:.0f}% of its median (IQR ÷ median, `{first}` / `{second}`): {phases}. "
            "`report.md` lists them one a line under *Spread warnings*; each phase's min–max is in the *Every phase* "
            "table.")


def words_only(styler, columns: list[str]):  # -> Styler
    """``columns`` of ``styler`` as plain text that breaks between its words only, never inside an identifier."""
    from html import escape

    return styler.format(lambda v: escape(str(v), quote=False), subset=columns).set_properties(
        subset=columns, **{"overflow-wrap": "normal"})


def _timed(frame, columns: list[str], unit: str, **more: Any):  # -> Styler
    """``frame`` with its ``columns`` (seconds) in ``unit`` to three decimals, the first column unbroken."""
    scaled = frame.assign(**{c: frame[c] * TIME_SCALE[unit] for c in columns})
    renamed = {c: f"{c} ({unit})" for c in columns}
    decimals = {**{renamed[c]: 3 for c in columns}, **more.pop("decimals", {})}
    return words_only(table(scaled.rename(columns=renamed), decimals=decimals, **more), [frame.columns[0]])


def _range(low: float | None, high: float | None, unit: str) -> str:
    """A range's two ends in ``unit`` to three decimals; "—" where it has none."""
    if low is None or high is None:
        return "—"
    return f"{low * TIME_SCALE[unit]:,.3f}{TO}{high * TIME_SCALE[unit]:,.3f}"


def time_tables(comps: list[Comparison], first: str = "baseline", second: str = "optimized",
                floors: dict[str, NoiseFloor] | None = None, pr_rule: bool = False) -> list[Any]:
    """The timed rows of ``comps`` as tables, one per time unit (with ``pr_rule``, the PR's rule too)."""
    import pandas as pd

    floors = floors or {}
    by_unit: dict[str, list[Comparison]] = {}
    for c in comps:
        if c.unit == "s" and c.baseline.n and c.optimized.n:
            by_unit.setdefault(row_unit(c), []).append(c)
    shown = []
    for unit, rows in by_unit.items():
        frame = pd.DataFrame([{
            "measurement": label(c.phase), f"{first} median": c.baseline.median, f"{second} median": c.optimized.median,
            "saving": -c.difference, "saving (%)": -100 * c.difference / c.baseline.median if c.baseline.median else math.nan,
            f"{first} ÷ {second}": c.ratio if math.isfinite(c.ratio) else math.nan,
            f"{first} min–max ({unit})": _range(c.baseline.min, c.baseline.max, unit),
            f"{second} min–max ({unit})": _range(c.optimized.min, c.optimized.max, unit),
            "verdict": verdict_word(c, floors.get(c.phase)),
            **({"PR's rule (min–max)": c.pr_rule()} if pr_rule else {})} for c in rows])
        shown.append(ratio_cells(_timed(frame, [f"{first} median", f"{second} median", "saving"], unit,
                                        decimals={"saving (%)": 1}), [f"{first} ÷ {second}"]))
    return shown


def ratio_cells(styler, columns: list[str]):  # (Styler, ...) -> Styler
    """``columns`` of ratios written as the PR's table writes one, ``252.66×``."""
    return styler.format(lambda v: "" if not math.isfinite(v) else f"{v:,.2f}×", subset=columns)


def count_table(comps: list[Comparison], first: str = "baseline", second: str = "optimized") -> list[Any]:
    """The counts and memory of ``comps`` as a table (none without them), one whole number a cell, the unit in the
    row's name."""
    import pandas as pd

    rows = []
    for c in comps:
        if c.unit == "s" or not c.baseline.n or not c.optimized.n:
            continue
        scale, name = (2**20, "Peak process RSS (MiB)") if c.unit == "bytes" else (1, label(c.phase))
        verdict = verdict_word(c) if c.unit == "calls" else memory_verdict(c.baseline, c.optimized).split(" ")[0]
        rows.append({"measurement": name, f"{first} median": round(c.baseline.median / scale),
                     f"{second} median": round(c.optimized.median / scale),
                     # a saving, as the time tables give one: positive where the second needs fewer calls or less memory
                     "saving": round(-c.difference / scale), "verdict": verdict})
    return [words_only(table(pd.DataFrame(rows)), ["measurement"])] if rows else []


def pr_rows(comps: list[Comparison], floors: dict[str, Any], alpha: float = ALPHA) -> list[Any]:
    """The PR's rows of ``comps`` (every phase compared at ``alpha``, with the A/A ``floors``) as tables: the times
    with both verdicts, then the counts, then the legend."""
    comps = [c for c in comps if c.phase in PR_ROWS]
    return [*time_tables(comps, floors=floors, pr_rule=True), *count_table(comps), verdict_legend(alpha=alpha)]


def pair_tables(frame, suite: Suite, first: str, second: str) -> list[Any]:
    """``second`` against ``first`` as tables, and which rows a control both run unchanged moved."""
    custom = {v["name"]: v for v in suite.spec.get("custom_variants") or [] if isinstance(v, dict)}
    comps = beyond_comparisons(frame, first, second, design_alpha(suite))  # the rows "beyond the PR" compares
    if RSS_COLUMN in frame:  # and peak RSS
        comps.append(compare(*(run_summary(frame, v, RSS_COLUMN) for v in (first, second)), unit="bytes"))
    shown = [*count_table(comps, first, second), *time_tables(comps, first, second)]
    report = control_report(frame, custom.get(first, first), custom.get(second, second), noise_floors(frame))
    confounded = [r for r in (report.rows if report else []) if r.confounded and r.phase in BEYOND_ROWS]
    if confounded:
        # said whole here: the notebook showing these tables (05) has no Controls section to point to
        shown.append("Confounded: " + "; ".join(
            f"{label(r.phase)} by {', '.join(label(p) for p in r.confounders)}" for r in confounded)
            + f". A phase both variants run unchanged differed by at least {100 * MATERIAL:.0f}% of the row: the "
            "machine moved the row too, so its saving is not the change's alone (`report.md` in the results "
            "directory takes it apart under Controls).")
    return shown


def _ms(values: list[float]) -> str:
    return time_unit([abs(v) for v in values if math.isfinite(v)] or [0.0])


def saving_table(report: ControlReport):  # -> Styler
    """Each enclosing row's saving taken apart into changed steps, controls and the rest."""
    import pandas as pd

    changed = ", ".join(label(p) for p in report.changed) or "none"
    frame = pd.DataFrame([{
        "row": label(r.phase), "saving": r.saving, f"changed: {changed}": r.changed_saving,
        "controls": r.controls_saving, "between phases": r.remainder, "controls inside": len(r.controls),
        "confounded by": ", ".join(label(p) for p in r.confounders) or "—"} for r in report.rows])
    seconds = ["saving", f"changed: {changed}", "controls", "between phases"]
    return _timed(frame, seconds, _ms(frame[seconds].to_numpy().ravel().tolist()))


def control_table(report: ControlReport):  # -> Styler
    """Each control of a pair: medians, saving and interval, verdict in a word, the rows it is inside."""
    import pandas as pd

    first, second = report.first, report.second
    unit = _ms([v for c in report.controls for v in (c.comparison.baseline.median, c.comparison.optimized.median)])
    rows = []
    for control in report.controls:
        c = control.comparison
        saving = (None, None) if c.ci_low is None else (-c.ci_high, -c.ci_low)  # Δ median's interval, negated
        inside = ", ".join(SHORT_ROWS.get(r.phase, label(r.phase)) for r in report.rows if control.phase in r.controls)
        rows.append({"control": label(c.phase), f"{first} median": c.baseline.median,
                     f"{second} median": c.optimized.median, "saving": -c.difference,
                     f"{c.level} CI of the saving ({unit})": _range(*saving, unit),
                     "verdict": verdict_word(c, control.floor),
                     "inside": (f"confounds {inside}" if report.material(control) else inside) or "—"})
    return _timed(pd.DataFrame(rows), [f"{first} median", f"{second} median", "saving"], unit)


def control_tables(frame, suite: Suite) -> list[Any]:
    """Every A/B pair's controls, as tables: each enclosing row's saving taken apart, then each control."""
    shown: list[Any] = []
    alpha = design_alpha(suite)
    for report in pair_reports(frame, suite, noise_floors(frame), alpha):
        changed = ", ".join(label(p) for p in report.changed) or "no step"
        shown += [f"### `{report.first}` against `{report.second}`\n\nThey differ only in {changed}. A control that "
                  f"differs by at least {100 * MATERIAL:.0f}% of an enclosing row's `{report.first}` median marks that "
                  "row confounded.", "**What each enclosing row saved**, taken apart (the parts add up to the "
                  "saving)", saving_table(report), "**Each control** (a phase both variants run unchanged)",
                  control_table(report), verdict_legend(report.first, report.second, alpha)]
    return shown
