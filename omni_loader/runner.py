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
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .checkpoint import Snapshot
from .errors import PlanError, ResultsError
from .metadata import command_line, environment, now_iso
from .results import METADATA_FILE, PHASE_COUNTERS, append_rows, read_metadata, read_runs, write_metadata

ORDERS = ("alternate", "abba", "shuffle", "blocked")
VARIANTS = ("baseline", "optimized")
# The A/A benchmark's two arms (rows with source "aa"); both load AA_VARIANT.
AA_ARMS = ("aa-1", "aa-2")
AA_VARIANT = "optimized"
DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1


@dataclass(frozen=True)
class BenchmarkSpec:
    """What is measured: frozen, stored in metadata.json, and compared on ``--resume``."""

    checkpoint: str
    layout: str = "vllm-omni"
    device: str = "cpu"
    dtype: str = "float32"
    construct: str = "upstream"
    warmup: int = DEFAULT_WARMUP
    runs: int = DEFAULT_RUNS
    order: str = "alternate"
    seed: int = 0
    workers: str = "forkserver"
    worker_timeout: float | None = None
    aa: bool = False
    reference_copy: bool = False

    def plan(self) -> list[PlannedRun]:
        """The A/B runs, then (with ``aa``) the A/A runs, numbered in one sequence."""
        plan = plan_runs(self.warmup, self.runs, self.order, self.seed)
        if self.aa:
            plan += plan_runs(self.warmup, self.runs, self.order, self.seed, first_id=len(plan), variants=AA_ARMS,
                              source="aa")
        return plan

    def request(self, run: PlannedRun) -> Any:
        from .worker import LoadRequest

        variant = AA_VARIANT if run.source == "aa" else run.variant
        return LoadRequest(self.checkpoint, variant, self.layout, self.device, self.dtype, self.construct,
                           self.reference_copy)


@dataclass(frozen=True)
class PlannedRun:
    run_id: int
    variant: str  # the variant loaded, or the A/A arm (aa-1, aa-2) for source "aa"
    warmup: bool
    order: int | None  # 1-based index among the measured runs of this variant
    source: str = "load"  # load: the A/B benchmark; aa: the A/A noise-floor benchmark


def plan_runs(
    warmup: int, runs: int, order: str = "alternate", seed: int = 0, first_id: int = 0,
    variants: tuple[str, str] = VARIANTS, source: str = "load",
) -> list[PlannedRun]:
    """Warm-ups of each variant first (A, B, A, B...), then the measured runs in ``order``.

    ``alternate`` is ABAB..., ``abba`` repeats ABBA (cancels a linear drift), ``shuffle`` is a
    seeded random permutation of the same multiset, ``blocked`` is AA...BB... Run ids start at
    ``first_id`` (serve-ab numbers its runs after those already in a shared results directory).
    """
    if order not in ORDERS:
        raise PlanError(f"--order must be one of {ORDERS}, not {order!r}")
    if warmup < 0 or runs < 1:
        raise PlanError("--warmup must be >= 0 and --runs >= 1")
    a, b = variants
    if order == "alternate":
        sequence = [a, b] * runs
    elif order == "abba":
        sequence = ([a, b, b, a] * ((runs + 1) // 2))[: 2 * runs]
    else:
        sequence = [a] * runs + [b] * runs
        if order == "shuffle":
            random.Random(seed).shuffle(sequence)
    plan = [PlannedRun(first_id + i, v, True, None, source) for i, v in enumerate([a, b] * warmup)]
    seen = dict.fromkeys(variants, 0)
    for variant in sequence:
        seen[variant] += 1
        plan.append(PlannedRun(first_id + len(plan), variant, False, seen[variant], source))
    return plan


# --------------------------------------------------------------------------- one run


def rows_for_run(run: PlannedRun, result: dict[str, Any], source: str | None = None,
                 started: str = "", ended: str = "") -> list[dict[str, Any]]:
    """runs.csv rows (one per phase) for one finished load."""
    common = {
        "run_id": run.run_id, "variant": run.variant, "warmup": run.warmup, "order": run.order,
        "status": "ok", "error": "", "state_dict_calls": result["state_dict_calls"],
        "weights_loaded": result["weights_loaded"], "persistent_buffers": len(result["persistent_buffers"]),
        "digest": result["digest"], "rss_peak_bytes": result["rss_peak_bytes"],
        "device_peak_bytes": result["device_peak_bytes"], "source": source or run.source,
        "run_started": started, "run_ended": ended,
    }
    return [{**common, "phase": p["name"], "parent": p["parent"] or "", "seconds": p["seconds"],
             **{k: p.get(k, "") for k in PHASE_COUNTERS}}
            for p in result["phase_records"]]


def failed_row(run: PlannedRun, error: str, seconds: float | None = None, started: str = "",
               ended: str = "") -> dict[str, Any]:
    return {"run_id": run.run_id, "variant": run.variant, "warmup": run.warmup, "order": run.order,
            "phase": "total", "parent": "", "seconds": seconds, "status": "failed",
            "error": error.strip().splitlines()[-1][:300] if error.strip() else "failed", "source": run.source,
            "run_started": started, "run_ended": ended}


# --------------------------------------------------------------------------- the benchmark


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
    (Ctrl-C) stops after killing the current worker; every finished run is already on disk, and
    metadata.json says ``interrupted`` so that ``--resume`` can pick up the missing runs.
    """
    from .worker import WorkerFailed, run_isolated, start_forkserver

    out = Path(out)
    plan = spec.plan()
    metadata = _start(spec, out, plan, snapshot, resume)
    existing = read_runs(out) if resume else None
    done = set(existing[existing["source"].isin(["load", "aa"])]["run_id"].astype(int)) if resume else set()
    todo = [r for r in plan if r.run_id not in done]
    bar = _progress_bar(len(plan), initial=len(plan) - len(todo), enabled=progress)
    metadata["status"] = "running"
    write_metadata(out, metadata)
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
    except KeyboardInterrupt:
        metadata.update(status="interrupted", interrupted_at=now_iso())
        write_metadata(out, metadata)
        raise
    finally:
        bar.close()
    metadata.update(status="complete", finished_at=now_iso())
    write_metadata(out, metadata)
    return out


def _start(spec: BenchmarkSpec, out: Path, plan: list[PlannedRun], snapshot: Snapshot | None,
           resume: bool) -> dict[str, Any]:
    if resume:
        metadata = read_metadata(out)
        if metadata.get("spec") != asdict(spec):
            raise ResultsError(f"--resume: {out / METADATA_FILE} was made with a different spec: {metadata.get('spec')}")
        metadata.setdefault("resumed_at", []).append(now_iso())
        return metadata
    if (out / METADATA_FILE).exists():
        raise ResultsError(f"results directory already used: {out} (pass --resume to continue it, or another --out)")
    out.mkdir(parents=True, exist_ok=True)
    return {
        "kind": "reproduce",
        "spec": asdict(spec),
        "construct": spec.construct,
        "workers": spec.workers,
        "warmup": spec.warmup,
        "repeats": spec.runs,
        "order": spec.order,
        "plan": [asdict(r) for r in plan],
        "environment": environment(spec.device),
        "checkpoint": snapshot.describe() if snapshot else {"checkpoint_dir": spec.checkpoint},
        "model": (snapshot.model_id if snapshot and snapshot.model_id else "Qwen/Qwen2.5-Omni-3B Token2Wav"
                  + (" (synthetic weights)" if snapshot and snapshot.synthetic else "")),
        "command_line": command_line(),
        "started_at": now_iso(),
    }


def _progress_bar(total: int, initial: int, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc="A/B runs", unit="run", disable=not enabled,
                bar_format="{desc}: {n}/{total} |{bar}| {elapsed} elapsed, {remaining} left {postfix}")


# --------------------------------------------------------------------------- CLI


def default_out_dir(args: Any) -> Path:
    label = "model" if args.model else ("checkpoint" if args.checkpoint else f"synthetic-{args.size}")
    return Path("results") / f"reproduce-{label}-{time.strftime('%Y%m%d-%H%M%S')}"


def reproduce(
    snapshot: Snapshot,
    out: str | os.PathLike[str],
    layout: str = "vllm-omni",
    device: str = "cpu",
    dtype: str = "float32",
    warmup: int = DEFAULT_WARMUP,
    runs: int = DEFAULT_RUNS,
    order: str = "alternate",
    seed: int = 0,
    in_process: bool = False,
    worker_timeout: float | None = None,
    resume: bool = False,
    profile: bool = False,
    with_startup: bool = False,
    progress: bool = True,
    construct: str = "upstream",
    workers: str = "forkserver",
    aa: bool = False,
    reference_copy: bool = False,
) -> Path:
    """The main job: the A/B benchmark, optional profiles and startup runs, then report.md and plots.

    This is what ``omni-loader reproduce`` and notebook 01 call. Returns the results directory.
    ``in_process=True`` is short for ``workers="in-process"``.
    """
    from .report import write_report

    spec = BenchmarkSpec(checkpoint=str(snapshot.root), layout=layout, device=device, dtype=dtype,
                         construct=construct, warmup=warmup, runs=runs, order=order, seed=seed,
                         workers="in-process" if in_process else workers, worker_timeout=worker_timeout, aa=aa,
                         reference_copy=reference_copy)
    out = run_benchmark(spec, out, snapshot=snapshot, resume=resume, progress=progress)
    if profile:
        from .profiling import profile_variants

        profile_variants(snapshot, ("baseline", "optimized"), ("cprofile", "py-spy", "torch"), out / "profiles",
                         layout=layout, device=device)
    if with_startup and read_metadata(out).get("serve_ab", {}).get("status") != "complete":
        from .server import serve_ab, stage_server_commands

        base_cmd, opt_cmd, url = stage_server_commands(str(snapshot.root), layout=layout, device=device)
        serve_ab(base_cmd, opt_cmd, url, out, warmup=warmup, runs=runs)
    write_report(out)
    return out


def cmd_reproduce(args: Any) -> int:
    from .cli import snapshot_from_args
    from .devices import resolve_device
    from .report import REPORT_FILE

    resolve_device(args.device)  # fail fast, before a multi-GB snapshot is made
    if args.resume and not args.out:
        raise ResultsError("--resume needs --out DIR (the results directory to continue)")
    snapshot = snapshot_from_args(args)
    out = Path(args.out) if args.out else default_out_dir(args)
    print(f"results: {out}")
    try:
        reproduce(snapshot, out, layout=args.layout, device=args.device, dtype=args.dtype, warmup=args.warmup,
                  runs=args.runs, order=args.order, seed=args.order_seed, workers=args.workers,
                  worker_timeout=args.worker_timeout, resume=args.resume, profile=args.profile,
                  with_startup=args.with_startup, construct=args.construct, aa=args.aa,
                  reference_copy=args.reference_copy)
    except KeyboardInterrupt:
        n = read_runs(out)["run_id"].nunique() if (out / "runs.csv").exists() else 0
        print(f"interrupted: {n} run(s) saved in {out}; continue with --resume --out {out}")
        return 130
    report = out / REPORT_FILE
    print(report.read_text())
    print(f"report: {report}")
    return 0


def add_command(sub: Any) -> None:
    from .cli import _add_checkpoint_args, _add_load_args
    from .worker import WORKER_MODES

    p = sub.add_parser("reproduce", help="reproduce the PR's tables: alternating A/B loads, statistics, report, plots")
    _add_checkpoint_args(p)
    _add_load_args(p)
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP,
                   help=f"warm-up runs per variant (default {DEFAULT_WARMUP})")
    p.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                   help=f"measured runs per variant (default {DEFAULT_RUNS}; the PR used 5)")
    p.add_argument("--order", choices=ORDERS, default="alternate", help="run order (default alternate: ABAB...)")
    p.add_argument("--order-seed", type=int, default=0, help="seed for --order shuffle")
    w = p.add_mutually_exclusive_group()
    w.add_argument("--workers", choices=WORKER_MODES, default="forkserver",
                   help="process per run: forkserver (default: forked from a server that imported torch and the "
                        "model code once), spawn (a new interpreter, imports included) or in-process")
    w.add_argument("--spawn", dest="workers", action="store_const", const="spawn",
                   help="short for --workers spawn: a full cold start per run")
    w.add_argument("--in-process", dest="workers", action="store_const", const="in-process",
                   help="short for --workers in-process")
    p.add_argument("--worker-timeout", type=float, default=None, metavar="S", help="kill a worker after S seconds")
    p.add_argument("--aa", action="store_true",
                   help=f"also run an A/A benchmark ({AA_VARIANT} in both arms) for this machine's noise floor")
    p.add_argument("--reference-copy", action="store_true",
                   help="also time a plain strict load_state_dict of the same tensors after each load (a yardstick)")
    p.add_argument("--out", metavar="DIR", help="results directory (default results/reproduce-<...>-<time>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted results directory (--out)")
    p.add_argument("--profile", action="store_true", help="also profile one load per variant into DIR/profiles")
    p.add_argument("--with-startup", action="store_true", help="also measure startup to /health of a stage server")
    p.set_defaults(func=cmd_reproduce)
