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
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from .checkpoint import Snapshot
from .discovery import VARIANTS
from .errors import OmniLoaderError, PlanError, ResultsError
from .metadata import command_line, environment, now_iso
from .variants import BUILTIN_VARIANTS, STEPS, Variant, parse_variant, resolve_variants
from .results import (
    METADATA_FILE,
    PHASE_COUNTERS,
    REJECTED_FILE,
    append_rows,
    check_results,
    read_metadata,
    resume_command,
    set_aside_rejected,
    write_metadata,
    writer_lock,
)

ORDERS = ("alternate", "abba", "shuffle", "blocked")
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
    threads: int | None = 1  # torch intra-op threads per load (see worker.intra_op_threads); None: torch's default
    variants: tuple[str, ...] = VARIANTS  # the arms, in order; statistics compare each with the first
    custom_variants: tuple[dict[str, Any], ...] = ()  # Variant dicts of the arms that name their own steps

    def plan(self) -> list[PlannedRun]:
        """The A/B runs, then (with ``aa``) the A/A runs, numbered in one sequence."""
        plan = plan_runs(self.warmup, self.runs, self.order, self.seed, variants=tuple(self.variants))
        if self.aa:
            plan += plan_runs(self.warmup, self.runs, self.order, self.seed, first_id=len(plan), variants=AA_ARMS,
                              source="aa")
        return plan

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> BenchmarkSpec:
        """The spec a results directory was made with (``metadata["spec"]``); one-line error if unusable."""
        saved = metadata.get("spec")
        if not isinstance(saved, dict) or "checkpoint" not in saved:
            raise ResultsError(f"{METADATA_FILE} holds no benchmark spec: it was not made by reproduce")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(saved) - set(known))
        if unknown:
            raise ResultsError(f"{METADATA_FILE} has spec fields this omni-loader does not know ({', '.join(unknown)}):"
                               " it was made by a newer version; upgrade omni-loader to continue it")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})

    def request(self, run: PlannedRun) -> Any:
        from .worker import LoadRequest

        custom = {v["name"]: v for v in self.custom_variants}
        variant = AA_VARIANT if run.source == "aa" else custom.get(run.variant, run.variant)
        return LoadRequest(self.checkpoint, variant, self.layout, self.device, self.dtype, self.construct,
                           self.reference_copy, threads=self.threads)


# The option that sets each spec field, to name a conflict the way the user would type it.
SPEC_OPTIONS = {"checkpoint": "--checkpoint", "layout": "--layout", "device": "--device", "dtype": "--dtype",
                "construct": "--construct", "warmup": "--warmup", "runs": "--runs", "order": "--order",
                "seed": "--order-seed", "workers": "--workers", "worker_timeout": "--worker-timeout", "aa": "--aa",
                "reference_copy": "--reference-copy", "variants": "--variants", "custom_variants": "--variant",
                "threads": "--threads"}


def spec_conflicts(saved: BenchmarkSpec, given: dict[str, Any], options: dict[str, str] | None = None) -> list[str]:
    """One phrase per field of ``given`` (spec field -> value) that differs from ``saved``: ``--runs 6 (saved: 5)``.

    Fields absent from ``given`` are not compared: they are taken from ``saved``.
    """
    names = {**SPEC_OPTIONS, **(options or {})}
    lines = []
    for name, value in given.items():
        old = getattr(saved, name)
        if _same(name, value, old):
            continue
        option = names.get(name, name)
        if isinstance(value, bool) or isinstance(old, bool):
            lines.append(f"{option} (saved: off)" if value else f"no {option} (saved: on)")
        else:
            lines.append(f"{option} {_shown(value)} (saved: {_shown(old)})")
    return lines


def _same(name: str, value: Any, old: Any) -> bool:
    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return v

    if name == "checkpoint" and value and old:
        return Path(value).resolve() == Path(old).resolve()
    return norm(value) == norm(old)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(v.get("name", str(v)) if isinstance(v, dict) else str(v) for v in value) or "none"
    return str(value)


@dataclass(frozen=True)
class PlannedRun:
    run_id: int
    variant: str  # the variant loaded, or the A/A arm (aa-1, aa-2) for source "aa"
    warmup: bool
    order: int | None  # 1-based index among the measured runs of this variant
    source: str = "load"  # load: the A/B benchmark; aa: the A/A noise-floor benchmark


def plan_runs(
    warmup: int, runs: int, order: str = "alternate", seed: int = 0, first_id: int = 0,
    variants: tuple[str, ...] = VARIANTS, source: str = "load",
) -> list[PlannedRun]:
    """Warm-ups of each variant first (A, B, A, B...), then the measured runs in ``order``.

    With two variants ``alternate`` is ABAB..., ``abba`` repeats ABBA (cancels a linear drift),
    ``shuffle`` is a seeded random permutation of the same multiset, ``blocked`` is AA...BB...
    With three or more, ``alternate`` rotates the round (ABC BCA CAB ...: each variant takes each
    position equally often when ``runs`` is a multiple of their number) and ``abba`` reverses
    every other round (ABC CBA ...). Run ids start at ``first_id`` (serve-ab numbers its runs after
    those already in a shared results directory).
    """
    if order not in ORDERS:
        raise PlanError(f"--order must be one of {ORDERS}, not {order!r}")
    if warmup < 0 or runs < 1:
        raise PlanError("--warmup must be >= 0 and --runs >= 1")
    variants = tuple(variants)
    if len(variants) < 2 or len(set(variants)) != len(variants):
        raise PlanError(f"a plan needs two or more different variants, not {variants}")
    n = len(variants)
    if order == "alternate":
        rounds = [variants if n == 2 else variants[r % n:] + variants[:r % n] for r in range(runs)]
        sequence = [v for round_ in rounds for v in round_]
    elif order == "abba":
        sequence = [v for r in range(runs) for v in (variants if r % 2 == 0 else variants[::-1])]
    else:
        sequence = [v for v in variants for _ in range(runs)]
        if order == "shuffle":
            random.Random(seed).shuffle(sequence)
    plan = [PlannedRun(first_id + i, v, True, None, source) for i, v in enumerate(list(variants) * warmup)]
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

    The directory's writer lock is held throughout: a second writer is refused, not interleaved.
    On ``resume``, rows the integrity check rejects (torn, duplicated, off the plan) are moved to
    runs.rejected.csv first, and their runs are run again.
    """
    out = Path(out)
    with writer_lock(out):
        return _run_benchmark(spec, out, snapshot, resume, progress, on_start)


def _run_benchmark(spec: BenchmarkSpec, out: Path, snapshot: Snapshot | None, resume: bool, progress: bool,
                   on_start: Callable[[PlannedRun, int], None] | None) -> Path:
    from .worker import WorkerFailed, run_isolated, start_forkserver

    plan = spec.plan()
    metadata = _start(spec, out, plan, snapshot, resume)
    done: set[int] = set()
    if resume:
        check = check_results(out)
        moved = set_aside_rejected(check)
        if moved:
            metadata.setdefault("repairs", []).append(
                {"at": now_iso(), "rows": moved, "file": REJECTED_FILE, "why": list(check.rejected_because)})
        frame = check.frame
        done = set(frame[frame["source"].isin(["load", "aa"])]["run_id"].astype(int))
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
        conflicts = spec_conflicts(BenchmarkSpec.from_metadata(metadata), asdict(spec))
        if conflicts:
            raise ResultsError(f"--resume: {out / METADATA_FILE} was made with another spec: {', '.join(conflicts)}")
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
    from .progress import progress_bar  # a widget in JupyterLab, a few whole lines in logs and saved notebooks

    return progress_bar(total=total, initial=initial, desc="A/B runs", unit="run", enabled=enabled,
                        bar_format="{desc}: {n}/{total} |{bar}| {elapsed} elapsed, {remaining} left{postfix}")


# --------------------------------------------------------------------------- CLI


def default_out_dir(args: Any) -> Path:
    label = "model" if args.model else ("checkpoint" if args.checkpoint else f"synthetic-{args.size}")
    return Path("results") / f"reproduce-{label}-{time.strftime('%Y%m%d-%H%M%S')}"


def reproduce(
    snapshot: Snapshot,
    out: str | os.PathLike[str],
    layout: str = "vllm-omni",
    device: str = "auto",
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
    variants: tuple[str, ...] | list[str] = VARIANTS,
    custom_variants: tuple[Variant, ...] | list[Variant] = (),
    threads: int | None = 1,
) -> Path:
    """The main job: the A/B benchmark, optional profiles and startup runs, then report.md and plots.

    This is what ``omni-loader reproduce`` and notebook 01 call. Returns the results directory.
    ``in_process=True`` is short for ``workers="in-process"``. ``variants`` names the arms (two or
    more; built-ins or the names of ``custom_variants``); the first is the one the others are
    compared with.
    """
    from .devices import resolve_device

    device = str(resolve_device(device))  # 'auto' is resolved once: the results record the device used
    chosen = check_variants(variants, custom_variants, device)
    spec = BenchmarkSpec(checkpoint=str(snapshot.root), layout=layout, device=device, dtype=dtype,
                         construct=construct, warmup=warmup, runs=runs, order=order, seed=seed,
                         workers="in-process" if in_process else workers, worker_timeout=worker_timeout, aa=aa,
                         reference_copy=reference_copy, threads=threads, variants=tuple(v.name for v in chosen),
                         custom_variants=tuple(v.to_dict() for v in chosen if v.name not in BUILTIN_VARIANTS))
    with writer_lock(out):  # one writer for the whole job: benchmark, profiles, startup runs, report
        return _reproduce_locked(spec, snapshot, out, resume, progress, profile, with_startup)


def _reproduce_locked(spec: BenchmarkSpec, snapshot: Snapshot, out: str | os.PathLike[str], resume: bool,
                      progress: bool, profile: bool, with_startup: bool) -> Path:
    from .report import write_report

    layout, device, warmup, runs = spec.layout, spec.device, spec.warmup, spec.runs
    out = run_benchmark(spec, out, snapshot=snapshot, resume=resume, progress=progress)
    if profile:
        from .profiling import profile_variants

        profile_variants(snapshot, ("baseline", "optimized"), ("cprofile", "py-spy", "torch"), out / "profiles",
                         layout=layout, device=device)
    startup = read_metadata(out).get("serve_ab")
    if with_startup and startup and startup.get("status") != "complete":
        from .serve_ab import resume_serve_ab

        resume_serve_ab(out)  # its saved commands (and ports): the missing startup runs only
    elif with_startup and not startup:
        from .server import serve_ab, stage_server_commands

        base_cmd, opt_cmd, url = stage_server_commands(str(snapshot.root), layout=layout, device=device)
        serve_ab(base_cmd, opt_cmd, url, out, warmup=warmup, runs=runs)
    write_report(out)
    return out


def check_variants(names: tuple[str, ...] | list[str], custom: tuple[Variant, ...] | list[Variant],
                   device: str) -> list[Variant]:
    """The variants of a benchmark, checked before any run: known names, steps that import here, and
    no GPU-only variant on a CPU (one line each)."""
    chosen = resolve_variants(list(names), list(custom))
    for v in chosen:
        for step in STEPS:
            v.step(step)
        if v.needs_gpu and not device.startswith("cuda"):
            raise OmniLoaderError(f"--variants: {v.name} needs a GPU (--device cuda); this machine's run is on "
                                  f"{device}")
    return chosen


# reproduce's options that set a spec field (argparse dest -> BenchmarkSpec field), and those that pick the checkpoint.
SPEC_DESTS = {"layout": "layout", "device": "device", "dtype": "dtype", "construct": "construct",
              "warmup": "warmup", "runs": "runs", "order": "order", "order_seed": "seed", "workers": "workers",
              "worker_timeout": "worker_timeout", "aa": "aa", "reference_copy": "reference_copy",
              "variants": "variants", "variant": "custom_variants", "threads": "threads"}
CHECKPOINT_DESTS = ("checkpoint", "model", "size", "seed", "hf_cache", "download")


def resume_spec(args: Any, out: Path) -> tuple[BenchmarkSpec, Snapshot]:
    """``--resume --out DIR``: the spec and snapshot saved in DIR; options given that contradict them are refused.

    Options the user did not type are taken from metadata.json; those typed must agree with it.
    The refusal is one line naming each differing option: ``--runs 6 (saved: 5)``.
    """
    from .checkpoint import open_snapshot
    from .cli import given_options
    from .devices import resolve_device

    if not (out / METADATA_FILE).is_file():
        raise ResultsError(f"--resume: {out} has no {METADATA_FILE}, nothing to continue (drop --resume to start "
                           "a benchmark there)")
    metadata = read_metadata(out)
    saved = BenchmarkSpec.from_metadata(metadata)
    given = given_options(args)
    values = {field: getattr(args, dest) for dest, field in SPEC_DESTS.items()
              if dest in given and hasattr(saved, field)}
    if "device" in values:
        values["device"] = str(resolve_device(values["device"]))
    if "custom_variants" in values:
        values["custom_variants"] = tuple(v.to_dict() for v in values["custom_variants"])
    conflicts = spec_conflicts(saved, values)
    picked = [d for d in CHECKPOINT_DESTS if d in given]
    if picked and not _same("checkpoint", str(_checkpoint_dir(args)), saved.checkpoint):
        typed = " ".join(f"--{d.replace('_', '-')}" + ("" if getattr(args, d) is True else f" {getattr(args, d)}")
                         for d in picked)
        conflicts.insert(0, f"{typed} (saved: {saved.checkpoint})")
    if conflicts:
        raise ResultsError(f"--resume --out {out}: options that contradict the saved benchmark: {', '.join(conflicts)};"
                           f" drop them (the spec comes from {METADATA_FILE}) or choose another --out")
    described = metadata.get("checkpoint") or {}
    snapshot = open_snapshot(saved.checkpoint, source=described.get("checkpoint_source") or "directory",
                             model_id=described.get("model_id"))
    return saved, snapshot


def _checkpoint_dir(args: Any) -> Path:
    """The snapshot directory the checkpoint options select, found without making or downloading anything."""
    from .checkpoint import default_cache_dir, find_in_hub_cache

    if args.checkpoint:
        return Path(args.checkpoint)
    if args.model:
        return find_in_hub_cache(args.model, cache_dir=args.hf_cache, download=False).root
    return default_cache_dir() / "synthetic" / f"{args.size}-seed{args.seed}"


def spec_kwargs(spec: BenchmarkSpec) -> dict[str, Any]:
    """:func:`reproduce`'s keyword arguments that make ``spec`` again."""
    from .variants import variant_from

    return dict(layout=spec.layout, device=spec.device, dtype=spec.dtype, warmup=spec.warmup, runs=spec.runs,
                order=spec.order, seed=spec.seed, workers=spec.workers, worker_timeout=spec.worker_timeout,
                construct=spec.construct, aa=spec.aa, reference_copy=spec.reference_copy, threads=spec.threads,
                variants=spec.variants,
                custom_variants=[variant_from(v) for v in spec.custom_variants])


def cmd_reproduce(args: Any) -> int:
    from .cli import snapshot_from_args
    from .devices import device_banner
    from .report import REPORT_FILE

    if args.resume and not args.out:
        raise ResultsError("--resume needs --out DIR (the results directory to continue)")
    out = Path(args.out) if args.out else default_out_dir(args)
    if args.resume:  # the spec comes from DIR/metadata.json; options given must agree with it
        spec, snapshot = resume_spec(args, out)
        chosen = spec_kwargs(spec)
    else:
        print(device_banner(args.device))  # resolves --device (auto: the GPU torch sees): fails fast, before a
        # multi-GB snapshot is made, and says which device the run will use
        snapshot = snapshot_from_args(args)
        chosen = dict(layout=args.layout, device=args.device, dtype=args.dtype, warmup=args.warmup, runs=args.runs,
                      order=args.order, seed=args.order_seed, workers=args.workers,
                      worker_timeout=args.worker_timeout, construct=args.construct, aa=args.aa,
                      reference_copy=args.reference_copy, variants=args.variants, custom_variants=args.variant,
                      threads=args.threads or None)
    print(f"results: {out}")
    try:
        reproduce(snapshot, out, resume=args.resume, profile=args.profile, with_startup=args.with_startup, **chosen)
    except KeyboardInterrupt:
        try:
            frame = check_results(out).frame
            n = frame[frame["source"].isin(["load", "aa"])]["run_id"].nunique()
        except ResultsError:
            n = 0
        print(f"interrupted: {n} run(s) saved in {out}; continue with: {resume_command(out, {})}")
        return 130
    report = out / REPORT_FILE
    print(report.read_text())
    print(f"report: {report}")
    return 0 if equivalent(out) else 1


def equivalent(out: Path) -> bool:
    """Did every variant load the same tensors? If not, say so on stderr: the timings compare different loads."""
    import sys

    from .report import planned_arms
    from .stats import equivalence

    equiv = equivalence(check_results(out).frame, planned_arms(read_metadata(out)))
    if not equiv["equivalent"]:
        print(f"omni-loader: error: {out}: {equiv['statement']}", file=sys.stderr)
    return bool(equiv["equivalent"])


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
    p.add_argument("--variants", type=lambda text: tuple(v.strip() for v in text.split(",") if v.strip()),
                   default=VARIANTS, metavar="A,B[,C...]",
                   help=f"the arms, compared with the first (default {','.join(VARIANTS)}; built-ins: "
                        f"{', '.join(BUILTIN_VARIANTS)}, or names given with --variant)")
    p.add_argument("--variant", type=parse_variant, action="append", default=[], metavar="NAME=STEP:REF[,STEP:REF]",
                   help="define a variant with your own step(s): STEP is discovery or parameters, REF is "
                        "module:function or file.py:function, imported in each worker (repeatable)")
    p.add_argument("--aa", action="store_true",
                   help=f"also run an A/A benchmark ({AA_VARIANT} in both arms) for this machine's noise floor")
    p.add_argument("--reference-copy", action="store_true",
                   help="also time a plain strict load_state_dict of the same tensors after each load (a yardstick)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch intra-op threads per load (default 1: a busy neighbour core cannot stall a copy's "
                        "thread barrier; 0: torch's default)")
    p.add_argument("--out", metavar="DIR", help="results directory (default results/reproduce-<...>-<time>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted results directory (--out)")
    p.add_argument("--profile", action="store_true", help="also profile one load per variant into DIR/profiles")
    p.add_argument("--with-startup", action="store_true", help="also measure startup to /health of a stage server")
    p.set_defaults(func=cmd_reproduce)
