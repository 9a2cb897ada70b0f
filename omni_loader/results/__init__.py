"""The results directory: tidy rows on disk, appended as runs finish, plus a versioned metadata record.

Layout of one results directory::

    metadata.json   schema_version, then the benchmarks it holds by name (``load``, ``startup``), each
                    with its spec (what was measured), plan (run order), environment and status
    runs.csv        one row per run and phase (tidy); per-run columns repeat on each of its rows
    report.md       rendered from the two files above, never the other way round
    plots/          idem

Its modules are named after what they hold: ``rows`` (runs.csv), ``suite`` (metadata.json), ``lock`` (one writer),
``integrity`` and ``row_checks`` (reading it checked), ``planner``, ``spec``, ``metadata`` and ``archive``.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "check_results": "integrity",
    "Results": "integrity",
    "resume_benchmark": "integrity",
    "read_runs": "rows",
    "append_rows": "rows",
    "RunRow": "rows",
    "RUNS_FILE": "rows",
    "read_metadata": "suite",
    "write_metadata": "suite",
    "benchmark": "suite",
    "benchmarks": "suite",
    "METADATA_FILE": "suite",
    "SCHEMA_VERSION": "suite",
    "writer_lock": "lock",
    "plan_runs": "planner",
    "BenchmarkSpec": "spec",
    "PlannedRun": "planner",
    "ORDERS": "planner",
    "DEFAULT_ORDER": "planner",
    "pack": "archive",
    "environment": "metadata",
})
