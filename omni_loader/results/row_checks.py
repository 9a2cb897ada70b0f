"""How runs.csv's lines are read and checked against the plan: the row-level half of the integrity checks.

Reading a file that a killed writer may have cut, a hand edited or two writers interleaved is its own concern;
:mod:`omni_loader.results.integrity` turns the :class:`Finding` values into results. Nothing here writes a file.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..formatting import count
from .rows import RUN_COLUMNS, RUNS_FILE, SOURCES, typed_runs
from .suite import METADATA_FILE, STATUS_STAMPS, Suite


def _lines(numbers: list[int]) -> str:
    """``line 10`` or ``lines 10, 11, 13``: where in the file, in words that agree with the count."""
    return f"{'line' if len(numbers) == 1 else 'lines'} {run_ids_text(numbers)}"


def _have(n: int) -> str:
    """The verb after a count of ``n``: "1 row ... has", "3 rows ... have"."""
    return "has" if n == 1 else "have"


@dataclass(frozen=True)
class Finding:
    """One thing an integrity check found: a few words for a summary, and the sentence that says what and why."""

    short: str  # e.g. "1 torn row ignored": what the report's opening sentence quotes
    detail: str  # the whole problem, with the lines or run ids and what to do


@dataclass(frozen=True)
class LinesRead:
    """runs.csv read once: the records whose shape is right, where they were, and what was wrong with the rest."""

    records: list[list[str]]  # the header first
    numbers: list[int]  # the line number (1-based, header 1) of each record after the header
    cut: frozenset[int]  # run ids of records cut short (a crash mid-write): those runs lack rows
    total: int  # data records in the file, torn and malformed ones included
    findings: tuple[Finding, ...] = ()


# csv's default limit, far above any field omni-loader writes; reading lifts it, so a longer field is one row
# ignored, not an unreadable file.
FIELD_LIMIT = 131072


def csv_records(text: str) -> list[list[str]]:
    """The CSV records of ``text``, fields of any length (csv's field_size_limit lifted while it reads)."""
    limit = csv.field_size_limit()
    csv.field_size_limit(max(limit, len(text) + 1))
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    finally:
        csv.field_size_limit(limit)


# The columns a load writes alike on every row of its run (omni_loader.results.rows.rows_for_run).
RUN_LEVEL = ("digest", "state_dict_calls", "weights_loaded", "persistent_buffers", "checkpoint_resident")


def run_ids_text(ids: Iterable[int], most: int = 12) -> str:
    ids = sorted(ids)
    text = ", ".join(map(str, ids[:most]))
    return text + (f" and {len(ids) - most} more" if len(ids) > most else "")


def read_lines(path: Path) -> LinesRead:
    """runs.csv's well-shaped records, their line numbers, the runs cut short, and a finding per bad kind."""
    text = path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""
    if not text:
        return LinesRead([list(RUN_COLUMNS)], [], frozenset(), 0)
    records = csv_records(text)
    found: list[Finding] = []
    header = records[0]
    missing = [c for c in RUN_COLUMNS[: RUN_COLUMNS.index("minor_faults")] if c not in header]
    if missing:
        raise ResultsError(f"{path} lacks columns {missing}; it was not written by omni-loader (or its header is "
                           f"damaged): restore it from a copy")
    unknown = [c for c in header if c not in RUN_COLUMNS]
    if unknown:
        found.append(Finding(f"{count(len(unknown), 'unknown column')} ignored",
                      f"{path.name} has columns this omni-loader does not know ({', '.join(unknown)}): "
                      "written by a newer version? they are ignored"))
    torn = [] if text.endswith("\n") else [len(records)]  # a crash cut the last line short
    newer, malformed, oversized = [], [], []
    good, numbers = [header], []
    cut: set[int] = set()
    for number, record in enumerate(records[1:], start=2):
        if (number in torn or len(record) < len(header)) and len(record) > 1 and record[0].isdigit():
            cut.add(int(record[0]))  # its run id was written whole: that run's rows are incomplete
        if number in torn:
            continue
        if not record:
            continue  # a blank line
        if any(len(value) > FIELD_LIMIT for value in record):
            oversized.append(number)
        elif len(record) > len(header):
            newer.append(number)
        elif len(record) < len(header):
            (torn if number == len(records) else malformed).append(number)
        else:
            good.append(record)
            numbers.append(number)
    if torn:
        found.append(Finding(f"{len(torn)} torn row ignored",
                      f"the last line of {path.name} (line {torn[0]}) is torn, cut short by a crash or a full "
                      "disk: ignored"))
    if newer:
        found.append(Finding(f"{count(len(newer), 'row')} of a newer schema ignored",
                      f"{count(len(newer), 'row')} of {path.name} {_have(len(newer))} more fields than its header "
                      f"({_lines(newer)}): written by a newer omni-loader or two writers interleaved; ignored"))
    if oversized:
        found.append(Finding(f"{count(len(oversized), 'oversized row')} ignored",
                      f"{count(len(oversized), 'row')} of {path.name} {_have(len(oversized))} a field longer than "
                      f"{FIELD_LIMIT} characters ({_lines(oversized)}): not written by omni-loader; ignored"))
    if malformed:
        found.append(Finding(f"{count(len(malformed), 'malformed row')} ignored",
                      f"{count(len(malformed), 'row')} of {path.name} {_have(len(malformed))} too few fields "
                      f"({_lines(malformed)}): ignored"))
    return LinesRead(good, numbers, frozenset(cut), len(records) - 1, tuple(found))


def _possible(text: Any, top: float) -> bool:
    """A number as written in runs.csv: empty (not measured), or finite, from 0 to ``top``."""
    if not str(text).strip():
        return True
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) and 0 <= value <= top


# No load and no server start takes a day: a phase said to have is a number no clock of the kit gave.
MAX_SECONDS = 86400.0
# Only clock rounding makes a phase longer than its parent, or the leaf phases together longer than total.
NESTING_TOLERANCE = (0.01, 0.001)  # relative to the enclosing phase, and absolute seconds
# A benchmark's stamps are written to the second (now_iso), its rows' to the millisecond.
SPAN_TOLERANCE_S = 1.0


def _absurd_runs(frame) -> tuple[Finding | None, list[int]]:
    """Runs with a finite duration no clock gives: over a day, or longer than what encloses it."""
    from ..names import LEAF_PHASES

    timed = frame[frame["seconds"].notna()]
    why: dict[int, str] = {}
    for row in timed[timed["seconds"] > MAX_SECONDS].itertuples(index=False):
        why.setdefault(int(row.run_id), f"run {row.run_id}: {row.phase} took {row.seconds:.6g} s, longer than a day")
    rel, absolute = NESTING_TOLERANCE
    loads = timed[timed["source"].isin(["load", "aa"])]
    for run_id, rows in loads.groupby("run_id", sort=True):
        seconds = dict(zip(rows["phase"], rows["seconds"]))
        for row in rows[rows["parent"] != ""].itertuples(index=False):
            enclosing = seconds.get(row.parent)
            if enclosing is not None and row.seconds > enclosing * (1 + rel) + absolute:
                why.setdefault(int(run_id), f"run {run_id}: {row.phase} took {row.seconds:.6g} s, longer than "
                                            f"{row.parent} ({enclosing:.6g} s), which encloses it")
        leaves = sum(s for p, s in seconds.items() if p in LEAF_PHASES)
        if "total" in seconds and leaves > seconds["total"] * (1 + rel) + absolute:
            why.setdefault(int(run_id), f"run {run_id}: its leaf phases add up to {leaves:.6g} s, its total is "
                                        f"{seconds['total']:.6g} s")
    runs = sorted(why)
    if not runs:
        return None, []
    return Finding(f"{count(len(runs), 'run')} with absurd seconds ignored",
                   f"{count(len(runs), 'run')} of {RUNS_FILE} {_have(len(runs))} durations no clock gives "
                   f"({why[runs[0]]}; run ids {run_ids_text(runs)}): those runs are ignored; --resume repeats "
                   "them"), runs


def _stamp(text: Any):
    from datetime import datetime, timezone

    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _outside_span(frame, suite: Suite) -> tuple[Finding | None, list[int]]:
    """Runs stamped outside their benchmark's span, or ending before they started: another benchmark's."""
    from datetime import timedelta

    spans = {}
    for name, record in suite.members.items():
        start = _stamp(record.get("started_at")) if record.get("started_at") else None
        stamp = STATUS_STAMPS.get(str(record.get("status")))
        end = _stamp(record.get(stamp)) if stamp and record.get(stamp) else None
        for entry in record.plan:
            spans[int(entry["run_id"])] = (name, start, end)
    slack = timedelta(seconds=SPAN_TOLERANCE_S)
    outside: dict[int, str] = {}
    for row in frame[["run_id", "run_started", "run_ended"]].drop_duplicates().itertuples(index=False):
        name, start, end = spans.get(int(row.run_id), ("", None, None))
        began = _stamp(row.run_started) if str(row.run_started).strip() else None
        ended = _stamp(row.run_ended) if str(row.run_ended).strip() else None
        if (str(row.run_started).strip() and began is None) or (str(row.run_ended).strip() and ended is None):
            outside[int(row.run_id)] = f"run {row.run_id}'s stamps are not times"
        elif began and ended and ended < began:
            outside[int(row.run_id)] = f"run {row.run_id} ended ({row.run_ended}) before it started"
        elif began and start and began < start - slack:
            outside[int(row.run_id)] = (f"run {row.run_id} started at {row.run_started}, before benchmark {name} "
                                        f"did ({start.isoformat()})")
        elif ended and end and ended > end + slack:
            outside[int(row.run_id)] = (f"run {row.run_id} ended at {row.run_ended}, after benchmark {name} "
                                        f"did ({end.isoformat()})")
    runs = sorted(outside)
    if not runs:
        return None, []
    return Finding(f"{count(len(runs), 'run')} from outside the benchmark's time ignored",
                   f"{count(len(runs), 'run')} of {RUNS_FILE} {'was' if len(runs) == 1 else 'were'} not run by the "
                   f"benchmark that planned them "
                   f"({outside[runs[0]]}; run ids {run_ids_text(runs)}): rows of another benchmark, or a runs.csv "
                   "replaced while it ran? ignored; --resume repeats them"), runs


def rows_frame(records: list[list[str]]):  # -> pandas.DataFrame
    buffer = io.StringIO()
    csv.writer(buffer).writerows(records)
    buffer.seek(0)
    return typed_runs(buffer, RUNS_FILE)[list(RUN_COLUMNS)]


def check_rows(frame, suite: Suite, cut: Iterable[int] = frozenset()) -> tuple[Any, tuple[Finding, ...]]:
    """The frame without rows of bad values, duplicates, off the plan or of incomplete runs; the findings."""
    import pandas as pd

    found: list[Finding] = []
    if not len(frame):
        return frame, ()
    run_ids = pd.to_numeric(frame["run_id"], errors="coerce")
    bad_values = run_ids.isna() | (run_ids != run_ids.round()) | ~frame["source"].isin(SOURCES)
    if bad_values.any():
        found.append(Finding(f"{count(int(bad_values.sum()), 'row')} with unreadable values ignored",
                      f"{count(int(bad_values.sum()), 'row')} of {RUNS_FILE} {_have(int(bad_values.sum()))} "
                      "no integer run_id or an unknown source: ignored"))
    frame = frame[~bad_values].copy()
    frame["run_id"] = run_ids[~bad_values].astype(int)

    impossible = ~frame["_seconds"].map(lambda text: _possible(text, math.inf))
    if impossible.any():
        runs = sorted(set(frame.loc[impossible, "run_id"]))
        values = ", ".join(dict.fromkeys(repr(v[:20]) for v in frame.loc[impossible, "_seconds"]))
        found.append(Finding(f"{count(int(impossible.sum()), 'row')} with impossible seconds ignored",
                      f"{count(int(impossible.sum()), 'row')} of {RUNS_FILE} {_have(int(impossible.sum()))} "
                      f"seconds that no clock gives ({values}: not a finite number >= 0; run ids "
                      f"{run_ids_text(runs)}): those runs are ignored; --resume repeats them"))
        frame = frame[~frame["run_id"].isin(runs)]

    if "_resident" in frame:  # a share of the checkpoint's bytes
        unmeasurable = ~frame["_resident"].map(lambda text: _possible(text, 1.0))
        if unmeasurable.any():
            runs = sorted(set(frame.loc[unmeasurable, "run_id"]))
            values = ", ".join(dict.fromkeys(repr(str(v)[:20]) for v in frame.loc[unmeasurable, "_resident"]))
            found.append(Finding(f"{count(len(runs), 'run')} with an impossible checkpoint residency ignored",
                                 f"{count(len(runs), 'run')} of {RUNS_FILE} {_have(len(runs))} a checkpoint_resident "
                                 f"that no measurement gives ({values}: not a share from 0 to 1; run ids "
                                 f"{run_ids_text(runs)}): those runs are ignored; --resume repeats them"))
            frame = frame[~frame["run_id"].isin(runs)]

    dup_keys = frame.duplicated(["run_id", "phase"], keep=False)
    dup_runs = sorted(set(frame.loc[dup_keys, "run_id"]))
    if dup_runs:
        rows = int(frame["run_id"].isin(dup_runs).sum())
        found.append(Finding(f"{count(len(dup_runs), 'duplicated run')} ignored",
                      f"{count(len(dup_runs), 'run')} {_have(len(dup_runs))} more than one row for a phase (run ids "
                      f"{run_ids_text(dup_runs)}): two writers, or rows copied twice; all {rows} of their rows are "
                      "ignored"))
        frame = frame[~frame["run_id"].isin(dup_runs)]

    # What a load reports once is written on every row of its run: rows of one run that disagree were edited.
    loads = frame[frame["source"].isin(["load", "aa"])]
    per_run = loads.groupby("run_id")[list(RUN_LEVEL)].agg(lambda col: col.astype(str).nunique())
    edited = sorted(int(r) for r in per_run.index[(per_run > 1).any(axis=1)])
    if edited:
        which = sorted({c for c in RUN_LEVEL if (per_run.loc[edited, c] > 1).any()})
        found.append(Finding(f"{count(len(edited), 'inconsistent run')} ignored",
                             f"{count(len(edited), 'run')} {_have(len(edited))} rows that disagree on "
                             f"{', '.join(which)} (run ids {run_ids_text(edited)}), which a load writes alike on "
                             "every row: edited by hand? ignored; --resume repeats them"))
        frame = frame[~frame["run_id"].isin(edited)]

    for finding, runs in (_absurd_runs(frame), _outside_span(frame, suite)):
        if runs:
            found.append(finding)
            frame = frame[~frame["run_id"].isin(runs)]

    plan = suite.plan
    if plan and len(frame):  # (apply over no rows gives a frame, not a column)
        def matches(row: Any) -> bool:
            entry = plan.get(int(row.run_id))
            if entry is None:
                return False
            order = "" if entry.get("order") is None else str(entry["order"])
            return (row.variant == entry["variant"] and bool(row.warmup) == bool(entry["warmup"])
                    and str(row.order).removesuffix(".0") == order and row.source == entry["source"])

        off = ~frame.apply(matches, axis=1).astype(bool)
        if off.any():
            runs = sorted(set(frame.loc[off, "run_id"]))
            found.append(Finding(f"{count(int(off.sum()), 'row')} off the plan ignored",
                          f"{count(int(off.sum()), 'row')} of run ids {run_ids_text(runs)} "
                          f"{'does' if int(off.sum()) == 1 else 'do'} not match the plan in "
                          f"{METADATA_FILE} (run id, variant, warm-up, order or source): from another benchmark? "
                          "ignored"))
            frame = frame[~off]

    # A run whose last row was cut short is incomplete, and so is an ok loader run missing a phase its peers have
    # (a server's log figures may come and go).
    incomplete = sorted(set(frame["run_id"]) & set(cut))
    ok = frame[(frame["status"] == "ok") & frame["source"].isin(["load", "aa"]) & ~frame["run_id"].isin(incomplete)]
    for _, rows in ok.groupby(["source", "variant"]):
        phases = rows.groupby("run_id")["phase"].agg(frozenset)
        full = frozenset().union(*phases)
        incomplete += [int(r) for r, p in phases.items() if p != full]
    incomplete = sorted(incomplete)
    if incomplete:
        found.append(Finding(f"{count(len(incomplete), 'incomplete run')} ignored",
                      f"{count(len(incomplete), 'run')} lost phase rows, cut short by a crash (run ids "
                      f"{run_ids_text(incomplete)}): ignored; --resume repeats them"))
        frame = frame[~frame["run_id"].isin(incomplete)]
    return frame.reset_index(drop=True), tuple(found)
