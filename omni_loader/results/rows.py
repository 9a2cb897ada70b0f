"""runs.csv: one tidy row per run and phase, appended and flushed the moment a run ends.

Appended, never rewritten, so an interrupted benchmark keeps every run it finished. Every writer builds
:class:`RunRow` values; readers get a typed DataFrame (:func:`read_runs`) or the checked one.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ResultsError
from ..safe_files import open_fd

if TYPE_CHECKING:
    from .planner import PlannedRun

RUNS_FILE = "runs.csv"
# Rows a resume found untrustworthy (torn, duplicated, off the plan) are moved here, not deleted.
REJECTED_FILE = "runs.rejected.csv"
# Sources of rows: a loader worker, the A/A noise-floor benchmark, serve-ab's servers.
SOURCES = ("load", "aa", "server")
# Per-phase getrusage deltas (see timing.PhaseClock), in RUN_COLUMNS and in the loader's phase records.
PHASE_COUNTERS = ("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches")
# Per-phase bytes read from storage (timing.IoCounter), and the run's checkpoint residency (host.checkpoint_cache).
IO_COUNTERS = ("read_bytes",)
RESIDENCY_COLUMN = "checkpoint_resident"


@dataclass(frozen=True)
class RunRow:
    """One row of runs.csv; its fields, in order, are the file's columns (a change is a new schema)."""

    run_id: int  # position in the plan, 0-based, warm-ups included
    variant: str  # baseline | optimized | another variant's name | aa-1 | aa-2
    warmup: bool  # True for warm-up runs (excluded from statistics)
    order: int | None  # 1-based index of this run among the measured runs of its variant (None for warm-ups)
    phase: str  # phase name (see names.LEAF_PHASES, plus weight_loading, total, startup_to_health)
    parent: str = ""  # enclosing phase, '' for top-level phases
    seconds: float | None = None  # wall time of the phase (monotonic clock, GPU synchronised)
    status: str = "ok"  # ok | failed
    error: str = ""  # one-line reason when status is failed
    state_dict_calls: int | None = None
    weights_loaded: int | None = None
    persistent_buffers: int | None = None  # count
    digest: str = ""
    rss_peak_bytes: int | None = None  # process peak resident memory at the end of the run
    device_peak_bytes: int | None = None  # GPU peak allocated, None on CPU
    source: str = "load"  # one of SOURCES
    # schema 2
    minor_faults: int | None = None  # page faults served without I/O during the phase (first touches)
    major_faults: int | None = None  # page faults that needed I/O (e.g. reading a checkpoint page from disk)
    voluntary_switches: int | None = None  # context switches the process asked for (waiting on I/O, a lock)
    involuntary_switches: int | None = None  # forced by the scheduler: another process took the CPU
    # optional: a file written without them reads them empty (a resume appends rows of its own columns)
    read_bytes: int | None = None  # bytes the phase had the kernel fetch from storage (/proc/self/io)
    checkpoint_resident: float | None = None  # share of the checkpoint's bytes in the page cache before the load
    run_started: str = ""  # wall-clock start of the run (UTC, ISO 8601), to see drift across a benchmark
    run_ended: str = ""  # wall-clock end of the run

    @classmethod
    def of(cls, run: PlannedRun, phase: str, **values: Any) -> RunRow:
        """A row of planned ``run`` (its id, variant, warm-up, order and source) for ``phase``."""
        return cls(run.run_id, run.variant, run.warmup, run.order, phase, **{"source": run.source, **values})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Column order of runs.csv.
RUN_COLUMNS = tuple(f.name for f in fields(RunRow))


def rows_for_run(run: PlannedRun, result: dict[str, Any], source: str | None = None,
                 started: str = "", ended: str = "") -> list[RunRow]:
    """The rows (one per phase) of one finished load; ``result`` is the worker's dict."""
    common = dict(state_dict_calls=result["state_dict_calls"], weights_loaded=result["weights_loaded"],
                  persistent_buffers=len(result["persistent_buffers"]), digest=result["digest"] or "",
                  rss_peak_bytes=result["rss_peak_bytes"], device_peak_bytes=result["device_peak_bytes"],
                  source=source or run.source, run_started=started, run_ended=ended,
                  checkpoint_resident=(result.get("checkpoint_residency") or {}).get("resident"))
    return [RunRow.of(run, p["name"], parent=p["parent"] or "", seconds=p["seconds"], **common,
                      **{k: p.get(k) for k in (*PHASE_COUNTERS, *IO_COUNTERS)})
            for p in result["phase_records"]]


def failed_row(run: PlannedRun, error: str, seconds: float | None = None, started: str = "",
               ended: str = "") -> RunRow:
    """The one row of a load that failed: phase ``total``, the error's last line (a traceback's verdict)."""
    reason = error.strip().splitlines()[-1][:300] if error.strip() else "failed"
    return RunRow.of(run, "total", seconds=seconds, status="failed", error=reason, run_started=started,
                     run_ended=ended)


@contextmanager
def runs_file(directory: str | os.PathLike[str]) -> Iterator[tuple[int, int]]:
    """runs.csv of ``directory`` (made if absent) as (device, inode), the file a benchmark appends to, held open while
    the block runs: a file system reuses a deleted file's inode at once, so a runs.csv that replaced it could
    otherwise carry the same (device, inode) and be taken for it."""
    fd = open_fd(Path(directory) / RUNS_FILE, "a")
    try:
        info = os.fstat(fd)
        yield info.st_dev, info.st_ino
    finally:
        os.close(fd)


def append_rows(directory: str | os.PathLike[str], rows: Iterable[RunRow | dict[str, Any]],
                expect: tuple[int, int] | None = None) -> None:
    """Append rows to runs.csv, synced at once; a linked runs.csv, or not ``expect``, is refused."""
    path = Path(directory) / RUNS_FILE
    fd = open_fd(path, "a+")
    info = os.fstat(fd)
    if expect is not None and (info.st_dev, info.st_ino) != tuple(expect):
        os.close(fd)
        raise ResultsError(f"{path} is no longer the file this benchmark appends to: it was replaced while the "
                           "benchmark ran (by another writer, or by hand), so its rows so far are gone from it; "
                           "nothing more is appended. Start the benchmark again with a new --out")
    with os.fdopen(fd, "a+", newline="", encoding="utf-8") as fh:
        size = info.st_size
        new = size == 0
        torn = not new and os.pread(fd, 1, size - 1) != b"\n"
        columns = RUN_COLUMNS if new else _older_header(fd) or RUN_COLUMNS
        writer = csv.DictWriter(fh, fieldnames=columns)  # each row is made of exactly these columns below
        if new:
            writer.writeheader()
        if torn:  # a crash cut the last line short: end it, so that it stays one (rejected) line of its own
            fh.write("\r\n")
        for row in rows:
            values = row.to_dict() if isinstance(row, RunRow) else row
            writer.writerow({col: _cell(values.get(col)) for col in columns})
        fh.flush()
        os.fsync(fh.fileno())


def _older_header(fd: int) -> tuple[str, ...] | None:
    """The header of an older omni-loader's runs.csv at ``fd``, so a resume appends rows of its shape."""
    first = os.pread(fd, 4096, 0).split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    header = tuple(next(csv.reader([first]), []))
    older = len(header) < len(RUN_COLUMNS) and header == tuple(c for c in RUN_COLUMNS if c in header)
    return header if older and header[:5] == RUN_COLUMNS[:5] else None


def _cell(value: Any) -> Any:
    return "" if value is None else value


def read_runs(directory: str | os.PathLike[str]):  # -> pandas.DataFrame
    """runs.csv as it is on disk, as a DataFrame with typed columns (empty frame with the columns when absent).
    Nothing is checked: to read results, use :func:`~omni_loader.results.integrity.check_results`.
    """
    import pandas as pd

    path = Path(directory) / RUNS_FILE
    if not path.exists():
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    return typed_runs(path, path)


def typed_runs(source: Any, path: Any):  # -> pandas.DataFrame
    """runs.csv text from ``source`` (a path or a buffer) in typed columns; ``path`` names it in errors."""
    import pandas as pd

    numeric = ("seconds", "device_peak_bytes", *PHASE_COUNTERS, *IO_COUNTERS, RESIDENCY_COLUMN)
    frame = pd.read_csv(source, keep_default_na=False, na_values={c: [""] for c in numeric})
    for column in RUN_COLUMNS[RUN_COLUMNS.index("minor_faults"):]:
        if column not in frame.columns:  # a schema-1 file
            frame[column] = float("nan") if column in numeric else ""
    missing = [c for c in RUN_COLUMNS if c not in frame.columns]
    if missing:
        raise ResultsError(f"{path} lacks columns {missing}")
    frame["warmup"] = frame["warmup"].astype(str).str.lower().eq("true")
    for column in ("seconds", *IO_COUNTERS, RESIDENCY_COLUMN):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame
