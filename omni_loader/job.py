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
from .names import VARIANTS
from .token2wav.options import LoadOptions
from .host.placement import resolve_cpus
from .results.planner import DEFAULT_ORDER
from .bench.runner import benchmark_spec, check_variants, run_benchmark
from .bench.spec import DEFAULT_RUNS, DEFAULT_WARMUP, BenchmarkSpec
from .results.suite import benchmark, read_metadata

if TYPE_CHECKING:
    from .token2wav.checkpoint import Snapshot
    from .token2wav.variants import Variant

__all__ = ["reproduce", "reproduce_spec"]


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
    :func:`~omni_loader.host.placement.resolve_cpus`).
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
    from .token2wav.variants import variant_from

    check_variants(spec.variants, [variant_from(v) for v in spec.custom_variants], spec.load.device)
    with writer_lock(out):  # one writer for the whole job: benchmark, profiles, startup runs, report
        out = run_benchmark(spec, out, snapshot=snapshot, resume=resume, progress=progress)
        if profile:
            from .profiling.run import profile_variants

            profile_variants(snapshot, ("baseline", "optimized"), ("cprofile", "py-spy", "torch"), out / "profiles",
                             spec.load)
        _startup(spec, snapshot, out, with_startup, progress)
        from .reporting.report import write_report

        write_report(out)
    return out


def _startup(spec: BenchmarkSpec, snapshot: Snapshot, out: Path, wanted: bool, progress: bool) -> None:
    """Continue the directory's startup benchmark if it is unfinished, or start one if ``wanted`` and none."""
    from .startup.serve_ab import StartupSpec, resume_serve_ab, run_serve_ab
    from .startup.one_run import stage_server_commands

    saved = benchmark(read_metadata(out), "startup")
    if saved and saved.get("status") != "complete":
        resume_serve_ab(out, progress=progress)  # its saved commands (and ports): the missing startup runs only
    elif wanted and not saved:
        base_cmd, opt_cmd, url = stage_server_commands(str(snapshot.root), options=spec.load)
        startup = StartupSpec(base_cmd, opt_cmd, url, warmup=spec.warmup, runs=spec.runs)
        run_serve_ab(startup, out, progress=progress, device=spec.load.device)
