"""Reproductions side by side: several results directories (or packed archives of them) in one table.

One results directory answers "what happened on my machine"; :func:`compare_results` answers "does
it hold on other machines, other torch versions, the other layout, the next commit". It reads every
directory with :func:`omni_loader.results.check_results` (any schema this kit reads; a newer or
unknown one is refused in one line), takes each directory's own statistics for the PR's rows
(:func:`omni_loader.report.comparisons`: medians, spread, ratio, verdict) and adds:

- the PR's own figures as a reference row (``data/reference/pr7061.json``);
- checks before anything is set side by side: the same model, the same tensor digest (the same
  checkpoint loads the same bytes on any device) and the same counts as the first directory (or
  the ``against`` one). A mismatch is shown in the table and explained, never silently mixed; a
  directory of another layout or dtype loads another module tree, so its digest and counts are not
  compared, and the table says so;
- with ``against``: every other directory against that one, phase by phase and variant by variant,
  as pyperf's ``compare_to`` does: the ratio of medians and a Mann-Whitney verdict on the raw
  samples (e.g. one machine before and after a torch upgrade).

Data (:class:`SideBySide`) and rendering (:func:`render_markdown`, :func:`render_csv`,
:func:`to_json`, :func:`ratio_figure`) are apart; :func:`write_compare` writes them all.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .archive import archive_format, opened
from .errors import ResultsError
from .report import LABELS, PR_ROWS, comparisons, load_reference, planned_arms
from .results import check_results
from .stats import (
    Comparison,
    Summary,
    bootstrap_median_difference,
    compare,
    equivalence,
    format_seconds,
    measured,
    run_summary,
    time_unit,
)

VARIANTS = ("baseline", "optimized")
NOT_RECORDED = "not recorded"
COUNT_COLUMNS = {"state_dict_calls": "state_dict() calls", "weights_loaded": "weights loaded",
                 "persistent_buffers": "persistent buffers"}
REFERENCE_LABEL = "PR 7061 (as published)"
PLOT_STEM = "compare_ratios"
ALL_PHASES = "all phases"  # the phase of an AgainstRow that stands for a pair not compared


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Entry:
    """One results directory (or archive of one), read and summarised by its own statistics."""

    label: str  # what the table calls it: the directory's name, made unique
    source: Path  # the directory or archive as given
    archive: bool
    metadata: dict[str, Any] = field(repr=False)
    comparisons: tuple[Comparison, ...] = field(repr=False)  # report.comparisons of its rows: PR rows first
    intervals: dict[str, tuple[float, float]] = field(repr=False)  # 95% interval of each timed row's ratio
    runs: dict[str, int] = field(default_factory=dict)  # measured successful runs per variant
    digests: tuple[str, ...] = ()  # tensor digests of its successful runs (one when they agree)
    counts: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict, repr=False)
    problems: tuple[str, ...] = ()  # what check_results and the equivalence check found in it

    @property
    def environment(self) -> dict[str, Any]:
        return self.metadata.get("environment") or {}

    @property
    def spec(self) -> dict[str, Any]:
        return self.metadata.get("spec") or {}

    @property
    def schema_version(self) -> int:
        return int(self.metadata.get("schema_version", 0))

    @property
    def model(self) -> str:
        return str(self.metadata.get("model") or NOT_RECORDED)

    def _setting(self, key: str) -> str:
        return str(self.spec.get(key) or self.metadata.get(key) or NOT_RECORDED)

    @property
    def layout(self) -> str:
        return self._setting("layout")

    @property
    def dtype(self) -> str:
        return self._setting("dtype")

    @property
    def construct(self) -> str:
        return self._setting("construct")  # absent in schema-1 directories

    @property
    def workers(self) -> str:
        if "workers" in self.spec:
            return str(self.spec["workers"])
        return "in-process" if self.spec.get("in_process") else NOT_RECORDED

    @property
    def gpu_version(self) -> str:
        env = self.environment
        return str(env.get("rocm_hip") or env.get("cuda") or "")

    @property
    def machine(self) -> str:
        """Device name, GPU backend and version, CPU: one cell."""
        env = self.environment
        cpu = env.get("cpu") or NOT_RECORDED
        device = str(env.get("device") or NOT_RECORDED)
        if device.startswith("cuda"):
            backend = {"rocm": "ROCm", "cuda": "CUDA"}.get(env.get("gpu_backend") or "", env.get("gpu_backend") or "GPU")
            return f"{env.get('device_name') or device} ({backend} {self.gpu_version}); CPU {cpu}"
        build = f", torch built for {env['gpu_backend']}" if env.get("gpu_backend") else ""
        return f"{device}: {cpu}{build}"

    @property
    def kit_commit(self) -> str:
        return str(self.environment.get("kit_commit") or NOT_RECORDED)

    def comparison(self, phase: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.phase == phase), None)


@dataclass(frozen=True)
class Check:
    """A finding about one entry: ``mismatch`` (not comparable, flagged), ``problem`` (in the directory
    itself) or ``note`` (an explained difference, e.g. another layout)."""

    entry: str
    kind: str  # mismatch | problem | note
    what: str  # model | digest | counts | layout | results
    message: str


@dataclass(frozen=True)
class AgainstRow:
    """One phase of one variant of an entry against the same in the ``against`` directory."""

    entry: str
    against: str
    phase: str
    variant: str
    comparison: Comparison | None  # stats.compare(against's samples, entry's samples); None when not compared
    reason: str = ""  # why not compared

    @property
    def ratio(self) -> float:
        """Entry's median over the against directory's: above 1 is slower."""
        c = self.comparison
        if c is None or not c.baseline.median:
            return math.nan
        return c.optimized.median / c.baseline.median

    def verdict(self) -> str:
        if self.comparison is None:
            return f"not compared: {self.reason}"
        c, r = self.comparison, self.ratio
        change = "equal medians" if r == 1 else (f"{r:.2f}x slower" if r > 1 else f"{1 / r:.2f}x faster")
        if c.p_value is None:
            return f"{change}; too few runs for a test"
        if c.significant:
            return f"{change} (significant, Mann-Whitney p={c.p_value:.3g})"
        return f"not significant (p={c.p_value:.3g}; {change})"


@dataclass(frozen=True)
class SideBySide:
    """Everything :func:`compare_results` found; the renderers only format it."""

    entries: tuple[Entry, ...]
    reference: dict[str, Any]  # the PR's figures
    anchor: str  # label of the entry the checks are made against (``against``, else the first)
    against: str | None
    checks: tuple[Check, ...]
    against_rows: tuple[AgainstRow, ...] = ()

    def checks_for(self, label: str) -> list[Check]:
        return [c for c in self.checks if c.entry == label]

    def mismatched(self, label: str) -> bool:
        return any(c.kind == "mismatch" for c in self.checks_for(label))

    @property
    def pr_rows(self) -> tuple[str, ...]:
        """The PR's rows shown: startup to /health only when a directory measured it."""
        return tuple(p for p in PR_ROWS
                     if p != "startup_to_health" or any(e.comparison(p) for e in self.entries))

    def entry(self, label: str) -> Entry:
        return next(e for e in self.entries if e.label == label)


# --------------------------------------------------------------------------- reading


def read_results(path: str | os.PathLike[str]):  # -> results.ResultsCheck
    """A results directory or archive, read and checked (unknown schemas refused in one line)."""
    with opened(path) as directory:
        return check_results(directory)


def read_entry(path: str | os.PathLike[str], label: str | None = None) -> Entry:
    """One results directory or archive as an :class:`Entry` of the table."""
    path = Path(path)
    checked = read_results(path)
    frame = checked.frame
    problems = list(checked.problems)
    ok = measured(frame)
    runs = {v: run_summary(frame, v, "state_dict_calls").n for v in VARIANTS}
    if not all(runs.values()):
        problems.append(f"no successful measured runs of {' and '.join(v for v in VARIANTS if not runs[v])}")
    failed = frame[frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    if len(failed):
        first = failed.iloc[0]
        problems.append(f"{len(failed)} run(s) failed (run {first['run_id']} {first['variant']}: {first['error']})")
    loads = frame[(frame["status"] == "ok") & frame["source"].isin(["load", "aa"])]
    digests = tuple(sorted({str(d) for d in loads["digest"] if str(d)}))
    if len(loads) and not equivalence(frame, planned_arms(checked.metadata))["equivalent"]:
        problems.append(f"its own runs did not all load the same model (digests or counts differ between runs: {len(digests)} digest(s)); see its report.md")
    per_run = ok[ok["source"] == "load"].drop_duplicates("run_id")
    counts = {column: {v: tuple(sorted({float(x) for x in per_run[per_run["variant"] == v][column]
                                        if str(x) not in ("", "nan")})) for v in VARIANTS}
              for column in COUNT_COLUMNS}
    comps = tuple(comparisons(frame))
    intervals = {c.phase: iv for c in comps if c.phase in PR_ROWS and (iv := ratio_interval(c)) is not None}
    return Entry(label=label or default_label(path), source=path, archive=path.is_file(),
                 metadata=checked.metadata, comparisons=comps, intervals=intervals, runs=runs, digests=digests,
                 counts=counts, problems=tuple(problems))


def default_label(path: Path) -> str:
    """The directory's name, or the archive's file name (``alt.tar.gz``: told apart from its directory)."""
    return path.name if path.is_file() and archive_format(path) else (path.resolve().name or str(path))


def ratio_interval(c: Comparison) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of baseline/optimized, from the interval of the difference of
    median log-times (stats.bootstrap_median_difference): a ratio interval, on the samples' own scale."""
    if c.unit != "s" or any(x <= 0 for x in (*c.baseline.samples, *c.optimized.samples)):
        return None
    ci = bootstrap_median_difference(tuple(math.log(x) for x in c.optimized.samples),
                                     tuple(math.log(x) for x in c.baseline.samples))
    return (math.exp(ci[0]), math.exp(ci[1])) if ci else None


def _unique_labels(paths: Sequence[Path]) -> list[str]:
    names = [default_label(p) for p in paths]
    labels = [f"{Path(p).resolve().parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names)]
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} #{seen[lab]}")
    return out


# --------------------------------------------------------------------------- comparing


def compare_results(paths: Sequence[str | os.PathLike[str]],
                    against: str | os.PathLike[str] | None = None) -> SideBySide:
    """Read every results directory or archive in ``paths`` (and ``against``), check them against
    each other, and compare each with ``against`` when given. The library entry of ``omni-loader compare``."""
    ordered = [Path(p) for p in paths]
    against_path = Path(against) if against is not None else None
    if against_path is not None:
        ordered = [against_path] + [p for p in ordered if not _same(p, against_path)]
    ordered = [p for i, p in enumerate(ordered) if not any(_same(p, q) for q in ordered[:i])]
    if not ordered:
        raise ResultsError("compare needs at least one results directory or archive")
    entries = tuple(read_entry(p, lab) for p, lab in zip(ordered, _unique_labels(ordered)))
    anchor = entries[0]
    checks = tuple(consistency_checks(entries, anchor))
    result = SideBySide(entries, load_reference(), anchor.label, anchor.label if against_path else None, checks)
    if against_path is None:
        return result
    rows = tuple(row for e in entries[1:] for row in against_rows(anchor, e, result.checks_for(e.label)))
    return SideBySide(entries, result.reference, anchor.label, anchor.label, checks, rows)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def consistency_checks(entries: Sequence[Entry], anchor: Entry) -> list[Check]:
    """Each entry's own problems, then what sets it apart from ``anchor``: model, digest, counts, layout."""
    checks: list[Check] = []
    for e in entries:
        checks += [Check(e.label, "problem", "results", p) for p in e.problems]
        if e is anchor:
            continue
        same_tree = (e.layout, e.dtype) == (anchor.layout, anchor.dtype)
        if e.model != anchor.model:
            if same_tree and e.digests and e.digests == anchor.digests:  # named otherwise, the same bytes
                checks.append(Check(e.label, "note", "model",
                                    f"model recorded as {e.model!r}, {anchor.label}'s as {anchor.model!r}, but both "
                                    "loaded identical tensors (same digest): the same model"))
            else:
                checks.append(Check(e.label, "mismatch", "model",
                                    f"model {e.model!r} is not {anchor.label}'s {anchor.model!r}: another model's "
                                    "times are not comparable"))
        if not same_tree:
            checks.append(Check(e.label, "note", "layout",
                                f"layout {e.layout} / {e.dtype} against {anchor.label}'s {anchor.layout} / "
                                f"{anchor.dtype}: another module tree or dtype loads other tensors, so digest and "
                                "counts are not compared; its ratios and verdicts are its own"))
            continue
        if e.digests != anchor.digests:
            checks.append(Check(e.label, "mismatch", "digest",
                                f"tensor digest {_digests(e)} differs from {anchor.label}'s {_digests(anchor)}: it "
                                "did not load the same bytes (another checkpoint, revision or seed; the same "
                                "checkpoint gives the same digest on any device), so its times are not comparable"))
        differ = [f"{name} {_count(e, c)} here, {_count(anchor, c)} in {anchor.label}"
                  for c, name in COUNT_COLUMNS.items() if e.counts.get(c) != anchor.counts.get(c)]
        if differ:
            checks.append(Check(e.label, "mismatch", "counts",
                                f"counts differ ({'; '.join(differ)}): not the same model tree or checkpoint"))
    return checks


def _digests(e: Entry) -> str:
    if not e.digests:
        return "(none recorded)"
    return " / ".join(f"{d[:12]}…" for d in e.digests)


def _count(e: Entry, column: str) -> str:
    per = e.counts.get(column, {})
    return " / ".join(",".join(f"{x:g}" for x in per.get(v, ())) or "—" for v in VARIANTS)


def against_rows(anchor: Entry, entry: Entry, checks: Sequence[Check]) -> list[AgainstRow]:
    """Every timed phase both directories measured, each variant: ``entry`` against ``anchor``."""
    blocking = [c for c in checks if c.kind == "mismatch" or (c.kind == "note" and c.what == "layout")]
    if blocking:  # one row says why, rather than a row of dashes per phase
        reason = "; ".join(f"{c.what} differs" for c in blocking) + " (see the checks)"
        return [AgainstRow(entry.label, anchor.label, ALL_PHASES, "both", None, reason)]
    rows = []
    for mine in anchor.comparisons:
        theirs = entry.comparison(mine.phase)
        if mine.unit != "s" or theirs is None:
            continue
        for variant in VARIANTS:
            a, b = getattr(mine, variant), getattr(theirs, variant)
            c = compare(Summary(anchor.label, mine.phase, a.samples), Summary(entry.label, mine.phase, b.samples))
            rows.append(AgainstRow(entry.label, anchor.label, mine.phase, variant, c))
    return rows


# --------------------------------------------------------------------------- rendering


def _ref(result: SideBySide, phase: str) -> dict[str, Any] | None:
    return next((r for r in result.reference["measurements"] if r["measurement"] == phase), None)


def column_unit(result: SideBySide, phase: str) -> str:
    """One time unit per column: the PR's (startup in seconds, as the PR wrote it)."""
    if phase == "startup_to_health":
        return "s"
    ref = _ref(result, phase)
    return time_unit(ref["baseline"]) if ref else "ms"


def _in(value: float, unit: str) -> str:
    return f"{value * (1 if unit == 's' else 1e3):.3f}" if math.isfinite(value) else "n/a"


def _ratio_text(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.2f}x"


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
    return (f"{format_seconds(c.baseline.median, u)} [{_in(c.baseline.min, u)}–{_in(c.baseline.max, u)}] → "
            f"{format_seconds(c.optimized.median, u)} [{_in(c.optimized.min, u)}–{_in(c.optimized.max, u)}]; "
            f"{_ratio_text(c.ratio)}{interval}; {c.verdict()}")


def reference_cell(result: SideBySide, phase: str) -> str:
    ref = _ref(result, phase)
    if ref is None:
        return "not published"
    if ref["unit"] == "calls":
        return f"{ref['baseline']:g} → {ref['optimized']:g}"
    u = column_unit(result, phase)
    return (f"{format_seconds(ref['baseline'], u)} → {format_seconds(ref['optimized'], u)}; "
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
    if commit == NOT_RECORDED:
        return commit
    dirty = commit.endswith("-dirty")
    return commit.removesuffix("-dirty")[:10] + ("-dirty" if dirty else "")


def _runs_cell(e: Entry) -> str:
    return " + ".join(str(e.runs.get(v, 0)) for v in VARIANTS)


def _reference_env(result: SideBySide) -> dict[str, str]:
    env = result.reference.get("environment", {})
    return {"machine": f"{env.get('GPU', '?')} ({'ROCm ' + env['ROCm'] if env.get('ROCm') else 'GPU'})",
            "torch": env.get("PyTorch", "?"), "transformers": "not published",
            "kit_commit": f"vLLM-Omni {env.get('vLLM-Omni', '?')} (no omni-loader)",
            "layout": "vllm-omni (inside vLLM-Omni)", "construct": "upstream (inside vLLM-Omni)",
            "runs": env.get("Repeats", "?"), "model": env.get("Model", "?")}


def table_rows(result: SideBySide) -> tuple[list[str], list[list[str]]]:
    """The main table: the PR's figures first, then one row per results directory."""
    header = ["Results", "Machine", "torch", "transformers", "Kit commit", "Layout", "Construction", "Runs",
              *[LABELS[p] for p in result.pr_rows], "Checks"]
    ref = _reference_env(result)
    rows = [[REFERENCE_LABEL, ref["machine"], ref["torch"], ref["transformers"], ref["kit_commit"], ref["layout"],
             ref["construct"], ref["runs"], *[reference_cell(result, p) for p in result.pr_rows], "—"]]
    for e in result.entries:
        name = e.label + (" (archive)" if e.archive else "") + (" ✗" if result.mismatched(e.label) else "")
        rows.append([name, e.machine, str(e.environment.get("torch") or NOT_RECORDED),
                     str(e.environment.get("transformers") or NOT_RECORDED), _short_commit(e.kit_commit), e.layout,
                     e.construct, _runs_cell(e), *[measurement_cell(result, e, p) for p in result.pr_rows],
                     checks_cell(result, e)])
    return header, rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    def cell(x: Any) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def against_table(result: SideBySide) -> tuple[list[str], list[list[str]]]:
    a = result.against or ""
    header = ["Results", "Measurement", "Variant", f"{a} median", "Median", "Ratio", "Mann-Whitney p", "Verdict"]
    rows = []
    for r in result.against_rows:
        c = r.comparison
        u = column_unit(result, r.phase) if r.phase in PR_ROWS else (
            time_unit(c.baseline.median) if c else "ms")
        rows.append([r.entry, _phase_label(r.phase), r.variant,
                     format_seconds(c.baseline.median, u) if c else "—",
                     format_seconds(c.optimized.median, u) if c else "—",
                     f"{r.ratio:.3f}" if c else "—",
                     f"{c.p_value:.3g}" if c and c.p_value is not None else "—", r.verdict()])
    return header, rows


def _phase_label(phase: str) -> str:
    if phase.startswith("server:"):
        return f"Server log: {phase.split(':', 1)[1]}"
    return LABELS.get(phase, phase)


def check_lines(result: SideBySide) -> list[str]:
    """One Markdown bullet per directory: what its checks against the anchor found."""
    lines = []
    for e in result.entries:
        found = result.checks_for(e.label)
        if e.label == result.anchor:
            lines.append(f"- **{e.label}**: the reference of the checks (model {e.model!r}, layout {e.layout} / "
                         f"{e.dtype}, digest {_digests(e)}).")
        elif not found:
            lines.append(f"- **{e.label}**: ok: same model, tensor digest and counts as {result.anchor}.")
        for c in found:
            mark = {"mismatch": "✗ mismatch", "problem": "problem in the directory", "note": "note"}[c.kind]
            lines.append(f"- **{e.label}**: {mark} ({c.what}): {c.message}.")
    return lines


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
        _md_table(header, rows),
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
                  _md_table(h, r) if r else "No phase was measured by both.", ""]
    if plot:
        parts += ["## Ratios", "", f"![ratios]({plot})", ""]
    return "\n".join(parts)


CSV_FIXED = ("results", "kind", "source", "schema_version", "model", "device", "device_name", "gpu_backend",
             "gpu_version", "cpu", "torch", "transformers", "kit_commit", "layout", "dtype", "construct", "workers",
             "runs_baseline", "runs_optimized", "digest")
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
                "construct": "upstream", "runs_baseline": runs, "runs_optimized": runs,
                "checks": ""}]
    for phase in result.pr_rows:
        ref = _ref(result, phase)
        if ref:
            records[0].update({f"{phase}_baseline_median": ref["baseline"], f"{phase}_optimized_median":
                               ref["optimized"], f"{phase}_verdict": ref.get("note") or "as published"})
            if ref["unit"] != "calls":
                records[0][f"{phase}_ratio"] = ref["baseline"] / ref["optimized"]
    for e in result.entries:
        env = e.environment
        rec: dict[str, Any] = {
            "results": e.label, "kind": "archive" if e.archive else "directory", "source": str(e.source),
            "schema_version": e.schema_version, "model": e.model, "device": env.get("device", ""),
            "device_name": env.get("device_name", ""), "gpu_backend": env.get("gpu_backend") or "",
            "gpu_version": e.gpu_version, "cpu": env.get("cpu", ""), "torch": env.get("torch", ""),
            "transformers": env.get("transformers", ""), "kit_commit": e.kit_commit, "layout": e.layout,
            "dtype": e.dtype, "construct": e.construct, "workers": e.workers,
            "runs_baseline": e.runs.get("baseline", 0), "runs_optimized": e.runs.get("optimized", 0),
            "digest": " ".join(e.digests),
            "checks": "; ".join(f"{c.kind} ({c.what}): {c.message}" for c in result.checks_for(e.label)),
        }
        for phase in result.pr_rows:
            c = e.comparison(phase)
            if c is None:
                rec[f"{phase}_verdict"] = "not measured"
                continue
            iv = e.intervals.get(phase)
            rec.update({f"{phase}_{k}": v for k, v in {
                "baseline_median": c.baseline.median, "baseline_min": c.baseline.min, "baseline_max": c.baseline.max,
                "optimized_median": c.optimized.median, "optimized_min": c.optimized.min,
                "optimized_max": c.optimized.max, "ratio": c.ratio if c.unit == "s" else None,
                "ratio_low": iv[0] if iv else None, "ratio_high": iv[1] if iv else None,
                "p_value": c.p_value, "verdict": c.verdict()}.items()})
        records.append(rec)
    return records


def csv_columns(result: SideBySide) -> list[str]:
    return [*CSV_FIXED, *[f"{p}_{k}" for p in result.pr_rows for k in CSV_PER_ROW], "checks"]


AGAINST_COLUMNS = ("results", "against", "phase", "variant", "against_n", "n", "against_median", "median", "ratio",
                   "p_value", "ci_low", "ci_high", "significant", "verdict")


def against_records(result: SideBySide) -> list[dict[str, Any]]:
    out = []
    for r in result.against_rows:
        c = r.comparison
        out.append({"results": r.entry, "against": r.against, "phase": r.phase, "variant": r.variant,
                    "against_n": c.baseline.n if c else None, "n": c.optimized.n if c else None,
                    "against_median": c.baseline.median if c else None, "median": c.optimized.median if c else None,
                    "ratio": r.ratio if c else None, "p_value": c.p_value if c else None,
                    # interval of median(entry) - median(against), seconds
                    "ci_low": c.ci_low if c else None, "ci_high": c.ci_high if c else None,
                    "significant": c.significant if c else None, "verdict": r.verdict()})
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


# --------------------------------------------------------------------------- the plot


def ratio_figure(result: SideBySide) -> Any:  # -> matplotlib.figure.Figure
    """One panel per timed PR row: each directory's ratio baseline/optimized with its 95% interval, the
    PR's ratio as a dashed line, 1x (no change) as a solid one. Directories that failed a check are
    drawn as crosses. Built on a bare Figure (no pyplot state)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    timed = [p for p in result.pr_rows if p != "state_dict_calls"]
    labels = [e.label for e in result.entries]
    fig = Figure(figsize=(max(4.5, 0.9 * len(labels) + 2.5) * len(timed), 4.2), layout="constrained")
    axes = fig.subplots(1, len(timed), squeeze=False)[0]
    for ax, phase in zip(axes, timed):
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
                ax.plot([i, i], list(iv), color="#00798c", lw=2, alpha=0.5, solid_capstyle="butt",
                        label="95% interval")
        for i, e in enumerate(result.entries):
            c = e.comparison(phase)
            if c and math.isfinite(c.ratio):
                ax.annotate(f"{c.ratio:.3g}x", (i, c.ratio), xytext=(6, 0), textcoords="offset points",
                            va="center", fontsize=8)
        ref = _ref(result, phase)
        if ref:
            pr = ref["baseline"] / ref["optimized"]
            ax.axhline(pr, color="#8d96a3", ls="--", lw=1.4, label="PR 7061 (MI300X, as published)")
            ax.annotate(f"PR {pr:.3g}x", (len(labels) - 0.45, pr), ha="right", va="bottom", fontsize=8,
                        color="#5b6470")
        ax.axhline(1, color="black", lw=0.8, label="no change (1x)")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))  # 10, 100: not 10¹, 10²
        ax.set_xticks(range(len(labels)), labels, rotation=25, ha="right")
        ax.set_xlim(-0.6, len(labels) - 0.4)
        ax.set_title(LABELS[phase])
        ax.set_ylabel("baseline / optimized (median ratio, log)")
        ax.grid(axis="y", alpha=0.3)
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    handles.pop("95% interval", None)
    handles["95% interval"] = Line2D([], [], color="#00798c", lw=2, alpha=0.5)
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(len(handles), 4),
               fontsize=8)
    fig.suptitle("Speed-up of the optimized loader per results directory, against the PR's")
    return fig


def write_plot(result: SideBySide, directory: str | os.PathLike[str]) -> list[Path]:
    """``compare_ratios.png`` / ``.svg`` and the values drawn, ``compare_ratios.csv`` (see plots.figure_data)."""
    from .plots import write_figure_data

    if not any(p != "state_dict_calls" for p in result.pr_rows):
        return []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fig = ratio_figure(result)
    paths = [directory / f"{PLOT_STEM}.png", directory / f"{PLOT_STEM}.svg"]
    for p in paths:
        fig.savefig(p, dpi=130 if p.suffix == ".png" else None)
    return [*paths, write_figure_data(fig, directory / f"{PLOT_STEM}.csv")]


def write_compare(result: SideBySide, out: str | os.PathLike[str]) -> list[Path]:
    """Every form under ``out``: compare.md (with the plot), compare.csv, against.csv, compare.json, plots/."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = write_plot(result, out / "plots")
    png = next((p for p in plots if p.suffix == ".png"), None)
    files = {"compare.md": render_markdown(result, png.relative_to(out).as_posix() if png else None),
             "compare.csv": render_csv(result), "compare.json": json.dumps(to_json(result), indent=2, default=str)}
    if result.against:
        files["against.csv"] = render_csv(result, "against")
    written = []
    for name, text in files.items():
        (out / name).write_text(text if text.endswith("\n") else text + "\n")
        written.append(out / name)
    return written + plots


# --------------------------------------------------------------------------- CLI


def cmd_compare(args: Any) -> int:
    import sys

    result = compare_results(args.directories, against=args.against)
    if args.out:
        written = write_compare(result, args.out)
        plot = next((p for p in written if p.suffix == ".png"), None)
        print(render(result, args.format, plot.as_posix() if plot else None).rstrip("\n"))
        print(f"compare: wrote {', '.join(p.name for p in written)} to {args.out}", file=sys.stderr)
    else:
        print(render(result, args.format).rstrip("\n"))
    return 0


def cmd_pack(args: Any) -> int:
    from .archive import pack

    print(pack(args.directory, out=args.out, fmt=args.format, overwrite=args.force))
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("compare", help="several results directories or packed archives side by side, with the PR's",
                       description="One row per results directory (or archive from `omni-loader pack`): machine, "
                                   "versions, layout, and the PR's rows with medians, spread, ratio and verdict; "
                                   "the PR's own figures as a reference row; checks that the directories loaded the "
                                   "same model and tensors.")
    p.add_argument("directories", nargs="+", metavar="DIR", help="results directories or .tar.gz/.zip archives")
    p.add_argument("--against", metavar="DIR",
                   help="compare every other directory with this one, phase by phase (ratio and Mann-Whitney)")
    p.add_argument("--out", metavar="DIR", help="also write compare.md/.csv/.json, against.csv and plots/ here")
    p.add_argument("--format", choices=("md", "csv", "json"), default="md",
                   help="what is printed (default md; csv prints the --against table after a blank line)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("pack", help="a results directory as one .tar.gz or .zip that compare reads directly")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--out", metavar="FILE", help="the archive (default DIR.tar.gz beside DIR)")
    p.add_argument("--format", choices=("tar.gz", "zip"), default=None,
                   help="default: from --out's ending, else tar.gz")
    p.add_argument("--force", action="store_true", help="replace an existing archive")
    p.set_defaults(func=cmd_pack)
