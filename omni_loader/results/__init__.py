"""The results directory: tidy rows on disk, appended as runs finish, plus a versioned metadata record.

Layout of one results directory::

    metadata.json   schema_version, then the benchmarks it holds by name (``load``, ``startup``), each
                    with its spec (what was measured), plan (run order), environment and status
    runs.csv        one row per run and phase (tidy); per-run columns repeat on each of its rows
    report.md       rendered from the two files above, never the other way round
    plots/          idem

The parts live in modules named after what they hold: :mod:`~omni_loader.results.rows` (runs.csv), :mod:`~omni_loader.results.suite` (metadata.json and its
benchmarks), :mod:`~omni_loader.results.lock` (one writer per directory) and
:mod:`~omni_loader.results.integrity` (reading it checked, repairing it before a resume).

:mod:`~omni_loader.results.row_checks` checks runs.csv line by line, :mod:`~omni_loader.results.planner`
makes the run plan the rows are checked against, :mod:`~omni_loader.results.spec` is what a benchmark measured
(``BenchmarkSpec``, from which the plan is made and a resume is checked), :mod:`~omni_loader.results.metadata` records the
environment, :mod:`~omni_loader.results.archive` packs a directory into one file and
:mod:`~omni_loader.safe_files` opens its files in place, never through a link.
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
