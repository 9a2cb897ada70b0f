"""The tables of report.md that come from the rows of runs.csv: measurements, noise floor, memory,
the PR's figures, where the time goes, page faults, and the variants beyond the PR.

Each function takes rows (or comparisons) and returns Markdown, so a notebook can show any one table.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from ..formatting import duration, format_seconds, markdown_table, mib, percent, table, time_unit
from .measurements import LABELS, PR_PAIR, PR_ROWS, YARDSTICKS, label, row_unit
from ..results.suite import Suite
from ..names import LEAF_PHASES
from ..results.rows import PHASE_COUNTERS
from .controls import MATERIAL, ControlReport
from .stats import (ALPHA, Comparison, NoiseFloor, compare, confidence_words, measured, memory_verdict, phase_summary,
                    phrase_change, run_summary)
from .sequential import design_alpha
from .stats import STATISTICS, summary_table  # a DataFrame; styled_summary_table below shows it

# The rows compared for each variant beyond the PR's pair.
BEYOND_ROWS = ("state_dict_calls", "buffer_discovery", "load_parameters", "weight_loading", "total")


def _fmt(value: float, unit: str, unit_of_row: str | None = None) -> str:
    if unit == "calls":
        return f"{value:g}"
    if unit == "bytes":
        return mib(value, 0)
    return duration(value, unit_of_row)


def _spread(c: Comparison, which: str) -> str:
    s = getattr(c, which)
    if c.unit != "s":
        return f"{_fmt(s.min, c.unit)}–{_fmt(s.max, c.unit)}"
    u = row_unit(c)
    return f"{_fmt(s.min, 's', u)}–{_fmt(s.max, 's', u)} (IQR {_fmt(s.iqr, 's', u)})"


def _ratio(c: Comparison) -> str:
    if c.unit == "calls":
        return "—"
    return "∞" if math.isinf(c.ratio) else f"{c.ratio:.2f}×"


def _floor_cell(c: Comparison, floor: NoiseFloor | None) -> str:
    if c.unit != "s" or floor is None or math.isnan(floor.resolvable_fraction):
        return "—"
    return f"±{100 * floor.resolvable_fraction:.1f}% ({'resolved' if floor.resolves(c) else 'below the floor'})"


def measurement_table(comps: list[Comparison], floors: dict[str, NoiseFloor] | None = None) -> str:
    """Every comparison: medians, change, ratio, spread, test, interval, verdict (and the A/A floor)."""
    header = ["Measurement", "Baseline median", "Optimized median", "Change", "Ratio",
              "Baseline min–max", "Optimized min–max", "Mann-Whitney p", f"{_level(comps)} CI of Δ median", "Verdict",
              "PR's rule (min–max)"]
    header += ["A/A noise floor"] if floors else []
    floors = floors or {}
    rows = []
    for c in comps:
        u = row_unit(c)
        ci = (f"{_fmt(c.ci_low, 's', u)} … {_fmt(c.ci_high, 's', u)}" if c.ci_low is not None else "—")
        rows.append([label(c.phase), _fmt(c.baseline.median, c.unit, u),
                     _fmt(c.optimized.median, c.unit, u),
                     c.change(u), _ratio(c), _spread(c, "baseline"), _spread(c, "optimized"),
                     f"{c.p_value:.3g}" if c.p_value is not None else "—", ci, c.verdict(floors.get(c.phase)),
                     c.pr_rule()]
                    + ([_floor_cell(c, floors.get(c.phase))] if floors else []))
    return markdown_table(rows, header)


def noise_floor_table(floors: dict[str, NoiseFloor]) -> str:
    """Per phase, the smallest change the A/A arms resolve, and the kit's verdict on the arms themselves."""
    rows = []
    for phase, f in floors.items():
        u = time_unit(f.median)
        rows.append([label(phase), f"{f.arm1.n} + {f.arm2.n}", format_seconds(f.arm1.median, u),
                     format_seconds(f.arm2.median, u),
                     f"{format_seconds(min(f.arm1.min, f.arm2.min), u)}–{format_seconds(max(f.arm1.max, f.arm2.max), u)}",
                     format_seconds(f.resolvable_seconds, u), f"±{100 * f.resolvable_fraction:.1f}%",
                     compare(f.arm1, f.arm2).verdict()])
    return markdown_table(rows, ["Phase", "Runs (arm 1 + arm 2)", "Arm 1 median", "Arm 2 median",
                                 "Min–max (both arms)", "Smallest resolvable change", "Relative",
                                 "Kit's verdict on the arms"])


def yardstick_lines(frame) -> list[str]:
    """``load_parameters`` against a plain strict ``load_state_dict`` of the same tensors, same runs,
    with the first touches (minor page faults) each met: the copy into the resident model meets none,
    so the faults are what tells the loader's own overhead from the memory it touched first."""
    lines = []
    for yardstick, phase in YARDSTICKS.items():
        for v in PR_PAIR:
            ref, ours = phase_summary(frame, v, yardstick), phase_summary(frame, v, phase)
            if not ref.n or not ours.n:
                continue
            ratios = [o / r for o, r in zip(ours.samples, ref.samples) if r > 0]
            faults = [_median_counter(frame, v, p, "minor_faults") for p in (phase, yardstick)]
            touched = (f"; minor page faults (first touches) {faults[0]:,.0f} against {faults[1]:,.0f}"
                       if None not in faults else "")
            lines.append(f"- {v}: {label(phase)} {format_seconds(ours.median)} against {label(yardstick)[11:]} "
                         f"{format_seconds(ref.median)} in the same {ours.n} runs: {statistics.median(ratios):.2f}× "
                         f"(per-run ratios {min(ratios):.2f}–{max(ratios):.2f}×){touched}")
    if not lines:
        return []
    return ["### Load parameters against a plain copy", "",
            "After each load (outside its timed phases) the same checkpoint tensors were copied once more into "
            "the same, now resident, model with a strict `load_state_dict`: what copying alone costs on this "
            "machine. The loader's step also meets the first touches that construction leaves to it: the "
            "checkpoint's newly mapped pages in every mode, and with `--construct upstream-cpu` the fused `qkv_proj` "
            "that upstream allocates with `torch.empty`; the copy meets none. The ratio is how much more the loader's "
            "step takes, first touches included.", "", *lines, ""]


def _median_counter(frame, variant: str, phase: str, column: str) -> float | None:
    """The median of a per-phase counter over a variant's measured runs, or None where not recorded."""
    if column not in frame:
        return None
    ok = measured(frame)
    values = ok[(ok["variant"] == variant) & (ok["phase"] == phase) & (ok["source"] == "load")][column].dropna()
    return float(values.median()) if len(values) else None


def counters_table(frame) -> str:
    """Medians per phase of the kernel's counters: where first touches land, when the CPU was taken away."""
    rows = []
    for phase in ("total", *LEAF_PHASES):
        cells = [label(phase)]
        for column in PHASE_COUNTERS:
            for v in PR_PAIR:
                median = _median_counter(frame, v, phase, column)
                cells.append("—" if median is None else f"{median:,.0f}")
        rows.append(cells)
    header = ["Phase"] + [f"{name} ({v[:4]}.)" for name in ("Minor faults", "Major faults", "Voluntary switches",
                                                            "Involuntary switches") for v in PR_PAIR]
    return markdown_table(rows, header)


def reference_table(comps: list[Comparison], reference: dict[str, Any]) -> str:
    """The PR's published medians and ratios beside this run's, row by row."""
    mine = {c.phase: c for c in comps}
    rows = []
    for ref in reference["measurements"]:
        c = mine.get(ref["measurement"])
        unit = "calls" if ref["unit"] == "calls" else "s"
        pr_ratio = "—" if unit == "calls" else f"{ref['baseline'] / ref['optimized']:.2f}×"
        pr_u = time_unit(ref["baseline"])
        u = row_unit(c) if c else None
        rows.append([ref["label"], _fmt(ref["baseline"], unit, pr_u), _fmt(ref["optimized"], unit, pr_u), pr_ratio,
                     _fmt(c.baseline.median, unit, u) if c else "not measured",
                     _fmt(c.optimized.median, unit, u) if c else "not measured", _ratio(c) if c else "—"])
    return markdown_table(rows, ["Measurement", "PR baseline", "PR optimized", "PR ratio", "This run baseline",
                                 "This run optimized", "This run ratio"], right=range(1, 7))  # numbers: right


def attribution_table(frame) -> str:
    """Each leaf phase's median and its share of the same variant's median whole load."""
    rows = []
    totals = {v: phase_summary(frame, v, "total").median for v in PR_PAIR}
    if any(math.isnan(t) for t in totals.values()):
        return "No loader runs in this directory."
    u = time_unit(max(totals.values()))
    for phase in LEAF_PHASES:
        cells = [LABELS.get(phase, phase)]
        for v in PR_PAIR:
            s = phase_summary(frame, v, phase)
            share = s.median / totals[v] if s.n and totals[v] else None
            cells += [format_seconds(s.median, u), percent(share)]
        rows.append(cells)
    return markdown_table(rows, ["Phase", "Baseline median", "Share", "Optimized median", "Share"], right=range(1, 5))


def memory_table(frame) -> tuple[str, str]:
    """The peak-memory table and its verdicts in one line ('not measured' without figures)."""
    rows, verdicts = [], []
    for column, name in (("rss_peak_bytes", "Peak process RSS"), ("device_peak_bytes", "Peak device memory")):
        base, opt = run_summary(frame, "baseline", column), run_summary(frame, "optimized", column)
        if not base.n or not opt.n:
            continue
        verdict = memory_verdict(base, opt)
        rows.append([name, _fmt(base.median, "bytes"), f"{_fmt(base.min, 'bytes')}–{_fmt(base.max, 'bytes')}",
                     _fmt(opt.median, "bytes"), f"{_fmt(opt.min, 'bytes')}–{_fmt(opt.max, 'bytes')}", verdict])
        verdicts.append(f"{name}: {verdict}")
    text = markdown_table(rows, ["Memory", "Baseline median", "Baseline min–max", "Optimized median",
                                 "Optimized min–max", "Verdict"])
    return text, "; ".join(verdicts) or "not measured"


def headline(comps: list[Comparison], equiv: dict[str, Any], memory: str,
             floors: dict[str, NoiseFloor] | None = None, controls: ControlReport | None = None,
             marks: dict[str, str] | None = None) -> list[str]:
    """The report's first bullets: each PR row in a sentence, then equivalence, memory and controls."""
    lines = []
    floors = floors or {}
    for c in comps:
        if c.phase in PR_ROWS:
            u = row_unit(c)
            floor = _floor_cell(c, floors.get(c.phase))
            account = controls.row(c.phase) if controls else None
            mark = (f"; **confounded** by {', '.join(label(p) for p in account.confounders)} (see Controls)"
                    if account and account.confounded else "")
            change = c.change(u)  # "Removed 219 calls" heads a table cell; inside a sentence's brackets, lower case
            lines.append(f"- **{LABELS[c.phase]}**: {_fmt(c.baseline.median, c.unit, u)} → "
                         f"{_fmt(c.optimized.median, c.unit, u)} ({change[:1].lower() + change[1:]}); "
                         f"{c.verdict(floors.get(c.phase))}"
                         + (f"; A/A noise floor {floor}" if floor != "—" else "")
                         + (f"; PR's rule: {c.pr_rule()}" if c.unit == "s" else "") + mark
                         + (marks or {}).get(c.phase, "") + ".")
    lines.append(f"- **Equivalence**: {equiv['statement']}.")
    lines.append(f"- **Memory**: {memory}.")
    if controls:
        lines.append(f"- **Controls**: {controls_sentence(controls)}")
    return lines


def _medians(c: Comparison) -> str:
    """Both medians of a time's row in the row's one unit: '10.015 s → 9.965 s', never '→ 9,965.000 ms'."""
    u = row_unit(c)
    return f"{duration(c.baseline.median, u)} → {duration(c.optimized.median, u)}"


def controls_sentence(report: ControlReport) -> str:
    """One sentence: how many shared phases differ (each with figures), how many of those by enough to confound
    a row, or that none does; then what the change bought. The count is the Controls table's: every control
    it calls faster or slower is counted, not only those that confound."""
    changed = ", ".join(label(p) for p in report.changed) or "no step"
    differing = [c for c in report.controls if c.differs]
    if differing:
        named = "; ".join(f"{label(c.phase)} {_medians(c.comparison)} ({c.comparison.verdict(c.floor)})"
                          for c in differing)
        material = [label(c.phase) for c in report.confounders]
        share = f"{100 * MATERIAL:.0f}% of a row it is in"
        if len(differing) == 1:
            which = (f"by at least {share}: the rows holding it are confounded" if material else
                     f"by less than {share}, so no row is confounded")
        else:
            which = (f"{len(material)} of them ({', '.join(material)}) by at least {share}: the rows holding "
                     f"{'it' if len(material) == 1 else 'them'} are confounded" if material else
                     f"none by {share}, so no row is confounded")
        head = (f"{len(differing)} of the {len(report.controls)} phases both variants run unchanged "
                f"differ{'s' if len(differing) == 1 else ''}: {named}; {which}. That is the machine, not the change")
    else:
        head = (f"none of the {len(report.controls)} phases both variants run unchanged differs "
                f"(same statistics{', beyond the A/A floor' if any(c.floor for c in report.controls) else ''})")
    bought = [f"{label(r.phase)} {_saving(r.saving)} = {_saving(r.changed_saving)} in the changed step "
              f"({changed}){_saving(r.controls_saving, True)} in controls{_saving(r.remainder, True)} between phases"
              for r in report.rows if r.phase == "weight_loading"]
    return head + (f"; {bought[0]}" if bought else "") + "."


def _saving(seconds: float, term: bool = False) -> str:
    """A saving in a sentence ('883.214 ms saved'); ``term``: as added in a sum (' − 2.980 ms')."""
    text, sign = duration(abs(seconds)), "−" if seconds < 0 and duration(abs(seconds)) != duration(0.0) else ""
    return f" {sign or '+'} {text}" if term else f"{sign}{text}"


def _level(comps: list[Comparison]) -> str:
    """The confidence of the intervals in a column ('95%'; a sequential design's look: its own)."""
    return confidence_words(comps[0].alpha if comps else ALPHA)


def controls_section(reports: list[ControlReport]) -> list[str]:
    """Every control of every A/B pair compared, and each enclosing row's saving taken apart."""
    if not reports:
        return []
    lines = ["## Controls", "",
             "A variant is a named set of steps, so the kit knows which phases two variants differ in; every other "
             "phase runs the same code in both arms and is a control: a difference there is the machine's (first "
             "touches priced by a virtual machine's host, carry-over from the run before, a neighbour), not the "
             "change's. Each control is tested like a headline row; one that differs by at least "
             f"{100 * MATERIAL:.0f}% of an enclosing row's baseline median marks that row confounded, and each "
             "enclosing row's saving is taken apart into the changed steps' saving and the controls' differences.",
             ""]
    for report in reports:
        lines += _pair_controls(report)
    return lines


def _pair_controls(report: ControlReport) -> list[str]:
    rows = []
    for control in report.controls:
        c = control.comparison
        u = row_unit(c)
        ci = f"{duration(c.ci_low, u)} … {duration(c.ci_high, u)}" if c.ci_low is not None else "—"
        inside = [label(r.phase) for r in report.rows if control.phase in r.controls]
        rows.append([label(c.phase), duration(c.baseline.median, u), duration(c.optimized.median, u),
                     c.change(u), ci, c.verdict(control.floor),
                     ("**confounds** " if report.material(control) else "") + (", ".join(inside) or "—")])
    accounts = []
    for r in report.rows:
        parts = ", ".join(f"{label(p)} {_saving(v)}" for p, v in r.controls.items() if p in r.confounders)
        mark = f" **Confounded** by {parts}." if r.confounded else ""
        changed = ", ".join(label(p) + ("" if p in r.changed else " (not timed)") for p in report.changed)
        accounts.append(f"- {label(r.phase)}: saving {_saving(r.saving)} = {_saving(r.changed_saving)} in the "
                        f"changed step{'s' if len(report.changed) != 1 else ''} ({changed or 'none'})"
                        f" + {_saving(r.controls_saving)} in {len(r.controls)} control{'s' * (len(r.controls) != 1)} + "
                        f"{_saving(r.remainder)} between phases (and what medians do not add up to). What the change "
                        f"itself bought: {_saving(r.changed_saving)}.{mark}")
    return [f"### `{report.first}` against `{report.second}`", "",
            f"They differ only in {', '.join(label(p) for p in report.changed) or 'no step'}.", "",
            markdown_table(rows, ["Control", f"{report.first} median", f"{report.second} median", "Change",
                                  f"{_level([c.comparison for c in report.controls])} CI of Δ median", "Verdict",
                                  "Inside"]), "", *accounts, ""]


def beyond_pr_section(frame, suite: Suite, controls: list[ControlReport] | None = None) -> list[str]:
    """Every variant outside the PR's pair, compared with the benchmark's first variant."""
    spec = suite.spec
    arms = list(spec.get("variants") or PR_PAIR)
    first = arms[0]
    others = [v for v in arms[1:] if {first, v} != set(PR_PAIR)]
    if not others:
        return []
    from ..token2wav.variants import variant_from

    custom = {v["name"]: v for v in spec.get("custom_variants", [])}
    rows, notes = [], []
    for v in others:
        pair = next((r for r in controls or [] if (r.first, r.second) == (first, v)), None)
        rows += _beyond_rows(frame, first, v, pair, design_alpha(suite))
        variant = variant_from(custom[v]) if v in custom else variant_from(v)
        steps = f"discovery `{variant.discovery}`, parameters `{variant.parameters}`"
        notes.append(f"- **{v}**: {steps}. Memory: {variant.memory or 'no change to where parameters live'}.")
    return ["## Beyond the PR", "",
            f"Each other variant against `{first}`, the first of this benchmark's variants, in the same runs "
            "(same alternation, same statistics; equivalence above covers every variant).", "",
            markdown_table(rows, ["Variant", "Measurement", f"{first} median", "Variant median", "Change", "Ratio",
                                  "Variant min–max", "Verdict"]), "", *notes, ""]


def beyond_comparisons(frame, first: str, second: str, alpha: float = ALPHA) -> list[Comparison]:
    """``second`` against ``first`` over :data:`BEYOND_ROWS`, the calls counted per run."""
    return [compare(run_summary(frame, first, phase), run_summary(frame, second, phase), unit="calls")
            if phase == "state_dict_calls" else
            compare(phase_summary(frame, first, phase), phase_summary(frame, second, phase), alpha=alpha)
            for phase in BEYOND_ROWS]


def _beyond_rows(frame, first: str, v: str, controls: ControlReport | None, alpha: float) -> list[list[str]]:
    rows = []
    for c in beyond_comparisons(frame, first, v, alpha):
        if not c.baseline.n or not c.optimized.n:
            continue
        u = row_unit(c)
        account = controls.row(c.phase) if controls else None
        mark = (f"; **confounded** by {', '.join(label(p) for p in account.confounders)} (see Controls)"
                if account and account.confounded else "")
        rows.append([v, label(c.phase), _fmt(c.baseline.median, c.unit, u), _fmt(c.optimized.median, c.unit, u),
                     c.change(u), _ratio(c), _spread(c, "optimized"), c.verdict() + mark])
    base_rss, rss = run_summary(frame, first, "rss_peak_bytes"), run_summary(frame, v, "rss_peak_bytes")
    if base_rss.n and rss.n:
        rows.append([v, "Peak process RSS", _fmt(base_rss.median, "bytes"), _fmt(rss.median, "bytes"),
                     phrase_change(base_rss.median, rss.median, "bytes"), "—",
                     f"{_fmt(rss.min, 'bytes')}–{_fmt(rss.max, 'bytes')}", memory_verdict(base_rss, rss)])
    return rows


SUMMARY_WORDS = {"n": "runs", "q1": "first quartile", "q3": "third quartile", "iqr": "interquartile range"}


def styled_summary_table(frame):  # -> pandas Styler
    """:func:`stats.summary_table` of a runs frame (one row per variant and phase) for a notebook: phases and
    headers in words (a reader need not know ``read_checkpoint``, ``q1``, ``iqr``), its times in one unit named
    in the headers, the source column only where the rows have more than one."""
    df = summary_table(frame)
    if df["source"].nunique() <= 1:
        df = df.drop(columns="source")
    df = df.assign(phase=df["phase"].map(label))
    seconds = [c for c in STATISTICS[1:] if c in df.columns]  # every figure but the count of runs
    return table(df.rename(columns=SUMMARY_WORDS), seconds=[SUMMARY_WORDS.get(c, c) for c in seconds])
