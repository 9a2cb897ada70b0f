"""The main job, read top to bottom: the A/B benchmark, then profiles, the startup A/B and the report.

A module of its own, above the parts it calls in turn (:mod:`omni_loader.bench.runner` for the benchmark,
:mod:`omni_loader.profiling`, :mod:`omni_loader.startup.serve_ab`, :mod:`omni_loader.reporting.report`), so that none of
them has to import another to finish the job: the profiles run a worker of the benchmark, and the
benchmark need not know that profiles exist.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .results.lock import writer_lock
from .bench.runner import check_variants, run_benchmark
from .results.spec import BenchmarkSpec
from .results.integrity import Results, check_results

if TYPE_CHECKING:
    from .results.suite import Record
    from .token2wav.checkpoint import Snapshot

__all__ = ["reproduce"]


def reproduce(spec: BenchmarkSpec, out: str | os.PathLike[str], *, snapshot: Snapshot | None = None,
              resume: bool = False, profile: bool = False, with_startup: bool = False, progress: bool = True) -> Results:
    """The main job for ``spec``: the A/B benchmark, optional profiles and startup runs, then report.md and plots.

    ``spec`` says what is measured (make a new one with :func:`~omni_loader.bench.runner.benchmark_spec`,
    or read one back from a results directory with ``BenchmarkSpec.from_metadata``); what else the job
    does is the keywords. ``snapshot`` is the opened checkpoint when the caller has it (its Hub id and
    whether it is synthetic go into the record); else ``spec.checkpoint`` is opened. Every benchmark of
    the directory's suite that is not complete is continued: on ``resume`` an interrupted startup
    benchmark too, with its saved commands. ``with_startup`` adds one when the directory has none. The
    writer lock is held for the whole job. The directory is read back once after the benchmarks (once
    more when a startup benchmark ran after that read): the report is drawn from it, and it is returned (a
    :class:`~omni_loader.results.integrity.Results`, a path wherever one is wanted), so a caller that wants a verdict
    (the command line's exit status) need not read it again.
    """
    from .results.lifecycle import reserve_blas
    from .token2wav.checkpoint import open_snapshot
    from .token2wav.variants import variant_from

    reserve_blas()  # while memory is free: out of memory in OpenBLAS later is then one line, not its exit(1)
    snapshot = snapshot or open_snapshot(spec.checkpoint)
    check_variants(spec.variants, [variant_from(v) for v in spec.custom_variants], spec.load.device,
                   timeout=spec.worker_timeout)
    with writer_lock(out):  # one writer for the whole job: benchmark, profiles, startup runs, report
        from .reporting.sequential import look_at  # a sequential design's early look reads the verdicts as the report does

        out = run_benchmark(spec, out, snapshot=snapshot, resume=resume, progress=progress, look=look_at)
        if profile:
            from .profiling.run import profile_variants

            profile_variants(snapshot, ("baseline", "optimized"), ("cprofile", "py-spy", "torch"), out / "profiles",
                             spec.load)
        check = check_results(out)
        if _startup(spec, snapshot, out, with_startup, progress, check.benchmark("startup")):
            check = check_results(out)  # the startup benchmark wrote rows and its record: read them
        from .reporting.report import write_report
        from .results.lifecycle import drawing_report

        with drawing_report(out, check) as check:  # metadata.json says "not drawn" until report.md is written
            write_report(check)
    return check


def _startup(spec: BenchmarkSpec, snapshot: Snapshot, out: Path, wanted: bool, progress: bool,
             saved: Record | None) -> bool:
    """Continue the directory's startup benchmark (``saved``: its record) if it is unfinished, or start one if
    ``wanted`` and none; whether one ran."""
    from .startup.serve_ab import StartupSpec, resume_serve_ab, run_serve_ab
    from .startup.one_run import stage_server_commands

    if saved and saved.get("status") != "complete":
        resume_serve_ab(out, progress=progress)  # its saved commands (and ports): the missing startup runs only
        return True
    if wanted and not saved:
        base_cmd, opt_cmd, url = stage_server_commands(str(snapshot.root), options=spec.load)
        startup = StartupSpec(base_cmd, opt_cmd, url, warmup=spec.warmup, runs=spec.runs)
        run_serve_ab(startup, out, progress=progress, device=spec.load.device)
        return True
    return False
