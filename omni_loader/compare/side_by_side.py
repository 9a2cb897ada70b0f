"""The data of ``omni-loader compare``: each results directory read and summarised, checked against the others.

An :class:`Entry` keeps a directory's own statistics for every row; :func:`consistency_checks` says what sets
it apart from the anchor, :func:`against_rows` compares it with the anchor phase by phase. A directory's model,
environment and spec come from its benchmark's record, never from the top of metadata.json."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..formatting import count
from ..results.archive import archive_format, opened
from ..reporting.measurements import PR_ROWS, comparisons, planned_arms
from ..reporting.sequential import design_alpha
from ..results.suite import Record, Suite
from ..results.spec import BenchmarkSpec
from ..token2wav.options import flag, option_fields, same_setting, spelled
from ..names import VARIANTS, digest_algorithm, short_digest
from ..results.integrity import Results, check_results
from ..reporting.stats import Comparison, Summary, compare, equivalence, measured, ratio_interval, run_summary

NOT_RECORDED = "not recorded"
COUNT_COLUMNS = {"state_dict_calls": "state_dict() calls", "weights_loaded": "weights loaded",
                 "persistent_buffers": "persistent buffers"}
ALL_PHASES = "all phases"  # the phase of an AgainstRow that stands for a pair not compared


@dataclass(frozen=True)
class Entry:
    """One results directory (or archive of one), read and summarised by its own statistics."""

    label: str  # what the table calls it: the directory's name, made unique
    source: Path  # the directory or archive as given
    archive: bool
    suite: Suite = field(repr=False)  # its metadata.json
    comparisons: tuple[Comparison, ...] = field(repr=False)  # measurements.comparisons of its rows: PR rows first
    intervals: dict[str, tuple[float, float]] = field(repr=False)  # 95% interval of each timed row's ratio
    runs: dict[str, int] = field(default_factory=dict)  # measured successful runs per variant
    digests: tuple[str, ...] = ()  # tensor digests of its successful runs (one when they agree)
    counts: dict[str, dict[str, tuple[float, ...]]] = field(default_factory=dict, repr=False)
    problems: tuple[str, ...] = ()  # what check_results and the equivalence check found in it
    confounded: dict[str, tuple[str, ...]] = field(default_factory=dict)  # PR row -> controls that confound it
    variants: tuple[str, ...] = VARIANTS  # the variants its benchmark planned (the A/A arms left out)
    startup: bool = False  # a startup benchmark (serve-ab) alone: servers timed to /health, no load

    @cached_property
    def record(self) -> Record:
        """The benchmark this directory describes (its load benchmark's record)."""
        return self.suite.described

    environment = property(lambda self: self.record.environment)
    spec = property(lambda self: self.record.settings)  # the load options flat among the other settings
    schema_version = property(lambda self: int(self.suite.raw.get("schema_version", 0)))  # the suite's
    model = property(lambda self: str(self.record.get("model") or NOT_RECORDED))
    kit_commit = property(lambda self: str(self.environment.get("kit_commit") or NOT_RECORDED))

    def setting(self, key: str) -> str:
        """One setting by its field's name, as a cell: :data:`NOT_RECORDED` where an older kit did not record it."""
        return str(self.spec.get(key) or self.record.get(key) or NOT_RECORDED)

    layout = property(lambda self: self.setting("layout"))
    dtype = property(lambda self: self.setting("dtype"))
    cache = property(lambda self: self.setting("cache"))  # --cache: warm or cold

    @property
    def workers(self) -> str:
        if "workers" in self.spec:
            return str(self.spec["workers"])
        return "in-process" if self.spec.get("in_process") else NOT_RECORDED

    gpu_version = property(lambda self: str(self.environment.get("rocm_hip") or self.environment.get("cuda") or ""))

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
    def digest_text(self) -> str:
        """Its tensor digests, shortened: '1a2b3c4d5e6f…' (two or more when its runs disagree)."""
        if not self.digests:
            return "(none recorded)"
        return " / ".join(short_digest(d, 12) for d in self.digests)

    def count_text(self, column: str) -> str:
        """A per-run count of each variant: '51 / 0'; several values when its runs disagree."""
        per = self.counts.get(column, {})
        return " / ".join(",".join(f"{x:g}" for x in per.get(v, ())) or "—" for v in VARIANTS)

    def comparison(self, phase: str) -> Comparison | None:
        return next((c for c in self.comparisons if c.phase == phase), None)


@dataclass(frozen=True)
class Check:
    """A finding about one entry: ``mismatch`` (not comparable, flagged), ``problem`` (in the directory
    itself) or ``note`` (an explained difference, e.g. another layout)."""

    entry: str
    kind: str  # mismatch | problem | note
    what: str  # model | digest | counts | layout | cache | results | variants | benchmark | an option's flag
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
        change = "equal medians" if r == 1 else (f"{r:.2f}× slower" if r > 1 else f"{1 / r:.2f}× faster")
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

    def reference_row(self, phase: str) -> dict[str, Any] | None:
        """The PR's published figures for ``phase``, or None where the PR gave none."""
        return next((r for r in self.reference["measurements"] if r["measurement"] == phase), None)


def read_results(path: str | os.PathLike[str] | Results) -> Results:
    """A results directory or archive, read and checked (unknown schemas refused in one line); one already
    checked as it is."""
    if isinstance(path, Results):
        return path
    with opened(path) as directory:
        try:
            return check_results(directory)
        except ResultsError as exc:  # named in the archive, not in the temporary folder it was unpacked into
            if Path(path).is_dir():
                raise
            raise ResultsError(str(exc).replace(f"{directory.parent}/", f"{path}:")) from None


def read_entry(path: str | os.PathLike[str] | Results, label: str | None = None) -> Entry:
    """One results directory or archive (or its check) as an :class:`Entry` of the table."""
    checked, path = read_results(path), Path(path)
    frame = checked.frame
    problems = list(checked.problems)
    ok = measured(frame)
    runs = {v: run_summary(frame, v, "state_dict_calls").n for v in VARIANTS}
    suite = checked.suite
    startup = suite.benchmark("load") is None and suite.benchmark("startup") is not None
    variants = tuple(v for v in planned_arms(suite) if not v.startswith("aa-"))
    unmeasured = [v for v in VARIANTS if v in variants and not runs[v]]
    if unmeasured and not startup:  # a variant it did not plan is no failure; a startup benchmark loads nothing
        problems.append(f"no successful measured runs of {' and '.join(unmeasured)}")
    failed = frame[frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    if len(failed):
        first = failed.iloc[0]
        problems.append(f"{count(len(failed), 'run')} failed (run {first['run_id']} {first['variant']}: "
                        f"{first['error']})")
    loads = frame[(frame["status"] == "ok") & frame["source"].isin(["load", "aa"])]
    digests = tuple(sorted({str(d) for d in loads["digest"] if str(d)}))
    if len(loads) and not equivalence(frame, planned_arms(suite))["equivalent"]:
        problems.append("its own runs did not all load the same model (digests or counts differ between runs: "
                        f"{count(len(digests), 'digest')}); see its report.md")
    per_run = ok[ok["source"] == "load"].drop_duplicates("run_id")
    counts = {column: {v: tuple(sorted({float(x) for x in per_run[per_run["variant"] == v][column]
                                        if str(x) not in ("", "nan")})) for v in VARIANTS}
              for column in COUNT_COLUMNS}
    comps = tuple(comparisons(frame, design_alpha(suite)))  # as its report.md reads them
    intervals = {c.phase: iv for c in comps if c.phase in PR_ROWS and (iv := ratio_interval(c)) is not None}
    return Entry(label=label or default_label(path), source=path, archive=path.is_file(),
                 suite=suite, comparisons=comps, intervals=intervals, runs=runs, digests=digests,
                 counts=counts, problems=tuple(problems), confounded=_confounded(frame, suite),
                 variants=variants, startup=startup)


def _confounded(frame, suite: Suite) -> dict[str, tuple[str, ...]]:
    """The PR rows of a directory that a shared-phase control confounds (as its report.md says)."""
    from ..reporting.controls import control_report
    from ..reporting.measurements import noise_floors

    report = control_report(frame, *VARIANTS, floors=noise_floors(frame), alpha=design_alpha(suite))
    return {r.phase: r.confounders for r in report.rows if r.confounded} if report else {}


def default_label(path: Path) -> str:
    """The directory's name, or the archive's file name (``alt.tar.gz``: told apart from its directory)."""
    return path.name if path.is_file() and archive_format(path) else (path.resolve().name or str(path))


def _model_mismatch(e: Entry, anchor: Entry) -> Check:
    """``e`` measured another model than ``anchor``, or one of them records none: then which, and how to record it."""
    unnamed = next((x for x in (e, anchor) if x.model == NOT_RECORDED), None)
    if unnamed is None:
        return Check(e.label, "mismatch", "model", f"model {e.model!r} is not {anchor.label}'s {anchor.model!r}: "
                     "another model's times are not comparable")
    named = anchor if unnamed is e else e
    how = ("it was run without --model: run serve-ab again with --model NAME (what its servers serve)" if unnamed.startup
           else "its metadata.json has no model")
    return Check(e.label, "mismatch", "model", f"{unnamed.label} records no model, so it cannot be matched with "
                 f"{named.label}'s {named.model!r}: {how}")


def consistency_checks(entries: Sequence[Entry], anchor: Entry) -> list[Check]:
    """Each entry's own problems, then what sets it apart from ``anchor``: model, digest, counts, layout."""
    checks: list[Check] = []
    for e in entries:
        checks += [Check(e.label, "problem", "results", p) for p in e.problems]
        checks += [Check(e.label, "note", "controls", f"{row} is confounded: {', '.join(controls)} (code both variants "
                         "share) differs between them; see its report.md's Controls")
                   for row, controls in e.confounded.items()]
        if e is anchor:
            continue
        if e.variants != anchor.variants:
            checks.append(Check(e.label, "note", "variants",
                                f"measures {' and '.join(e.variants)}, {anchor.label} {' and '.join(anchor.variants)}: "
                                "a variant only one of them measured has no number to set beside the other's, and "
                                "counts are compared for the variants both measured"))
        if e.startup or anchor.startup:
            which = e.label if e.startup else anchor.label
            checks.append(Check(e.label, "note", "benchmark",
                                f"{which} is a startup benchmark (serve-ab): it times servers starting to /health, not "
                                "loads, so it has no loader phases, tensor digest or counts to check; only its "
                                "startup row is set beside the others"))
            if e.model != anchor.model:
                checks.append(_model_mismatch(e, anchor))
            continue
        same_tree = (e.layout, e.dtype) == (anchor.layout, anchor.dtype)
        if e.model != anchor.model:
            if same_tree and e.digests and e.digests == anchor.digests:  # named otherwise, the same bytes
                checks.append(Check(e.label, "note", "model",
                                    f"model recorded as {e.model!r}, {anchor.label}'s as {anchor.model!r}, but both "
                                    "loaded identical tensors (same digest): the same model"))
            else:
                checks.append(_model_mismatch(e, anchor))
        if NOT_RECORDED not in (e.cache, anchor.cache) and e.cache != anchor.cache:
            checks.append(Check(e.label, "note", "cache",
                                f"page cache {e.cache} against {anchor.label}'s {anchor.cache}: a cold load reads the "
                                "checkpoint from storage in the phases that read it, a warm one copies it from the page "
                                "cache; the fix's saving is the same work, a different share of each whole load"))
        checks += setting_mismatches(e, anchor)
        if not same_tree:
            checks.append(Check(e.label, "note", "layout",
                                f"layout {e.layout} / {e.dtype} against {anchor.label}'s {anchor.layout} / "
                                f"{anchor.dtype}: another module tree or dtype loads other tensors, so digest and "
                                "counts are not compared; its ratios and verdicts are its own"))
            continue
        algorithms = ({digest_algorithm(d) for d in e.digests}, {digest_algorithm(d) for d in anchor.digests})
        if e.digests and anchor.digests and algorithms[0] != algorithms[1]:
            checks.append(Check(e.label, "note", "digest",
                                f"tensor digest made with {'/'.join(sorted(algorithms[0]))}, {anchor.label}'s with "
                                f"{'/'.join(sorted(algorithms[1]))} (an older omni-loader): tensors not compared by "
                                "digest; the counts still are"))
        elif e.digests != anchor.digests:
            checks.append(Check(e.label, "mismatch", "digest",
                                f"tensor digest {e.digest_text} differs from {anchor.label}'s {anchor.digest_text}: it "
                                "did not load the same bytes (another checkpoint, revision or seed; the same "
                                "checkpoint gives the same digest on any device), so its times are not comparable"))
        differ = [f"{name} {e.count_text(c)} here, {anchor.count_text(c)} in {anchor.label}"
                  for c, name in COUNT_COLUMNS.items() if _counts_differ(e.counts.get(c, {}), anchor.counts.get(c, {}))]
        if differ:
            checks.append(Check(e.label, "mismatch", "counts",
                                f"counts differ ({'; '.join(differ)}): not the same model tree or checkpoint"))
    return checks


def setting_mismatches(e: Entry, anchor: Entry) -> list[Check]:
    """A mismatch, named by its flag, for each setting declared ``compared=True`` (another ``--construct`` times
    another load) in which ``e`` differs from ``anchor``; one an older kit did not record is not compared."""
    checks = []
    for name, f in option_fields(BenchmarkSpec).items():
        if f.metadata.get("compared") is not True or name not in e.spec or name not in anchor.spec:
            continue
        mine, theirs = e.spec[name], anchor.spec[name]
        if not same_setting(f, mine, theirs):
            checks.append(Check(e.label, "mismatch", flag(f),
                                f"{flag(f)} {spelled(f, mine)} here, {spelled(f, theirs)} in {anchor.label}: another "
                                "load was timed, so its times are not comparable"))
    return checks


def _counts_differ(mine: dict[str, tuple[float, ...]], theirs: dict[str, tuple[float, ...]]) -> bool:
    """Whether a count differs in a variant both directories measured (one that only one measured is no mismatch)."""
    return any(mine.get(v) != theirs.get(v) for v in VARIANTS if mine.get(v) and theirs.get(v))


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
