"""The A/B benchmark: warm-ups, then alternating measured runs, each appended to disk as it ends.

By default every run is a process forked from a fork server that has imported torch and the
model code once (see :mod:`omni_loader.bench.worker`): each load starts with no model built and no
device touched, as a server restart does, and a crash takes down one run, not the benchmark.
``workers="spawn"`` starts a new interpreter per run (imports included), ``"in-process"`` loads
in this interpreter (notebooks, debugging).

``aa=True`` adds an A/A benchmark after the A/B one: the optimized variant in both arms, planned
the same way. Its two arms differ only by chance, so the difference between them is the smallest
change this machine can resolve for each phase: the noise floor the report quotes beside each
A/B difference.

What is measured is one :class:`~omni_loader.results.spec.BenchmarkSpec`; the benchmark is the ``load``
member of the results directory's suite (:mod:`omni_loader.results.suite`), and ``--with-startup`` adds
serve-ab's ``startup`` member beside it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import OmniLoaderError, ResultsError
from ..formatting import number
from .driver import continuing, drive
from ..host.machine import Activity
from ..results.metadata import now_iso
from ..names import VARIANTS
from ..token2wav.options import LoadOptions
from ..results.planner import PlannedRun
from ..results.lifecycle import Recording
from ..results.rows import failed_row, rows_for_run
from .phase_watch import PhaseWatch
from ..results.spec import BenchmarkSpec, spec_conflicts
from ..host.checkpoint_cache import CACHE_KEY, recorded_run, storage_throughput
from ..results.suite import METADATA_FILE, Record

if TYPE_CHECKING:
    from ..token2wav.checkpoint import Snapshot
    from ..token2wav.variants import Variant

__all__ = ["MEMBER", "benchmark_spec", "check_variants", "run_benchmark"]
MEMBER = "load"  # this benchmark's name in the results directory's suite


def run_benchmark(
    spec: BenchmarkSpec,
    out: str | os.PathLike[str],
    snapshot: Snapshot | None = None,
    resume: bool = False,
    progress: bool = True,
    on_start: Callable[[PlannedRun, int], None] | None = None,
    look: Callable[[Path, int, float], tuple[bool, str]] | None = None,
) -> Path:
    """Run (or continue) the benchmark into ``out``; returns the results directory.

    ``on_start(run, pid)`` is called as each run's worker process starts. ``look(out, n, alpha)`` reads the
    verdicts after ``n`` runs a side at a sequential design's early look (``spec.looks``) and says whether
    they are settled and why; the benchmark then stops there, its plan cut to the runs made (the report
    module's :func:`~omni_loader.reporting.sequential.look_at`: the runner cannot import the report).

    A run that fails is recorded with status ``failed`` and the benchmark goes on. An interrupt
    (Ctrl-C) stops the current worker (and the fork server, so that nothing is left behind); every
    finished run is already on disk, and the record says ``interrupted`` so that ``--resume`` can
    pick up the missing runs.

    The writer lock, the record and ``resume`` are :func:`~omni_loader.bench.driver.continuing`'s: a second writer
    is refused, rows the integrity check rejects (torn, duplicated, off the plan) are set aside and run again.
    """
    out, plan = Path(out), spec.plan()
    with continuing(out, MEMBER, resume, lambda: started_record(spec, out, plan, snapshot),
                    lambda saved: spec_conflicts(BenchmarkSpec.from_metadata(saved.suite), spec.flat()),
                    f"--resume: {out / METADATA_FILE} was made with another spec") as (rec, done):
        if (rec.record.get("sequential") or {}).get("stopped_at"):  # it stopped at a look: its plan is the runs made
            plan = [r for r in plan if r.run_id in {e["run_id"] for e in rec.record.plan}]
        activity = Activity.start()  # what else the machine did meanwhile: the report warns when it was busy
        try:
            _run_all(spec, rec, plan, done, progress, on_start, look)
        except KeyboardInterrupt:
            if spec.workers == "forkserver":
                from .worker import stop_forkserver

                stop_forkserver()
            raise
        finally:
            rec.update(activity=activity.finish())
    return out


def _run_all(spec: BenchmarkSpec, rec: Recording, plan: list[PlannedRun], done: frozenset[int], progress: bool,
             on_start: Callable[[PlannedRun, int], None] | None,
             look: Callable[[Path, int, float], tuple[bool, str]] | None = None) -> None:
    """Drive the runs not ``done``, appending each run's rows (or its failure) the moment it ends; stop at a look
    that settles."""
    from ..progress import Redrawer, progress_bar, rate_from_now  # a widget in Lab, whole lines in logs and notebooks
    from .worker import LoadRequest, WorkerFailed, run_isolated, start_forkserver

    todo = [r for r in plan if r.run_id not in done]
    looks = Looks(spec, plan, {r.run_id for r in plan} & done, look)
    # the bar counts to the first look (its time left too), from its first line; more if that look does not settle
    bar = progress_bar(total=len(looks.needed(looks.pending[0])) if looks.pending else len(plan),
                       initial=len(plan) - len(todo), unit="run", enabled=progress,
                       desc="A/B runs, cold" if spec.load.cache == "cold" else "A/B runs")  # 01 runs both kinds
    redrawer = Redrawer(bar)  # its clock moves through the set-up below (01's stood 12 s at "starting the worker")
    watch, shared = Timeout(spec.worker_timeout), SharedFailure(set(spec.variants))

    def arm(run: PlannedRun) -> tuple[str, float, Any]:  # when it began, its clock, its result or failure's words
        label = f"run {run.run_id + 1}/{bar.total} {run.variant}{' (warm-up)' if run.warmup else ''}"
        started, began = time.perf_counter(), now_iso(precise=True)
        try:
            # no "(limit 1,800 s)" beside it: a new user cannot act on the limit until it is hit, and then
            # the run's failure names it (Timeout.explain) and the option that sets it
            with PhaseWatch(bar, label, "", (lambda pid: on_start(run, pid)) if on_start else None) as phases:
                return began, started, run_isolated(LoadRequest.of(spec, run), spec.workers, watch.seconds,
                                                    on_start=phases.started)
        except WorkerFailed as exc:
            return began, started, watch.explain(str(exc))

    def save(run: PlannedRun, ran: tuple[str, float, Any]) -> None:
        began, started, result = ran
        if isinstance(result, str):  # a failure: every run so far failing the same way stops the benchmark
            rec.ran([failed_row(run, result, time.perf_counter() - started, began, now_iso(precise=True))])
            shared.failed(run.variant, result)
        else:
            rec.ran(rows_for_run(run, result, started=began, ended=now_iso(precise=True)))
            rec.update(**{CACHE_KEY: recorded_run(_cache_record(rec), run.run_id, run.warmup, result)})
            if run.warmup:
                watch.saw_warmup(time.perf_counter() - started)
            shared.ok()
        if run.warmup:  # a warm-up pays one-off costs (the first reads, the first fork): it prices no run
            rate_from_now(bar, forget=True)  # 01's bar said "02:57 left" after one with 39 s left
            bar.initial = bar.n + 1
        bar.update(1)

    try:
        if looks.read_ready(rec, bar):  # a look whose runs all ended before an interrupt (during the look itself):
            return  # read before any new run, which a look that settles would leave off its plan
        if todo and "storage" not in _cache_record(rec):  # first: the fork server may still be importing
            bar.set_postfix_str("reading one checkpoint file once: the storage's read throughput")
            rec.update(**{CACHE_KEY: {**_cache_record(rec), "storage": _storage_throughput(spec)}})
        if spec.workers == "forkserver" and todo:
            bar.set_postfix_str("starting the worker server (imports torch and the model code once)")
            start_forkserver()
        rate_from_now(bar)  # the time left is the runs' own, not the set-up's above
        saved = drive(rec.out, plan, arm, save, done=done, after=lambda run, _: looks.after(run, rec, bar),
                      resume=["omni-loader", "reproduce", "--resume", "--out", str(rec.out)])
        if todo and saved == len(plan):  # no look stopped it: not "run 12/12 baseline: digest" for the report's time
            bar.set_postfix_str(f"all {len(plan)} runs done")
    finally:
        redrawer.close()
        bar.close()


class Looks:
    """A sequential design's early looks (``spec.looks``; :func:`~omni_loader.results.planner.looks`), read
    once each, as soon as every run they need has ended (in any order: a resumed benchmark reaches them too).

    A look that settles stops the benchmark: the record's plan becomes the runs made and ``sequential`` says
    where and why; a design that ran to its end records why no early look stopped it.
    """

    def __init__(self, spec: BenchmarkSpec, plan: list[PlannedRun], done: set[int],
                 look: Callable[[Path, int, float], tuple[bool, str]] | None) -> None:
        from ..results.planner import LOOK_ALPHAS

        self.spec, self.plan, self.done, self.look = spec, plan, set(done), look
        self.pending = list(spec.looks[:-1]) if look is not None else []
        self.record: dict[str, Any] = {"looks": list(spec.looks), "alphas": list(LOOK_ALPHAS), "stopped_at": None,
                                       "seen": []} if len(spec.looks) > 1 and look is not None else {}

    def needed(self, n: int) -> list[PlannedRun]:
        """The runs a look after ``n`` runs a side reads: the warm-ups and each arm's first ``n``."""
        return [r for r in self.plan if r.source == "load" and (r.warmup or (r.order or 0) <= n)]

    def after(self, run: PlannedRun, rec: Recording, bar: Any) -> bool:
        """Note ``run`` ended; read every look it completes; True when one settled (stop)."""
        self.done.add(run.run_id)
        return self.read_ready(rec, bar)

    def read_ready(self, rec: Recording, bar: Any) -> bool:
        """Read every pending look whose runs have all ended; True when one settled (stop)."""
        from ..results.planner import look_alpha

        while self.pending and {r.run_id for r in self.needed(self.pending[0])} <= self.done:
            n = self.pending.pop(0)
            bar.set_postfix_str(f"reading the verdicts after {n} runs a side (sequential design)")
            settled, why = self.look(rec.out, n, look_alpha(self.spec.looks, n))
            self.record["seen"].append({"n": n, "settled": settled, "why": why})
            if not settled:
                bar.total = len(self.plan)
                continue
            kept = self.needed(n)
            self.record["stopped_at"] = n
            rec.update(plan=[r.to_dict() for r in kept], sequential=self.record)
            bar.total = len(kept)
            bar.set_postfix_str(f"settled after {n} runs a side: stopping ({len(self.plan) - len(kept)} runs not needed)")
            return True
        if self.record:
            rec.update(sequential=self.record)
        return False


def _cache_record(rec: Recording) -> dict[str, Any]:
    """The record's page-cache field as it stands (this session's updates over the saved one)."""
    return dict(rec.fields.get(CACHE_KEY) or rec.record.get(CACHE_KEY) or {})


def _storage_throughput(spec: BenchmarkSpec) -> dict[str, Any]:
    """The storage's read throughput, once per benchmark (:func:`~omni_loader.host.checkpoint_cache.storage_throughput`)."""
    from ..token2wav.checkpoint import open_snapshot

    return {**storage_throughput(open_snapshot(spec.checkpoint)), "measured_at": now_iso(precise=True)}


class SharedFailure:
    """Stops a benchmark whose every run so far, of every variant, failed with one and the same error.

    Why: such an error is the runs' common ground (a checkpoint of the wrong shape, a device that is not
    there), not one run's bad luck, so every run left would fail the same way; running them all (the
    whole plan, minutes or hours) and ending "NOT equivalent: no successful run" hid the reason in a
    table. One run that succeeds, or two different errors, and the benchmark goes on.
    """

    def __init__(self, variants: set[str]) -> None:
        self.variants, self.seen, self.errors, self.succeeded = variants, set(), set(), False

    def ok(self) -> None:
        self.succeeded = True

    def failed(self, variant: str, error: str) -> None:
        if error.startswith("worker killed"):  # a timeout or a signal: this run's fate, not the runs' common ground
            return
        self.seen.add(variant)
        self.errors.add(error)
        if not self.succeeded and self.seen >= self.variants and len(self.errors) == 1:
            raise OmniLoaderError(f"stopped: every run so far ({', '.join(sorted(self.seen))}) failed with the same "
                                  f"error, which the runs left would share: {error}; fix its cause and continue "
                                  "with --resume")


class Timeout:
    """How long a run may take: ``--worker-timeout`` when given, else a default no hung step can outwait.

    Why a default: without one, a step that hangs stalled a benchmark silently (57 s seen before a
    Ctrl-C). Until a warm-up has finished, the default is :data:`FIRST_RUN_LIMIT`; after, it is
    :data:`SLOWER_THAN_WARMUP` times the slowest warm-up (at least :data:`SHORTEST_DEFAULT`): a
    measured load of the same code never takes ten times its warm-up, a hung one always does.
    """

    def __init__(self, given: float | None) -> None:
        self.given, self.slowest_warmup = given, 0.0

    @property
    def seconds(self) -> float:
        if self.given is not None:
            return self.given
        if not self.slowest_warmup:
            return FIRST_RUN_LIMIT
        return max(SHORTEST_DEFAULT, SLOWER_THAN_WARMUP * self.slowest_warmup)

    def saw_warmup(self, seconds: float) -> None:
        self.slowest_warmup = max(self.slowest_warmup, seconds)

    def explain(self, error: str) -> str:
        if self.given is None and error.startswith("worker killed after --worker-timeout"):
            how = (f"{SLOWER_THAN_WARMUP:g}× the slowest warm-up" if self.slowest_warmup
                   else "the limit for a run before any warm-up finished")
            return f"worker killed after {number(self.seconds)} s (the default: {how}; set --worker-timeout)"
        return error


FIRST_RUN_LIMIT = 1800.0  # seconds: a first load of a real checkpoint from a cold disk is minutes at worst
SLOWER_THAN_WARMUP = 10.0
SHORTEST_DEFAULT = 120.0


def started_record(spec: BenchmarkSpec, out: Path, plan: list[PlannedRun], snapshot: Snapshot | None) -> Record:
    """The record of a new benchmark; refused when ``out`` already holds one."""
    if (out / METADATA_FILE).exists():
        raise ResultsError(f"results directory already used: {out} (pass --resume to continue it, or another --out)")
    synthetic = " (synthetic weights)" if snapshot and snapshot.synthetic else ""
    return Record.start(
        "reproduce", spec, plan, spec.load.device, warmup=spec.warmup, repeats=spec.runs, order=spec.order,
        model=(snapshot.model_id if snapshot and snapshot.model_id else f"Qwen/Qwen2.5-Omni-3B Token2Wav{synthetic}"),
        checkpoint=snapshot.describe() if snapshot else {"checkpoint_dir": spec.checkpoint},
        construct=spec.load.construct, workers=spec.workers)


# --------------------------------------------------------------------------- a new benchmark's spec


def benchmark_spec(snapshot: Snapshot, options: LoadOptions | None = None, *,
                   variants: tuple[str, ...] | list[str] = VARIANTS,
                   custom_variants: tuple[Variant, ...] | list[Variant] = (), cpus: str | tuple[int, ...] = "auto",
                   **settings: Any) -> BenchmarkSpec:
    """The spec of a new benchmark of ``snapshot``: ``options`` resolved once (``auto`` becomes the device
    used), the arms ``variants`` (built-ins or names of ``custom_variants``, whose steps the spec keeps),
    ``cpus`` as ``--cpus`` takes it (``auto``, ``any``, ``"0,2"``) or CPU numbers, ``settings`` the other
    :class:`BenchmarkSpec` fields (``warmup``, ``runs``, ``order``, ``workers``...)."""
    from ..host.placement import resolve_cpus
    from ..token2wav.variants import BUILTIN_VARIANTS, resolve_variants

    chosen = resolve_variants(list(variants), list(custom_variants))
    pinned = resolve_cpus(cpus, settings.get("threads", 1)) if isinstance(cpus, str) else tuple(cpus)
    return BenchmarkSpec(checkpoint=str(snapshot.root), load=(options or LoadOptions()).resolved(),
                         variants=tuple(v.name for v in chosen),
                         custom_variants=tuple(v.to_dict() for v in chosen if v.name not in BUILTIN_VARIANTS or v.release),
                         cpus=pinned, **settings)


def check_variants(names: tuple[str, ...] | list[str], custom: tuple[Variant, ...] | list[Variant],
                   device: str, timeout: float | None = None) -> list[Variant]:
    """The variants of a benchmark, checked before any run: known names, steps that import (a user's in a
    child process, :func:`probe_user_steps`), and no GPU-only variant on a CPU (one line each)."""
    from ..token2wav.variants import STEPS, refuse_off_gpu, resolve_variants

    chosen = resolve_variants(list(names), list(custom))
    for v in chosen:
        for step in STEPS:
            if getattr(v, step).startswith("builtin:"):
                v.step(step)  # the kit's own: known to import, and quickly
        refuse_off_gpu(v, device, "the benchmark")
    probe_user_steps(chosen, timeout)
    return chosen


STEP_IMPORT_LIMIT = 120.0  # seconds a user's step may take to import when no --worker-timeout is given


def probe_user_steps(chosen: list[Variant], timeout: float | None = None) -> None:
    """Import the user's steps once in a child process, where a limit applies, before any run.

    Why not here: a step file runs its own code at import, and code that hangs or calls ``os._exit``
    would hang or end the benchmark itself (no timeout reaches the main process, and the exit would
    come with no word). In a child, a hang is killed after ``timeout`` (``--worker-timeout``, else
    :data:`STEP_IMPORT_LIMIT`) and an exit is named; each is one line naming the variant and the step.
    """
    import subprocess
    import sys

    from ..host.procs import stop_group
    from ..token2wav.variants import STEPS

    refs = [(v.name, step, getattr(v, step)) for v in chosen for step in STEPS
            if not getattr(v, step).startswith("builtin:")]
    if not refs:
        return
    code = ("import sys\nfrom omni_loader.errors import OmniLoaderError\nfrom omni_loader.token2wav.variants import "
            "resolve_step\nfor i, (which, ref) in enumerate(%r):\n    print(i, flush=True)\n    try:\n"
            "        resolve_step(ref, which)\n    except OmniLoaderError as exc:\n"
            "        print(exc, file=sys.stderr)\n        sys.exit(2)\n" % [(w, r) for _, w, r in refs])
    limit = timeout or STEP_IMPORT_LIMIT
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=limit)
    except BaseException as exc:
        stop_group(proc.pid, grace=0, leader=proc)
        out, err = proc.communicate()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        name, which, ref = refs[int(out.split()[-1]) if out.split() else 0]
        raise OmniLoaderError(f"--variant {name}: importing its {which} step {ref} did not finish in {limit:g} s (a "
                              "step file that hangs at import?); set --worker-timeout to allow longer") from None
    if proc.returncode:
        name, which, ref = refs[int(out.split()[-1]) if out.split() else 0]
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        reason = lines[-1] if lines else (f"the process ended with status {proc.returncode} and no word (os._exit or a "
                                          "crash at import?)")
        raise OmniLoaderError(f"--variant {name}: its {which} step {ref} cannot be imported: {reason}")
