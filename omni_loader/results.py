"""The results directory: tidy rows on disk, appended as runs finish, plus a versioned metadata record.

Layout of one benchmark directory::

    metadata.json   schema_version, environment, spec (what was measured), plan (run order)
    runs.csv        one row per run and phase (tidy); per-run columns repeat on each of its rows
    report.md       rendered from the two files above, never the other way round
    plots/          idem

Rows are appended and flushed the moment a run ends, so an interrupted benchmark keeps every run
it finished, and ``--resume`` can tell which planned runs are still missing.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ResultsError

SCHEMA_VERSION = 2
# Versions this kit reads. Version 1 lacks the per-phase counters and the per-run stamps; read, they are empty.
READABLE_SCHEMAS = (1, 2)
METADATA_FILE = "metadata.json"
RUNS_FILE = "runs.csv"
# Held (flock) by the one process writing the directory; holds its pid and command while it does.
LOCK_FILE = "writer.lock"
# Rows a resume found untrustworthy (torn, duplicated, off the plan) are moved here, not deleted.
REJECTED_FILE = "runs.rejected.csv"

# Column order of runs.csv. Pinned by tests: changing it means bumping SCHEMA_VERSION.
RUN_COLUMNS = (
    "run_id",  # position in the plan, 0-based, warm-ups included
    "variant",  # baseline | optimized
    "warmup",  # True for warm-up runs (excluded from statistics)
    "order",  # 1-based index of this run among the measured runs of its variant ('' for warm-ups)
    "phase",  # phase name (see loader.LEAF_PHASES, plus weight_loading, total, startup_to_health)
    "parent",  # enclosing phase, '' for top-level phases
    "seconds",  # wall time of the phase (monotonic clock, GPU synchronised)
    "status",  # ok | failed
    "error",  # one-line reason when status is failed
    "state_dict_calls",
    "weights_loaded",
    "persistent_buffers",  # count
    "digest",
    "rss_peak_bytes",  # process peak resident memory at the end of the run
    "device_peak_bytes",  # GPU peak allocated, '' on CPU
    "source",  # load (a loader worker) | aa (the A/A noise-floor benchmark) | server (serve-ab)
    # schema 2
    "minor_faults",  # page faults served without I/O during the phase (first touches of fresh memory)
    "major_faults",  # page faults that needed I/O (e.g. reading a checkpoint page from disk)
    "voluntary_switches",  # context switches the process asked for (waiting on I/O, a lock)
    "involuntary_switches",  # context switches forced by the scheduler: another process took the CPU
    "run_started",  # wall-clock start of the run (UTC, ISO 8601), to see drift across a benchmark
    "run_ended",  # wall-clock end of the run
)
# Per-phase getrusage deltas (see timing.PhaseClock), in RUN_COLUMNS and in the loader's phase records.
PHASE_COUNTERS = ("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches")


def write_metadata(directory: str | os.PathLike[str], metadata: dict[str, Any]) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    record = {"schema_version": SCHEMA_VERSION, **metadata}
    path = directory / METADATA_FILE
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str))
    os.replace(tmp, path)
    return path


def read_metadata(directory: str | os.PathLike[str]) -> dict[str, Any]:
    path = Path(directory) / METADATA_FILE
    if not path.is_file():
        raise ResultsError(f"not a results directory (no {METADATA_FILE}): {directory}")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is not valid JSON ({exc})") from None
    version = record.get("schema_version")
    if version not in READABLE_SCHEMAS:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise ResultsError(
            f"{path} has schema_version {version!r}; this omni-loader reads versions "
            f"{', '.join(map(str, READABLE_SCHEMAS))}" + (" (upgrade omni-loader to read it)" if newer else "")
        )
    return record


def append_rows(directory: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> None:
    """Append rows to runs.csv (header on first write), flushed and synced to disk at once."""
    path = Path(directory) / RUNS_FILE
    new = not path.exists() or path.stat().st_size == 0
    torn = not new and not _ends_with_newline(path)
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RUN_COLUMNS, extrasaction="raise")
        if new:
            writer.writeheader()
        if torn:  # a crash cut the last line short: end it, so that it stays one (rejected) line of its own
            fh.write("\r\n")
        for row in rows:
            writer.writerow({col: _cell(row.get(col)) for col in RUN_COLUMNS})
        fh.flush()
        os.fsync(fh.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def read_runs(directory: str | os.PathLike[str]):  # -> pandas.DataFrame
    """runs.csv as it is on disk, as a DataFrame with typed columns (empty frame with the columns when absent).

    Nothing is checked: to read results, use :func:`check_results` (its ``frame`` leaves out torn,
    duplicated and off-plan rows, and it says what it left out).
    """
    import pandas as pd

    path = Path(directory) / RUNS_FILE
    if not path.exists():
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    return _typed(path, path)


def _typed(source: Any, path: Any):  # -> pandas.DataFrame
    import pandas as pd

    numeric = ("seconds", "device_peak_bytes", *PHASE_COUNTERS)
    frame = pd.read_csv(source, keep_default_na=False, na_values={c: [""] for c in numeric})
    for column in RUN_COLUMNS[RUN_COLUMNS.index("minor_faults"):]:
        if column not in frame.columns:  # a schema-1 file
            frame[column] = float("nan") if column in PHASE_COUNTERS else ""
    missing = [c for c in RUN_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsError(f"{path} lacks columns {missing}")
    frame["warmup"] = frame["warmup"].astype(str).str.lower().eq("true")
    frame["seconds"] = pd.to_numeric(frame["seconds"], errors="coerce")
    return frame


def _cell(value: Any) -> Any:
    return "" if value is None else value


# --------------------------------------------------------------------------- integrity


# Sources of rows, and the default source of a plan entry that lacks one (schema 1 plans).
SOURCES = ("load", "aa", "server")


@dataclass(frozen=True)
class ResultsCheck:
    """A results directory read with its integrity checked: what it holds, what was wrong, what was left out.

    ``frame`` is runs.csv without the rows that cannot be trusted (torn or malformed lines, rows of
    a newer schema, every row of a run that appears twice, rows that match no planned run, runs
    with phase rows missing). ``problems`` says what was found, one line each; ``summary`` says it
    in a few words (the report's opening sentence quotes it).
    """

    directory: Path
    metadata: dict[str, Any]
    frame: Any  # pandas.DataFrame
    problems: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # short form of each problem, e.g. "1 torn row ignored"
    missing_runs: tuple[int, ...] = ()  # planned run ids with no trusted rows
    rejected_lines: tuple[int, ...] = ()  # line numbers (1-based, header 1) of runs.csv left out of frame
    rejected_because: tuple[str, ...] = ()  # the findings (short form) that left those lines out
    notes: tuple[str, ...] = ()  # what is not a problem but worth saying: rows set aside by an earlier --resume

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def summary(self) -> str:
        """The findings, then the notes, in a few words each ('' when there is nothing to say)."""
        return "; ".join([*self.findings, *self.notes])


def planned_runs(metadata: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """run_id -> plan entry (variant, warmup, order, source) of every benchmark in ``metadata``."""
    plans: dict[int, dict[str, Any]] = {}
    default = "server" if metadata.get("kind") == "serve-ab" else "load"
    for entries, source in ((metadata.get("plan") or [], default),
                            ((metadata.get("serve_ab") or {}).get("plan") or [], "server")):
        for entry in entries:
            plans[int(entry["run_id"])] = {"source": source, **entry}
    return plans


def check_results(directory: str | os.PathLike[str]) -> ResultsCheck:
    """Read a results directory and check it; raise :class:`ResultsError` only when it cannot be read at all.

    Checks: a torn last line (a crash mid-write) or any line of the wrong shape, rows of a newer
    schema, duplicate (run_id, phase) rows, rows that match no planned run of metadata.json (run
    id, variant, warm-up, order, source), runs whose phase rows are incomplete, planned runs that
    are missing. Bad rows are left out of ``frame``; each finding is one line of ``problems``.
    """
    directory = Path(directory)
    metadata = read_metadata(directory)
    found: list[tuple[str, str]] = []  # (short, long)
    path = directory / RUNS_FILE
    records, numbers, cut = _read_lines(path, found)
    frame = _frame(records)
    frame["_line"] = numbers
    frame = _check_rows(frame, metadata, found, cut)
    rejected = tuple(sorted(set(range(2, _count_records(path) + 2)) - set(frame["_line"])))
    frame = frame.drop(columns="_line")
    because = tuple(short for short, _ in found)
    plan = planned_runs(metadata)
    have = set(frame["run_id"].astype(int)) if len(frame) else set()
    missing = tuple(sorted(set(plan) - have))
    if missing:
        status = metadata.get("status")
        why = f" (status {status}: continue with {resume_command(directory, metadata)})" if status != "complete" else ""
        found.append((f"{len(missing)} planned run(s) missing",
                      f"{len(missing)} of {len(plan)} planned runs have no usable rows: {_ids(missing)}{why}"))
    found += _writer_findings(directory, metadata)
    repairs = [*metadata.get("repairs", []), *(metadata.get("serve_ab") or {}).get("repairs", [])]
    notes = tuple(f"{r.get('rows')} row(s) set aside by --resume ({REJECTED_FILE})" for r in repairs)
    return ResultsCheck(directory, metadata, frame, [long for _, long in found], [short for short, _ in found],
                        missing, rejected, because, notes)


def _writer_findings(directory: Path, metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """A directory whose metadata says ``running``: still being written, or its writer died."""
    statuses = [metadata.get("status"), (metadata.get("serve_ab") or {}).get("status")]
    if "running" not in statuses:
        return []
    holder = lock_holder(directory)
    if holder and holder.get("alive"):
        return [("still being written",
                 f"{directory} is being written now by {describe_holder(holder)}: more runs are to come")]
    return [("its writer died",
             f"metadata.json says running, but no process is writing {directory}: its writer was killed or crashed; "
             f"continue with {resume_command(directory, metadata)}")]


def resume_command(directory: str | os.PathLike[str], metadata: dict[str, Any]) -> str:
    """The command that continues ``directory``: its spec comes from metadata.json, so nothing else is needed."""
    command = "serve-ab" if metadata.get("kind") == "serve-ab" else "reproduce"
    return f"omni-loader {command} --resume --out {directory}"


# --------------------------------------------------------------------------- one writer


_HELD: dict[Path, list[int]] = {}  # directory -> [lock file descriptor, depth] held by this process


@contextmanager
def writer_lock(directory: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the results directory's writer lock (made if need be) for the block; re-entrant in one process.

    An exclusive ``flock`` on ``writer.lock``: the OS drops it when the process dies however it
    dies, so a crash never leaves a directory locked. A second writer is refused with one line
    naming the directory and the process that holds it. Readers take no lock.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    key = directory.resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield directory
        finally:
            _HELD[key][1] -= 1
        return
    fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = lock_holder(directory)
        raise ResultsError(f"{directory} is being written by {describe_holder(holder)}; one writer per results "
                           "directory: wait for it to finish, or choose another --out") from None
    from .metadata import command_line, now_iso

    command = command_line()
    if command.split(" ", 1)[0] in ("__main__.py", "-c"):  # python -m omni_loader
        command = "omni-loader" + command[len(command.split(" ", 1)[0]):]
    record = {"pid": os.getpid(), "host": socket.gethostname(), "command": command, "since": now_iso()}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(record).encode(), 0)
    _HELD[key] = [fd, 1]
    try:
        yield directory
    finally:
        del _HELD[key]
        os.ftruncate(fd, 0)  # an empty lock file: nobody writing
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_holder(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who holds (or last held, if it died) the writer lock: pid, host, command, since, alive; None if nobody.

    Read without locking: the holder writes its record after taking the lock and empties it on release.
    """
    try:
        text = (Path(directory) / LOCK_FILE).read_text()
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return None
    alive = None  # unknown: another host
    if record.get("host") == socket.gethostname():
        try:
            os.kill(record["pid"], 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
    return {**record, "alive": alive}


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process"
    command = holder.get("command") or "?"
    command = command if len(command) <= 80 else command[:77] + "..."
    return f"process {holder['pid']} on {holder.get('host', '?')} ({command}, since {holder.get('since', '?')})"


def set_aside_rejected(check: ResultsCheck) -> int:
    """Move the rows a check left out of runs.csv into runs.rejected.csv; returns how many. Writers only.

    Called by ``--resume`` under the writer lock before it appends: the runs those rows belonged to
    are then run again, and runs.csv holds only rows that can be trusted. Nothing is deleted.
    """
    if not check.rejected_lines:
        return 0
    path = check.directory / RUNS_FILE
    records = list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8", errors="replace"), newline="")))
    rejected = set(check.rejected_lines)
    keep = [r for n, r in enumerate(records, start=1) if n not in rejected]
    out = [r for n, r in enumerate(records, start=1) if n in rejected]
    side = check.directory / REJECTED_FILE
    with side.open("a", newline="") as fh:
        if fh.tell() == 0:
            csv.writer(fh, lineterminator="\r\n").writerow(records[0])
        csv.writer(fh, lineterminator="\r\n").writerows(out)
        fh.flush()
        os.fsync(fh.fileno())
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\r\n").writerows(keep)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return len(out)


def _count_records(path: Path) -> int:
    """Data records (header excluded) in runs.csv, torn ones included."""
    if not path.exists():
        return 0
    return max(0, len(list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8", errors="replace"),
                                                  newline="")))) - 1)


def _ids(ids: Iterable[int], most: int = 12) -> str:
    ids = sorted(ids)
    text = ", ".join(map(str, ids[:most]))
    return text + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _read_lines(path: Path, found: list[tuple[str, str]]) -> tuple[list[list[str]], list[int], set[int]]:
    """runs.csv's records whose shape is right (header first), their line numbers, and the run ids of
    the records cut short (a crash mid-write: those runs lack rows), reporting the bad records."""
    if not path.exists():
        return [list(RUN_COLUMNS)], [], set()
    text = path.read_bytes().decode("utf-8", errors="replace")
    if not text:
        return [list(RUN_COLUMNS)], [], set()
    records = list(csv.reader(io.StringIO(text, newline="")))
    header = records[0]
    missing = [c for c in RUN_COLUMNS[: RUN_COLUMNS.index("minor_faults")] if c not in header]
    if missing:
        raise ResultsError(f"{path} lacks columns {missing}; it was not written by omni-loader (or its header is "
                           f"damaged): restore it from a copy")
    unknown = [c for c in header if c not in RUN_COLUMNS]
    if unknown:
        found.append((f"{len(unknown)} unknown column(s) ignored",
                      f"{path.name} has columns this omni-loader does not know ({', '.join(unknown)}): "
                      "written by a newer version? they are ignored"))
    torn = [] if text.endswith("\n") else [len(records)]  # a crash cut the last line short
    newer, malformed = [], []
    good, numbers = [header], []
    cut: set[int] = set()
    for number, record in enumerate(records[1:], start=2):
        if (number in torn or len(record) < len(header)) and len(record) > 1 and record[0].isdigit():
            cut.add(int(record[0]))  # its run id was written whole: that run's rows are incomplete
        if number in torn:
            continue
        if not record:
            continue  # a blank line
        if len(record) > len(header):
            newer.append(number)
        elif len(record) < len(header):
            (torn if number == len(records) else malformed).append(number)
        else:
            good.append(record)
            numbers.append(number)
    if torn:
        found.append((f"{len(torn)} torn row ignored",
                      f"the last line of {path.name} (line {torn[0]}) is torn, cut short by a crash or a full "
                      "disk: ignored"))
    if newer:
        found.append((f"{len(newer)} row(s) of a newer schema ignored",
                      f"{len(newer)} row(s) of {path.name} have more fields than its header (lines {_ids(newer)}): "
                      "written by a newer omni-loader or two writers interleaved; ignored"))
    if malformed:
        found.append((f"{len(malformed)} malformed row(s) ignored",
                      f"{len(malformed)} row(s) of {path.name} have too few fields (lines {_ids(malformed)}): "
                      "ignored"))
    return good, numbers, cut


def _frame(records: list[list[str]]):  # -> pandas.DataFrame
    buffer = io.StringIO()
    csv.writer(buffer).writerows(records)
    buffer.seek(0)
    return _typed(buffer, RUNS_FILE)[list(RUN_COLUMNS)]


def _check_rows(frame, metadata: dict[str, Any], found: list[tuple[str, str]], cut: set[int] = frozenset()):
    """Rows with bad values, duplicates, rows off the plan, incomplete runs: left out and reported."""
    import pandas as pd

    if not len(frame):
        return frame
    run_ids = pd.to_numeric(frame["run_id"], errors="coerce")
    bad_values = run_ids.isna() | (run_ids != run_ids.round()) | ~frame["source"].isin(SOURCES)
    if bad_values.any():
        found.append((f"{int(bad_values.sum())} row(s) with unreadable values ignored",
                      f"{int(bad_values.sum())} row(s) of {RUNS_FILE} have no integer run_id or an unknown source: "
                      "ignored"))
    frame = frame[~bad_values].copy()
    frame["run_id"] = run_ids[~bad_values].astype(int)

    dup_keys = frame.duplicated(["run_id", "phase"], keep=False)
    dup_runs = sorted(set(frame.loc[dup_keys, "run_id"]))
    if dup_runs:
        rows = int(frame["run_id"].isin(dup_runs).sum())
        found.append((f"{len(dup_runs)} duplicated run(s) ignored",
                      f"{len(dup_runs)} run(s) have more than one row for a phase (run ids {_ids(dup_runs)}): two "
                      f"writers, or rows copied twice; all {rows} of their rows are ignored"))
        frame = frame[~frame["run_id"].isin(dup_runs)]

    plan = planned_runs(metadata)
    if plan:
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
            found.append((f"{int(off.sum())} row(s) off the plan ignored",
                          f"{int(off.sum())} row(s) of run ids {_ids(runs)} do not match the plan in "
                          f"{METADATA_FILE} (run id, variant, warm-up, order or source): from another benchmark? "
                          "ignored"))
            frame = frame[~off]

    # A run's rows are written together; an ok run with fewer phases than its peers lost some (a crash).
    # A run whose last row was cut short is incomplete, and so is a loader run without a phase its peers
    # have (every load of a variant records the same phases; a server's log figures may come and go).
    incomplete = sorted(set(frame["run_id"]) & set(cut))
    ok = frame[(frame["status"] == "ok") & frame["source"].isin(["load", "aa"]) & ~frame["run_id"].isin(incomplete)]
    for _, rows in ok.groupby(["source", "variant"]):
        phases = rows.groupby("run_id")["phase"].agg(frozenset)
        full = frozenset().union(*phases)
        incomplete += [int(r) for r, p in phases.items() if p != full]
    incomplete = sorted(incomplete)
    if incomplete:
        found.append((f"{len(incomplete)} incomplete run(s) ignored",
                      f"{len(incomplete)} run(s) lost phase rows, cut short by a crash (run ids {_ids(incomplete)}): "
                      "ignored; --resume repeats them"))
        frame = frame[~frame["run_id"].isin(incomplete)]
    return frame.reset_index(drop=True)
