"""The A/B benchmark: warm-ups, then alternating measured runs, each appended to disk as it ends.

By default every run is a process forked from a fork server that has imported torch and the
model code once (see :mod:`omni_loader.worker`): each load starts with no model built and no
device touched, as a server restart does, and a crash takes down one run, not the benchmark.
``workers="spawn"`` starts a new interpreter per run (imports included), ``"in-process"`` loads
in this interpreter (notebooks, debugging).

``aa=True`` adds an A/A benchmark after the A/B one: the optimized variant in both arms, planned
the same way. Its two arms differ only by chance, so the difference between them is the smallest
change this machine can resolve for each phase: the noise floor the report quotes beside each
A/B difference.

What is measured is one :class:`~omni_loader.spec.BenchmarkSpec`; the benchmark is the ``load``
member of the results directory's suite (:mod:`omni_loader.suite`), and ``--with-startup`` adds
serve-ab's ``startup`` member beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import OmniLoaderError, ResultsError
from .integrity import resume_benchmark
from .lock import writer_lock
from .machine import Activity
from .metadata import now_iso
from .names import VARIANTS
from .options import LoadOptions
from .placement import resolve_cpus
from .planner import DEFAULT_ORDER, ORDERS, PlannedRun, plan_runs
from .rows import append_rows, failed_row, rows_for_run
from .spec import (AA_ARMS, AA_VARIANT, DEFAULT_RUNS, DEFAULT_WARMUP, SPEC_OPTIONS, BenchmarkSpec, same_value,
                   spec_conflicts)
from .suite import METADATA_FILE, benchmark, benchmark_record, read_metadata, store_benchmark, with_status

if TYPE_CHECKING:
    from .checkpoint import Snapshot
    from .variants import Variant

# Re-exported: the planner and the spec were part of this module, and notebooks import them from here.
__all__ = ["AA_ARMS", "AA_VARIANT", "DEFAULT_RUNS", "DEFAULT_WARMUP", "ORDERS", "SPEC_OPTIONS", "BenchmarkSpec",
           "PlannedRun", "benchmark_spec", "check_variants", "failed_row", "plan_runs", "reproduce",
           "reproduce_spec", "rows_for_run", "run_benchmark", "same_value", "spec_conflicts"]
MEMBER = "load"  # this benchmark's name in the results directory's suite


def run_benchmark(
    spec: BenchmarkSpec,
    out: str | os.PathLike[str],
    snapshot: Snapshot | None = None,
    resume: bool = False,
    progress: bool = True,
    on_start: Callable[[PlannedRun, int], None] | None = None,
) -> Path:
    """Run (or continue) the benchmark into ``out``; returns the results directory.

    ``on_start(run, pid)`` is called as each run's worker process starts.

    A run that fails is recorded with status ``failed`` and the benchmark goes on. An interrupt
    (Ctrl-C) stops the current worker (and the fork server, so that nothing is left behind); every
    finished run is already on disk, and the record says ``interrupted`` so that ``--resume`` can
    pick up the missing runs.

    The directory's writer lock is held throughout: a second writer is refused, not interleaved.
    On ``resume``, rows the integrity check rejects (torn, duplicated, off the plan) are moved to
    runs.rejected.csv first, and their runs are run again.
    """
    out = Path(out)
    with writer_lock(out):
        plan = spec.plan()
        record, done = _resumed(spec, out) if resume else (_started(spec, out, plan, snapshot), frozenset())
        store_benchmark(out, MEMBER, record)
        todo = [r for r in plan if r.run_id not in done]
        activity = Activity.start()  # what else the machine did meanwhile: the report warns when it was busy
        try:
            _run_all(spec, out, plan, todo, progress, on_start)
        except KeyboardInterrupt:
            store_benchmark(out, MEMBER, with_status({**record, "activity": activity.finish()}, "interrupted"))
            if spec.workers == "forkserver":
                from .worker import stop_forkserver

                stop_forkserver()
            raise
        store_benchmark(out, MEMBER, with_status({**record, "activity": activity.finish()}, "complete"))
    return out


def _run_all(spec: BenchmarkSpec, out: Path, plan: list[PlannedRun], todo: list[PlannedRun], progress: bool,
             on_start: Callable[[PlannedRun, int], None] | None) -> None:
    """Run ``todo``, appending each run's rows (or its failure) the moment it ends."""
    from .progress import progress_bar  # a widget in JupyterLab, a few whole lines in logs and saved notebooks
    from .worker import WorkerFailed, run_isolated, start_forkserver

    bar = progress_bar(total=len(plan), initial=len(plan) - len(todo), desc="A/B runs", unit="run", enabled=progress,
                       bar_format="{desc}: {n}/{total} |{bar}| {elapsed} elapsed, {remaining} left{postfix}")
    try:
        if spec.workers == "forkserver" and todo:
            bar.set_postfix_str("starting the worker server (imports torch and the model code once)")
            start_forkserver()
        for run in todo:
            bar.set_postfix_str(f"run {run.run_id + 1}/{len(plan)} {run.variant}{' (warm-up)' if run.warmup else ''}")
            started, began = time.perf_counter(), now_iso(precise=True)
            try:
                result = run_isolated(spec.request(run), spec.workers, spec.worker_timeout,
                                      on_start=(lambda pid, run=run: on_start(run, pid)) if on_start else None)
                append_rows(out, rows_for_run(run, result, started=began, ended=now_iso(precise=True)))
            except WorkerFailed as exc:
                append_rows(out, [failed_row(run, str(exc), time.perf_counter() - started, began,
                                             now_iso(precise=True))])
            bar.update(1)
    finally:
        bar.close()


def _started(spec: BenchmarkSpec, out: Path, plan: list[PlannedRun], snapshot: Snapshot | None) -> dict[str, Any]:
    """The record of a new benchmark; refused when ``out`` already holds one."""
    if (out / METADATA_FILE).exists():
        raise ResultsError(f"results directory already used: {out} (pass --resume to continue it, or another --out)")
    synthetic = " (synthetic weights)" if snapshot and snapshot.synthetic else ""
    return benchmark_record(
        "reproduce", spec, plan, spec.load.device, warmup=spec.warmup, repeats=spec.runs, order=spec.order,
        model=(snapshot.model_id if snapshot and snapshot.model_id else f"Qwen/Qwen2.5-Omni-3B Token2Wav{synthetic}"),
        checkpoint=snapshot.describe() if snapshot else {"checkpoint_dir": spec.checkpoint},
        construct=spec.load.construct, workers=spec.workers)


def _resumed(spec: BenchmarkSpec, out: Path) -> tuple[dict[str, Any], frozenset[int]]:
    """The saved record, continued (same spec, or a one-line refusal naming what differs), and the runs it has."""
    conflicts = spec_conflicts(BenchmarkSpec.from_metadata(read_metadata(out)), spec.flat())
    if conflicts:
        raise ResultsError(f"--resume: {out / METADATA_FILE} was made with another spec: {', '.join(conflicts)}")
    resumption = resume_benchmark(out, MEMBER)
    return resumption.record, resumption.done


# --------------------------------------------------------------------------- the main job


def benchmark_spec(snapshot: Snapshot, options: LoadOptions | None = None, *,
                   variants: tuple[str, ...] | list[str] = VARIANTS,
                   custom_variants: tuple[Variant, ...] | list[Variant] = (), **settings: Any) -> BenchmarkSpec:
    """The spec of a new benchmark of ``snapshot``: ``options`` resolved (``auto`` becomes the device
    used), the arms ``variants`` (built-ins or names of ``custom_variants``, whose steps the spec
    keeps), ``settings`` the other :class:`BenchmarkSpec` fields."""
    from .variants import BUILTIN_VARIANTS, resolve_variants

    chosen = resolve_variants(list(variants), list(custom_variants))
    return BenchmarkSpec(checkpoint=str(snapshot.root), load=(options or LoadOptions()).resolved(),
                         variants=tuple(v.name for v in chosen),
                         custom_variants=tuple(v.to_dict() for v in chosen if v.name not in BUILTIN_VARIANTS),
                         **settings)


def reproduce(
    snapshot: Snapshot,
    out: str | os.PathLike[str],
    options: LoadOptions | None = None,
    *,
    layout: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    construct: str | None = None,
    warmup: int = DEFAULT_WARMUP,
    runs: int = DEFAULT_RUNS,
    order: str = DEFAULT_ORDER,
    seed: int = 0,
    in_process: bool = False,
    worker_timeout: float | None = None,
    resume: bool = False,
    profile: bool = False,
    with_startup: bool = False,
    progress: bool = True,
    workers: str = "forkserver",
    aa: bool = False,
    reference_copy: bool = False,
    variants: tuple[str, ...] | list[str] = VARIANTS,
    custom_variants: tuple[Variant, ...] | list[Variant] = (),
    threads: int | None = 1,
    cpus: str | tuple[int, ...] = "auto",
) -> Path:
    """The main job: the A/B benchmark, optional profiles and startup runs, then report.md and plots.

    This is what notebook 01 calls (``omni-loader reproduce`` calls :func:`reproduce_spec`).
    Returns the results directory. ``options`` sets the load (default: :class:`LoadOptions`'s,
    device ``auto``); ``layout``, ``device``, ``dtype`` and ``construct`` override single fields of
    it. ``in_process=True`` is short for ``workers="in-process"``. ``variants`` names the arms (two
    or more; built-ins or the names of ``custom_variants``); the first is the one the others are
    compared with. ``cpus`` pins each load's process: ``auto``, ``any`` or CPU numbers (see
    :func:`~omni_loader.placement.resolve_cpus`).
    """
    options = (options or LoadOptions()).replace(layout=layout, device=device, dtype=dtype, construct=construct)
    spec = benchmark_spec(snapshot, options, warmup=warmup, runs=runs, order=order, seed=seed,
                          workers="in-process" if in_process else workers, worker_timeout=worker_timeout, aa=aa,
                          reference_copy=reference_copy, threads=threads, variants=variants,
                          custom_variants=custom_variants,
                          cpus=resolve_cpus(cpus, threads) if isinstance(cpus, str) else tuple(cpus))
    return reproduce_spec(spec, snapshot, out, resume=resume, profile=profile, with_startup=with_startup,
                          progress=progress)


def reproduce_spec(spec: BenchmarkSpec, snapshot: Snapshot, out: str | os.PathLike[str], *, resume: bool = False,
                   profile: bool = False, with_startup: bool = False, progress: bool = True) -> Path:
    """The main job for ``spec`` (made, or read back from ``out`` by ``--resume``).

    Every benchmark of the directory's suite that is not complete is continued: on ``resume``
    an interrupted startup benchmark too, with its saved commands. ``with_startup`` adds one when
    the directory has none. The writer lock is held for the whole job.
    """
    from .variants import variant_from

    check_variants(spec.variants, [variant_from(v) for v in spec.custom_variants], spec.load.device)
    with writer_lock(out):  # one writer for the whole job: benchmark, profiles, startup runs, report
        out = run_benchmark(spec, out, snapshot=snapshot, resume=resume, progress=progress)
        if profile:
            from .profiling import profile_variants

            profile_variants(snapshot, ("baseline", "optimized"), ("cprofile", "py-spy", "torch"), out / "profiles",
                             spec.load)
        _startup(spec, snapshot, out, with_startup, progress)
        from .report import write_report

        write_report(out)
    return out


def _startup(spec: BenchmarkSpec, snapshot: Snapshot, out: Path, wanted: bool, progress: bool) -> None:
    """Continue the directory's startup benchmark if it is unfinished, or start one if ``wanted`` and none."""
    from .serve_ab import StartupSpec, resume_serve_ab, run_serve_ab, stage_server_commands

    saved = benchmark(read_metadata(out), "startup")
    if saved and saved.get("status") != "complete":
        resume_serve_ab(out, progress=progress)  # its saved commands (and ports): the missing startup runs only
    elif wanted and not saved:
        base_cmd, opt_cmd, url = stage_server_commands(str(snapshot.root), options=spec.load)
        startup = StartupSpec(base_cmd, opt_cmd, url, warmup=spec.warmup, runs=spec.runs)
        run_serve_ab(startup, out, progress=progress, device=spec.load.device)


def check_variants(names: tuple[str, ...] | list[str], custom: tuple[Variant, ...] | list[Variant],
                   device: str) -> list[Variant]:
    """The variants of a benchmark, checked before any run: known names, steps that import here, and
    no GPU-only variant on a CPU (one line each)."""
    from .variants import STEPS, resolve_variants

    chosen = resolve_variants(list(names), list(custom))
    for v in chosen:
        for step in STEPS:
            v.step(step)
        if v.needs_gpu and not device.startswith("cuda"):
            raise OmniLoaderError(f"--variants: {v.name} needs a GPU (--device cuda); this machine's run is on "
                                  f"{device}")
    return chosen
