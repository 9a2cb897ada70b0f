"""``omni-loader compare`` as text and files: the side-by-side table in Markdown, CSV and JSON, and its plot.

Everything here formats a :class:`~omni_loader.compare.side_by_side.SideBySide`; nothing reads a results
directory. Times in a column share one unit, the PR's for that row."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results.spec import BenchmarkSpec
from ..errors import ResultsError
from ..formatting import TIME_SCALE, duration, format_seconds, markdown_table, time_unit
from ..reporting.measurements import LABELS, PR_ROWS, label, phase_unit
from ..reporting.report_environment import variants_text
from ..names import VARIANTS
from ..token2wav.options import option_fields
from .side_by_side import NOT_RECORDED, Entry, SideBySide

REFERENCE_LABEL = "PR 7061 (as published)"
PLOT_STEM = "compare_ratios"


def column_unit(result: SideBySide, phase: str) -> str:
    """One time unit per column: the one the PR's own figure for that row takes (startup in seconds)."""
    ref = result.reference_row(phase)
    return phase_unit(phase, ref["baseline"] if ref else math.nan)


def _in(value: float, unit: str) -> str:
    """A time in ``unit`` without the unit: the bounds of a range whose unit the median beside it names."""
    return f"{value * TIME_SCALE[unit]:,.3f}" if math.isfinite(value) else "n/a"


def _ratio_text(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.2f}×"


def measurement_cell(result: SideBySide, entry: Entry, phase: str) -> str:
    """Medians with their min–max, the ratio with its interval, the verdict: one table cell."""
    c = entry.comparison(phase)
    if c is None:
        return "not measured"
    if c.unit == "calls":
        return f"{c.baseline.median:g} → {c.optimized.median:g} ({c.verdict()})"
    u = column_unit(result, phase)
    iv = entry.intervals.get(phase)
    interval = f" [{iv[0]:.2f}–{iv[1]:.2f}]" if iv else ""
    return (f"{duration(c.baseline.median, u)} [{_in(c.baseline.min, u)}–{_in(c.baseline.max, u)}] → "
            f"{duration(c.optimized.median, u)} [{_in(c.optimized.min, u)}–{_in(c.optimized.max, u)}]; "
            f"{_ratio_text(c.ratio)}{interval}; {c.verdict()}"
            + (f"; confounded by {', '.join(entry.confounded[phase])}" if phase in entry.confounded else ""))


def reference_cell(result: SideBySide, phase: str) -> str:
    ref = result.reference_row(phase)
    if ref is None:
        return "not published"
    if ref["unit"] == "calls":
        return f"{ref['baseline']:g} → {ref['optimized']:g}"
    u = column_unit(result, phase)
    return (f"{duration(ref['baseline'], u)} → {duration(ref['optimized'], u)}; "
            f"{_ratio_text(ref['baseline'] / ref['optimized'])}; {ref.get('note') or 'medians as published'}")


def checks_cell(result: SideBySide, entry: Entry) -> str:
    found = result.checks_for(entry.label)
    if entry.label == result.anchor:
        head = "reference for the checks" + (" and --against" if result.against else "")
        return head + ("; " + "; ".join(f"problem: {c.message}" for c in found) if found else "")
    if not found:
        return "ok: same model, digest and counts"
    marks = {"mismatch": "✗ MISMATCH", "problem": "problem", "note": "note"}
    return "; ".join(f"{marks[c.kind]} ({c.what})" for c in found)


def _short_commit(commit: str) -> str:
    sha = commit.removesuffix("-dirty")
    return commit if commit == NOT_RECORDED else sha[:10] + commit[len(sha):]


def _reference_env(result: SideBySide) -> dict[str, str]:
    env = result.reference.get("environment", {})
    return {"machine": f"{env.get('GPU', '?')} ({'ROCm ' + env['ROCm'] if env.get('ROCm') else 'GPU'})",
            "torch": env.get("PyTorch", "?"), "transformers": "not published",
            "kit_commit": f"vLLM-Omni {env.get('vLLM-Omni', '?')} (no omni-loader)",
            "layout": "vllm-omni (inside vLLM-Omni)", "construct": "resident (upstream on a GPU, inside vLLM-Omni)",
            "runs": env.get("Repeats", "?"), "model": env.get("Model", "?"),
            "cache": "warm (the PR: model files already cached)"}


# The settings the main table shows, field name -> title: each option declared with a ``column``, and the run counts
# before the page cache, the condition each of those runs met.
_SHOWN = {n: f.metadata["column"] for n, f in option_fields(BenchmarkSpec).items() if "column" in f.metadata}
TABLE_SETTINGS = {**{n: t for n, t in _SHOWN.items() if n != "cache"}, "runs": "Runs", "cache": _SHOWN["cache"]}


def table_rows(result: SideBySide) -> tuple[list[str], list[list[str]]]:
    """The main table: the PR's figures first, then one row per results directory."""
    header = ["Results", "Machine", "torch", "transformers", "Kit commit", *TABLE_SETTINGS.values(),
              *[LABELS[p] for p in result.pr_rows], "Checks"]
    ref = _reference_env(result)
    rows = [[REFERENCE_LABEL, ref["machine"], ref["torch"], ref["transformers"], ref["kit_commit"],
             *[ref.get(n, "not published") for n in TABLE_SETTINGS],
             *[reference_cell(result, p) for p in result.pr_rows], "—"]]
    for e in result.entries:
        name = e.label + (" (archive)" if e.archive else "") + (" ✗" if result.mismatched(e.label) else "")
        rows.append([name, e.machine, str(e.environment.get("torch") or NOT_RECORDED),
                     str(e.environment.get("transformers") or NOT_RECORDED), _short_commit(e.kit_commit),
                     *[" + ".join(str(e.runs.get(v, 0)) for v in VARIANTS) if n == "runs" else e.setting(n)
                       for n in TABLE_SETTINGS],
                     *[measurement_cell(result, e, p) for p in result.pr_rows], checks_cell(result, e)])
    return header, rows


def against_table(result: SideBySide) -> tuple[list[str], list[list[str]]]:
    a = result.against or ""
    header = ["Results", "Measurement", "Variant", f"{a} median", "Median", "Ratio", "Mann-Whitney p", "Verdict"]
    rows = []
    for r in result.against_rows:
        c = r.comparison
        u = column_unit(result, r.phase) if r.phase in PR_ROWS else time_unit(c.baseline.median if c else math.nan)
        rows.append([r.entry, label(r.phase), r.variant,
                     format_seconds(c.baseline.median, u) if c else "—",
                     format_seconds(c.optimized.median, u) if c else "—",
                     f"{r.ratio:.3f}" if c else "—",
                     f"{c.p_value:.3g}" if c and c.p_value is not None else "—", r.verdict()])
    return header, rows


def check_lines(result: SideBySide) -> list[str]:
    """One Markdown bullet per directory: what its checks against the anchor found."""
    lines = []
    for e in result.entries:
        found = result.checks_for(e.label)
        if e.label == result.anchor:
            lines.append(f"- **{e.label}**: the reference of the checks (model {e.model!r}, layout {e.layout} / "
                         f"{e.dtype}, digest {e.digest_text}).")
        elif not found:
            lines.append(f"- **{e.label}**: ok: same model, tensor digest and counts as {result.anchor}.")
        for c in found:
            mark = {"mismatch": "✗ mismatch", "problem": "problem in the directory", "note": "note"}[c.kind]
            lines.append(f"- **{e.label}**: {mark} ({c.what}): {c.message}.")
    return lines


def variant_lines(result: SideBySide) -> list[str]:
    """Which vLLM-Omni releases the compared arms are (the PR's rows compare 0.28.0 with 0.30.0): one line
    when every directory ran the same arms, else one per directory."""
    texts = {e.label: variants_text(e.suite) for e in result.entries}
    if not texts:
        return []
    if len(set(texts.values())) == 1:
        return [f"**Variants**: {next(iter(texts.values()))}.", ""]
    return [*(f"- **Variants of {label}**: {text}" for label, text in texts.items()), ""]


def render_markdown(result: SideBySide, plot: str | None = None) -> str:
    """The table, the checks explained, the --against table, and the plot when it was written (``plot``: its path)."""
    n = len(result.entries)
    header, rows = table_rows(result)
    parts = [
        "# Reproductions side by side",
        "",
        f"{n} results {'directory' if n == 1 else 'directories'} and the PR's own figures. Each row's medians "
        "[min–max], ratio baseline/optimized [95% bootstrap interval] and verdict are that directory's own "
        f"statistics, as its report.md gives them. Checks are made against **{result.anchor}**.",
        "",
        *variant_lines(result),
        markdown_table(rows, header),
        "",
        "## Checks",
        "",
        *check_lines(result),
        "",
    ]
    if result.against:
        h, r = against_table(result)
        parts += [f"## Against {result.against}", "",
                  f"Every other directory against **{result.against}**, phase by phase and variant by variant: "
                  f"the ratio of medians (above 1: slower than {result.against}) and a two-sided Mann-Whitney test "
                  "on the raw samples, as pyperf's compare_to does.", "",
                  markdown_table(r, h) if r else "No phase was measured by both.", ""]
    if plot:
        parts += ["## Ratios", "", f"![ratios]({plot})", ""]
    return "\n".join(part.rstrip("\n") for part in parts)  # blocks one line apart, tables included


# The columns that say what each row is and ran on; then every benchmark setting (SETTING_COLUMNS), then its runs.
CSV_FIXED = ("results", "kind", "source", "schema_version", "model", "device_name", "gpu_backend", "gpu_version", "cpu",
             "torch", "transformers", "kit_commit")
# BenchmarkSpec's fields with the load options flat (one per option: a new field is a column with no further edit);
# ``variants`` holds the arms' description (which releases they are), ``checkpoint`` is ``source``.
SETTING_COLUMNS = tuple(name for name in option_fields(BenchmarkSpec) if name != "checkpoint")
CSV_RUNS = ("runs_baseline", "runs_optimized", "digest")
CSV_PER_ROW = ("baseline_median", "baseline_min", "baseline_max", "optimized_median", "optimized_min",
               "optimized_max", "ratio", "ratio_low", "ratio_high", "p_value", "verdict")


def table_records(result: SideBySide) -> list[dict[str, Any]]:
    """The main table as records with raw values (seconds, counts): one per directory, the PR's first."""
    env = result.reference.get("environment", {})
    ref_env = _reference_env(result)
    runs = (ref_env["runs"].split() or ["?"])[0]
    records = [{"results": REFERENCE_LABEL, "kind": "reference", "source": "data/reference/pr7061.json",
                "model": ref_env["model"], "device": "cuda", "device_name": env.get("GPU", ""),
                "gpu_backend": "rocm" if env.get("ROCm") else "", "gpu_version": env.get("ROCm", ""),
                "torch": ref_env["torch"], "kit_commit": ref_env["kit_commit"], "layout": "vllm-omni",
                "construct": "resident", "cache": "warm", "runs_baseline": runs, "runs_optimized": runs,
                "checks": ""}]
    for phase in result.pr_rows:
        ref = result.reference_row(phase)
        if ref:
            records[0].update({f"{phase}_baseline_median": ref["baseline"], f"{phase}_optimized_median":
                               ref["optimized"], f"{phase}_verdict": ref.get("note") or "as published"})
            if ref["unit"] != "calls":
                records[0][f"{phase}_ratio"] = ref["baseline"] / ref["optimized"]
    for e in result.entries:
        env = e.environment
        rec: dict[str, Any] = {
            "results": e.label, "kind": "archive" if e.archive else "directory", "source": str(e.source),
            "schema_version": e.schema_version, "model": e.model,
            "device_name": env.get("device_name", ""), "gpu_backend": env.get("gpu_backend") or "",
            "gpu_version": e.gpu_version, "cpu": env.get("cpu", ""), "torch": env.get("torch", ""),
            "transformers": env.get("transformers", ""), "kit_commit": e.kit_commit,
            **{name: setting_cell(e, name) for name in SETTING_COLUMNS},
            "runs_baseline": e.runs.get("baseline", 0), "runs_optimized": e.runs.get("optimized", 0),
            "digest": " ".join(e.digests), "variants": variants_text(e.suite),
            "checks": "; ".join(f"{c.kind} ({c.what}): {c.message}" for c in result.checks_for(e.label)),
        }
        for phase in result.pr_rows:
            c = e.comparison(phase)
            if c is None:
                rec[f"{phase}_verdict"] = "not measured"
                continue
            rec.update(zip((f"{phase}_{k}" for k in CSV_PER_ROW), (
                c.baseline.median, c.baseline.min, c.baseline.max, c.optimized.median, c.optimized.min,
                c.optimized.max, c.ratio if c.unit == "s" else None, *e.intervals.get(phase, (None, None)),
                c.p_value, c.verdict())))
        records.append(rec)
    return records


def csv_columns(result: SideBySide) -> list[str]:
    return [*CSV_FIXED, *SETTING_COLUMNS, *CSV_RUNS, *[f"{p}_{k}" for p in result.pr_rows for k in CSV_PER_ROW], "checks"]


def setting_cell(entry: Entry, name: str) -> Any:
    """One benchmark setting of ``entry`` for a table: a list joined by commas, absent from its record (an older
    kit's) :data:`NOT_RECORDED`, ``None`` (e.g. no --worker-timeout) empty."""
    if name == "workers":
        return entry.workers  # schema-1 records said in_process
    value = entry.spec.get(name, entry.record.get(name, NOT_RECORDED))
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value


# One row of the against table with raw values (seconds; the interval is of median(results) − median(against)),
# empty but for the names where a side lacks the phase.
AGAINST_COLUMNS = ("results", "against", "phase", "variant", "against_n", "n", "against_median", "median", "ratio",
                   "p_value", "ci_low", "ci_high", "significant", "verdict")


def against_records(result: SideBySide) -> list[dict[str, Any]]:
    out = []
    for r in result.against_rows:
        c = r.comparison
        measured = {} if c is None else {
            "against_n": c.baseline.n, "n": c.optimized.n, "against_median": c.baseline.median,
            "median": c.optimized.median, "ratio": r.ratio, "p_value": c.p_value, "ci_low": c.ci_low,
            "ci_high": c.ci_high, "significant": c.significant}
        out.append({**dict.fromkeys(AGAINST_COLUMNS), "results": r.entry, "against": r.against, "phase": r.phase,
                    "variant": r.variant, **measured, "verdict": r.verdict()})
    return out


def _csv(columns: Sequence[str], records: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in records)
    return buf.getvalue()


def render_csv(result: SideBySide, table: str = "results") -> str:
    """``table`` 'results' (one row per directory, the PR's first) or 'against' (one row per phase and variant)."""
    if table == "against":
        return _csv(AGAINST_COLUMNS, against_records(result))
    return _csv(csv_columns(result), table_records(result))


def to_json(result: SideBySide) -> dict[str, Any]:
    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None if math.isnan(value) else str(value)
        return value

    return {
        "anchor": result.anchor,
        "against": result.against,
        "pr_rows": list(result.pr_rows),
        "results": [{k: clean(v) for k, v in r.items()} for r in table_records(result)],
        "checks": [{"results": c.entry, "kind": c.kind, "what": c.what, "message": c.message} for c in result.checks],
        "against_rows": [{k: clean(v) for k, v in r.items()} for r in against_records(result)],
    }


def render(result: SideBySide, fmt: str = "md", plot: str | None = None) -> str:
    """The comparison as text: 'md', 'csv' (the directories; with --against, the against table after a
    blank line) or 'json'."""
    if fmt == "json":
        return json.dumps(to_json(result), indent=2, default=str)
    if fmt == "csv":
        text = render_csv(result)
        return text + ("\n" + render_csv(result, "against") if result.against else "")
    if fmt == "md":
        return render_markdown(result, plot)
    raise ResultsError(f"--format must be md, csv or json, not {fmt!r}")


def write_plot(result: SideBySide, directory: str | os.PathLike[str]) -> list[Path]:
    """``compare_ratios.png`` / ``.svg`` and the values drawn, ``compare_ratios.csv`` (see figures.figure_data);
    nothing when no timed row was measured."""
    from ..reporting.figures import write_figure  # matplotlib: loaded when a plot is drawn, not with the command line
    from .ratio_plot import directories_ratio_figure

    if not any(p != "state_dict_calls" for p in result.pr_rows):
        return []
    return write_figure(directories_ratio_figure(result), directory, PLOT_STEM)


def write_compare(result: SideBySide, out: str | os.PathLike[str]) -> list[Path]:
    """Every form under ``out``: compare.md (with the plot), compare.csv, against.csv, compare.json, plots/."""
    from ..reporting.figures import figure_files
    from ..safe_files import ensure_dir, refuse_links, write_text

    out = ensure_dir(out)  # a linked folder is refused, never written into
    names = ["compare.md", "compare.csv", "compare.json", "against.csv"]
    refuse_links(out, [*names, "plots"])  # every file checked before the first byte is written
    if (out / "plots").is_dir():
        refuse_links(out / "plots", figure_files(PLOT_STEM))
    plots = write_plot(result, out / "plots")
    png = next((p for p in plots if p.suffix == ".png"), None)
    files = {"compare.md": render_markdown(result, png.relative_to(out).as_posix() if png else None),
             "compare.csv": render_csv(result), "compare.json": json.dumps(to_json(result), indent=2, default=str)}
    if result.against:
        files["against.csv"] = render_csv(result, "against")
    written = []
    for name, text in files.items():
        write_text(out / name, text if text.endswith("\n") else text + "\n")
        written.append(out / name)
    return written + plots


