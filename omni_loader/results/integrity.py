"""Reading a results directory with its integrity checked, and repairing it before a resume.

Every reader goes through :func:`check_results`: runs.csv's writer can be killed mid-line, run twice or edited
by hand, so the check leaves out the rows that cannot be trusted and says why in one line each. ``--resume``
moves them to runs.rejected.csv (:func:`set_aside_rejected`) and runs those again.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..formatting import count
from .lock import describe_holder, lock_holder
from .rows import REJECTED_FILE, RESIDENCY_COLUMN, RUNS_FILE
from .row_checks import Finding, check_rows, csv_records, rows_frame, run_ids_text, read_lines
from ..safe_files import open_file, refuse_link
from .suite import DEFAULT_SOURCES, METADATA_FILE, REPORT_FILE, Record, Suite


@dataclass(frozen=True)
class Results:
    """A results directory, read once with its integrity checked: its files, its record, its trusted rows.

    Read it once (:meth:`read`) and hand it on; it stands for its directory wherever a path is wanted.
    ``frame`` is runs.csv without the rows that cannot be trusted, ``found`` what was wrong.
    """

    directory: Path
    suite: Suite  # metadata.json, its benchmarks found once
    frame: Any  # pandas.DataFrame
    found: tuple[Finding, ...] = ()
    missing_runs: tuple[int, ...] = ()  # planned run ids with no trusted rows
    rejected_lines: tuple[int, ...] = ()  # line numbers (1-based, header 1) of runs.csv left out of frame
    rejected_because: tuple[str, ...] = ()  # the findings (short form) that left those lines out
    notes: tuple[str, ...] = ()  # what is not a problem but worth saying: rows set aside by an earlier --resume

    @property
    def problems(self) -> list[str]:
        """Each finding's sentence."""
        return [f.detail for f in self.found]

    @property
    def findings(self) -> list[str]:
        """Each finding in a few words, e.g. "1 torn row ignored"."""
        return [f.short for f in self.found]

    @property
    def ok(self) -> bool:
        return not self.found

    @property
    def summary(self) -> str:
        """The findings, then the notes, in a few words each ('' when there is nothing to say)."""
        return "; ".join([*self.findings, *self.notes])

    def benchmark(self, name: str) -> Record | None:
        """The record of benchmark ``name`` (``load``, ``startup``) of this directory, or None."""
        return self.suite.benchmark(name)

    @classmethod
    def read(cls, directory: str | os.PathLike[str] | Results) -> Results:
        """``directory`` read and checked (:func:`check_results`); a :class:`Results` is returned as it is."""
        return directory if isinstance(directory, Results) else check_results(directory)

    def __fspath__(self) -> str:
        return str(self.directory)

    def __truediv__(self, other: str) -> Path:
        return self.directory / other

    @property
    def load(self) -> Record:
        """The load benchmark's record (``reproduce``'s), empty when the directory holds none."""
        return self.benchmark("load") or Record()

    def plots(self, names: Iterable[str]) -> list[Path]:
        """The PNG plots of ``names`` the report drew into ``plots/``, in that order (those that exist)."""
        return [p for p in (self.directory / "plots" / f"{name}.png" for name in names) if p.is_file()]


def check_results(directory: str | os.PathLike[str]) -> Results:
    """A results directory read and checked; :class:`ResultsError` only when it cannot be read at all."""
    directory = Path(directory)
    suite = Suite.read(directory)
    lines = read_lines(directory / RUNS_FILE)  # runs.csv is parsed here, once
    frame = rows_frame(lines.records)
    frame["_line"] = lines.numbers
    seconds_at = lines.records[0].index("seconds")
    frame["_seconds"] = [r[seconds_at] for r in lines.records[1:]]  # as written: "nan", "abc" and "" all read as NaN
    header = lines.records[0]
    resident_at = header.index(RESIDENCY_COLUMN) if RESIDENCY_COLUMN in header else None
    frame["_resident"] = [r[resident_at] if resident_at is not None else "" for r in lines.records[1:]]
    frame, row_findings = check_rows(frame, suite, lines.cut)
    rejected = tuple(sorted(set(range(2, lines.total + 2)) - set(frame["_line"])))
    frame = frame.drop(columns=["_seconds", "_resident", "_line"])
    found = [*_metadata_findings(suite), *lines.findings, *row_findings]
    because = tuple(f.short for f in found)  # what left the rejected lines out
    found += [*_missing_findings(directory, suite, frame), *_failure_findings(frame, suite),
              *_writer_findings(directory, suite), *_report_findings(directory, suite)]
    repairs = [r for record in suite.members.values() for r in record.get("repairs", [])]
    notes = tuple(f"{count(int(r.get('rows') or 0), 'row')} set aside by --resume ({REJECTED_FILE})" for r in repairs)
    missing = tuple(sorted(set(suite.plan) - _run_ids(frame)))
    return Results(directory, suite, frame, tuple(found), missing, rejected, because, notes)


def _run_ids(frame) -> set[int]:
    return set(frame["run_id"].astype(int)) if len(frame) else set()


def _missing_findings(directory: Path, suite: Suite, frame) -> list[Finding]:
    """Planned runs without a trusted row, and how to run them."""
    plan = suite.plan
    missing = sorted(set(plan) - _run_ids(frame))
    if not missing:
        return []
    status = suite.status
    why = f" (status {status}: continue with {resume_command(directory, suite)})" if status != "complete" else ""
    return [Finding(f"{count(len(missing), 'planned run')} missing",
                    f"{len(missing)} of {len(plan)} planned runs {'has' if len(missing) == 1 else 'have'} no usable "
                    f"rows: {run_ids_text(missing)}{why}")]


# The statuses a benchmark's record moves through (see omni_loader.results.suite.with_status).
STATUSES = ("running", "complete", "interrupted")


def _metadata_findings(suite: Suite) -> list[Finding]:
    """What metadata.json lacks for its rows to be checked: a benchmark, each benchmark's plan and status."""
    found: list[Finding] = []
    raw = suite.raw.get("benchmarks")
    if isinstance(raw, dict):
        for name, record in raw.items():
            if not isinstance(record, dict):
                found.append(Finding(f"benchmark {name} unreadable",
                              f"{METADATA_FILE} holds {type(record).__name__} {str(record)[:40]!r} for benchmark "
                              f"{name!r}, not a record: it was not written by omni-loader; restore it from a copy"))
    members = suite.members
    if not members:
        found.append(Finding("no benchmark recorded",
                      f"{METADATA_FILE} records no benchmark: no plan to check runs.csv against, so none of its "
                      "rows can be trusted; restore it from a copy"))
    for name, record in members.items():
        plan = record.get("plan")
        if "plan" in record:  # every writer records one; a hand-made record without the key is read unchecked
            entries = record.plan
            if not isinstance(plan, list) or not plan:
                found.append(Finding(f"benchmark {name} has no plan",
                              f"benchmark {name} in {METADATA_FILE} has no plan (plan: {json.dumps(plan)[:40]}): its "
                              "rows cannot be checked against the runs it planned; restore the file from a copy"))
            elif len(entries) < len(plan):
                found.append(Finding(f"{len(plan) - len(entries)} unreadable plan entr(ies)",
                              f"{len(plan) - len(entries)} of the {len(plan)} plan entries of benchmark {name} in "
                              f"{METADATA_FILE} have no integer run_id: ignored, with the rows of those runs"))
        if record.get("status") not in STATUSES:
            found.append(Finding(f"benchmark {name} has no status",
                          f"benchmark {name} in {METADATA_FILE} has status {json.dumps(record.get('status'))[:40]}, "
                          f"not one of {', '.join(STATUSES)}: whether it finished is unknown"))
    return found


def _failure_findings(frame, suite: Suite) -> list[Finding]:
    """A benchmark, or a variant of one, whose every run failed: no number to report, which is a finding."""
    found: list[Finding] = []
    if not len(frame):
        return found
    for name, record in suite.members.items():
        ids = {int(e["run_id"]) for e in record.plan}
        sources = ["server"] if DEFAULT_SOURCES.get(name) == "server" else ["load", "aa"]
        rows = frame[frame["run_id"].isin(ids)] if ids else frame[frame["source"].isin(sources)]
        runs = rows.drop_duplicates("run_id")
        if not len(runs):
            continue
        ok = set(rows.loc[rows["status"] == "ok", "run_id"])
        failed = runs[~runs["run_id"].isin(ok)]
        if len(failed) == len(runs):
            first = failed.iloc[0]
            found.append(Finding(f"every run of benchmark {name} failed",
                          f"every run of benchmark {name} failed ({count(len(runs), 'run')}; run {first['run_id']} "
                          f"{first['variant']}: {first['error'] or 'no reason recorded'}): it measured nothing"))
            continue
        for variant, per in runs.groupby("variant", sort=False):
            bad = per[~per["run_id"].isin(ok)]
            if len(bad) == len(per):
                first = bad.iloc[0]
                found.append(Finding(f"every run of {variant} failed",
                              f"every run of variant {variant} in benchmark {name} failed ({count(len(per), 'run')}; "
                              f"run {first['run_id']}: {first['error'] or 'no reason recorded'}): it has no number to "
                              "compare"))
    return found


def _writer_findings(directory: Path, suite: Suite) -> list[Finding]:
    """A benchmark whose record says ``running``: still being written, or its writer died."""
    if not any(record.get("status") == "running" for record in suite.members.values()):
        return []
    holder = lock_holder(directory)
    if holder and holder.get("alive"):
        return [Finding("still being written",
                 f"{directory} is being written now by {describe_holder(holder)}: more runs are to come")]
    return [Finding("its writer died",
             f"metadata.json says running, but no process is writing {directory}: its writer was killed or crashed; "
             f"continue with {resume_command(directory, suite)}")]


REPORT_NOT_DRAWN = "report not drawn"  # the finding's few words (drawing the report cures it: see lifecycle)


def _report_findings(directory: Path, suite: Suite) -> list[Finding]:
    """A complete suite whose report.md was not drawn from its runs (where metadata.json records drawing)."""
    report = suite.report
    if report is None or suite.status != "complete":
        return []
    if report.get("status") == "drawn" and (directory / REPORT_FILE).is_file():
        return []
    older = f"; the {REPORT_FILE} there is an older one" if (directory / REPORT_FILE).is_file() else ""
    why = (f"{REPORT_FILE} was removed after it was drawn" if report.get("status") == "drawn" else
           f"drawing it began at {report.get('started_at') or '?'} and never ended (out of memory, or the process "
           f"was killed){older}")
    return [Finding(REPORT_NOT_DRAWN, f"every benchmark of {directory} is complete, but its report was not drawn "
                                      f"from their runs: {why}; draw it with: omni-loader report {directory}")]


def resume_command(directory: str | os.PathLike[str], suite: Suite | None = None, command: str | None = None) -> str:
    """The shell-quoted command that continues ``directory`` (``reproduce`` or ``serve-ab --resume``)."""
    import shlex

    members = suite.members if suite else {}
    command = command or ("serve-ab" if "startup" in members and "load" not in members else "reproduce")
    return shlex.join(["omni-loader", command, "--resume", "--out", str(directory)])


# --------------------------------------------------------------------------- repair before a resume


@dataclass(frozen=True)
class Resumption:
    """A benchmark about to be continued: its record (running again), the runs it already has, the check."""

    record: Record
    done: frozenset[int]  # run ids of its plan with trusted rows (failed runs included: they are not repeated)
    check: Results


def resume_benchmark(directory: str | os.PathLike[str] | Results, name: str) -> Resumption:
    """Set aside the rows the check rejects and continue benchmark ``name`` (of a directory, or of its check when the
    caller has it). Writers only, under the lock."""
    check = Results.read(directory)
    record = check.benchmark(name)
    if record is None:
        raise ResultsError(f"--resume: {check.directory} holds no {name} benchmark to continue")
    moved = set_aside_rejected(check)
    ids = {entry["run_id"] for entry in record.plan}
    done = frozenset(int(r) for r in check.frame["run_id"] if int(r) in ids) if len(check.frame) else frozenset()
    return Resumption(record.resumed(moved, check.rejected_because), done, check)


def set_aside_rejected(check: Results) -> int:
    """Move the rows a check left out of runs.csv into runs.rejected.csv; how many. Writers only."""
    if not check.rejected_lines:
        return 0
    path = check.directory / RUNS_FILE
    refuse_link(path)
    records = csv_records(path.read_bytes().decode("utf-8", errors="replace"))
    rejected = set(check.rejected_lines)
    keep = [r for n, r in enumerate(records, start=1) if n not in rejected]
    out = [r for n, r in enumerate(records, start=1) if n in rejected]
    side = check.directory / REJECTED_FILE
    with open_file(side, "a", newline="") as fh:  # never through a link (omni_loader.safe_files)
        if fh.tell() == 0:
            csv.writer(fh, lineterminator="\r\n").writerow(records[0])
        csv.writer(fh, lineterminator="\r\n").writerows(out)
        fh.flush()
        os.fsync(fh.fileno())
    tmp = path.with_suffix(".csv.tmp")
    with open_file(tmp, "w", newline="") as fh:
        csv.writer(fh, lineterminator="\r\n").writerows(keep)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return len(out)
