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
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import ResultsError

SCHEMA_VERSION = 2
# Versions this kit reads. Version 1 lacks the per-phase counters and the per-run stamps; read, they are empty.
READABLE_SCHEMAS = (1, 2)
METADATA_FILE = "metadata.json"
RUNS_FILE = "runs.csv"

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
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=RUN_COLUMNS, extrasaction="raise")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({col: _cell(row.get(col)) for col in RUN_COLUMNS})
        fh.flush()
        os.fsync(fh.fileno())


def read_runs(directory: str | os.PathLike[str]):  # -> pandas.DataFrame
    """runs.csv as a DataFrame with typed columns (empty frame with the columns when absent)."""
    import pandas as pd

    path = Path(directory) / RUNS_FILE
    if not path.exists():
        return pd.DataFrame(columns=list(RUN_COLUMNS))
    numeric = ("seconds", "device_peak_bytes", *PHASE_COUNTERS)
    frame = pd.read_csv(path, keep_default_na=False, na_values={c: [""] for c in numeric})
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
