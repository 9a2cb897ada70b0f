"""The results directory: tidy rows on disk, appended as runs finish, plus a versioned metadata record.

Layout of one results directory::

    metadata.json   schema_version, then the benchmarks it holds by name (``load``, ``startup``), each
                    with its spec (what was measured), plan (run order), environment and status
    runs.csv        one row per run and phase (tidy); per-run columns repeat on each of its rows
    report.md       rendered from the two files above, never the other way round
    plots/          idem

This module is the one name to import them by; the parts live in modules named after what they
hold: :mod:`~omni_loader.rows` (runs.csv), :mod:`~omni_loader.suite` (metadata.json and its
benchmarks), :mod:`~omni_loader.lock` (one writer per directory) and
:mod:`~omni_loader.integrity` (reading it checked, repairing it before a resume).
"""

from __future__ import annotations

from .integrity import (
    ResultsCheck,
    Resumption,
    check_results,
    planned_runs,
    resume_benchmark,
    resume_command,
    set_aside_rejected,
    suite_status,
)
from .lock import LOCK_FILE, describe_holder, lock_holder, writer_lock
from .rows import (
    PHASE_COUNTERS,
    REJECTED_FILE,
    RUN_COLUMNS,
    RUNS_FILE,
    SOURCES,
    RunRow,
    append_rows,
    failed_row,
    read_runs,
    rows_for_run,
)
from .suite import (
    MEMBERS,
    METADATA_FILE,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    benchmark,
    benchmark_record,
    benchmarks,
    read_metadata,
    recorded_load_options,
    resumed,
    store_benchmark,
    with_status,
    write_metadata,
)

__all__ = [
    "LOCK_FILE", "MEMBERS", "METADATA_FILE", "PHASE_COUNTERS", "READABLE_SCHEMAS", "REJECTED_FILE", "RUNS_FILE",
    "RUN_COLUMNS", "SCHEMA_VERSION", "SOURCES", "ResultsCheck", "Resumption", "RunRow", "append_rows",
    "benchmark", "benchmark_record", "benchmarks", "check_results", "describe_holder", "failed_row", "lock_holder",
    "planned_runs", "read_metadata", "read_runs", "recorded_load_options", "resume_benchmark", "resume_command",
    "resumed", "rows_for_run", "set_aside_rejected", "store_benchmark", "suite_status", "with_status",
    "write_metadata", "writer_lock",
]
