"""serve-ab: time two server commands from spawn to their first HTTP 200 on ``/health``, alternating.

The PR's "Startup to /health" measurement, made repeatable: each run's rows are appended at once, so an
interrupted benchmark keeps every run it finished. Library use::

    cmd_a, cmd_b, url = stage_server_commands(snapshot_dir)
    serve_ab(cmd_a, cmd_b, url, out="results/startup", warmup=1, runs=5)
"""

from __future__ import annotations

import math
import os
import re
import shlex
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError, ResultsError
from ..formatting import duration, time_unit
from ..bench.driver import continuing, drive
from ..results.integrity import Results, Resumption, check_results
from ..host.procs import ChildGuard
from .logfigures import DEFAULT_PATTERNS, compile_patterns
from ..names import VARIANTS
from ..results.planner import ORDERS, PlannedRun, plan_runs
from ..results.rows import RUNS_FILE, read_runs
from .one_run import PHASE, SOURCE, Command, RunOutcome, health_address, run_one, split_command
from ..results.suite import METADATA_FILE, Record, Suite
from ..token2wav.options import flag, option, option_conflicts, option_fields

__all__ = ["StartupSpec", "resume_serve_ab", "run_serve_ab", "saved_serve_ab", "serve_ab", "serve_ab_conflicts",
           "summarize"]
MEMBER = "startup"  # this benchmark's name in the results directory's suite
MEASURE = "perf_counter from just before spawn to the first HTTP 200 on health_url"
# a refused connection while a server starts is no error and must not read as one on the bar
WAIT_WORDS = {"connection refused": "not listening yet", "HTTP 503": "HTTP 503: not ready yet"}
Progress = bool | Callable[[str], None] | None


@dataclass(frozen=True)
class StartupSpec:
    """What serve-ab measures; its fields are the spec's keys in metadata.json (plus ``measure``)."""

    baseline_cmd: str = option(help="server command of the baseline (no shell; required unless --resume)")
    optimized_cmd: str = option(help="server command of the optimized version (idem)")
    health_url: str = option(help="e.g. http://127.0.0.1:8091/health (idem)")
    warmup: int = option(1, help="warm-up runs of each variant first (default 1)")
    runs: int = option(5, help="measured runs of each variant (default 5)")
    order: str = option("alternate", choices=ORDERS, help="measured-run order (default alternate)")
    timeout_s: float = option(600.0, flag="--timeout",
                              help="a run fails when /health has not answered 200 after S seconds (default 600)")
    grace_s: float = option(10.0, flag="--grace",
                            help="seconds between SIGTERM and SIGKILL when stopping a server (default 10)")
    poll_interval_s: float = option(0.05, flag="--poll-interval", help="health poll period (default 0.05)")
    port_wait_s: float = option(10.0, flag="--port-wait",
                                help="how long to wait for the health port to be free before a launch (default 10)")
    patterns: Mapping[str, str] = option(default_factory=lambda: dict(DEFAULT_PATTERNS), flag="--log-pattern",
                                         help="extract a figure from each run's log (first group; unit read after "
                                              f"it); repeatable; defaults: {', '.join(DEFAULT_PATTERNS)}")

    def __post_init__(self) -> None:
        for key, flag_name in (("baseline_cmd", "--baseline-cmd"), ("optimized_cmd", "--optimized-cmd")):
            object.__setattr__(self, key, shlex.join(split_command(getattr(self, key), flag_name)))
        health_address(self.health_url)
        for name, f in option_fields(StartupSpec).items():  # every seconds field: a finite number, 0 or more
            value = getattr(self, name)
            if isinstance(f.default, float) and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                                     and math.isfinite(value) and value >= 0):
                raise OmniLoaderError(f"serve-ab {flag(f)} {value!r}: must be a finite number of seconds, 0 or more")
        if self.timeout_s <= 0 or self.poll_interval_s <= 0:
            raise OmniLoaderError("serve-ab needs --timeout > 0, --grace >= 0 and a positive poll interval")
        patterns = {k: (v.pattern if isinstance(v, re.Pattern) else v) for k, v in self.patterns.items()}
        compile_patterns(patterns)
        object.__setattr__(self, "patterns", patterns)

    def command(self, variant: str) -> list[str]:
        return shlex.split(self.baseline_cmd if variant == "baseline" else self.optimized_cmd)

    def plan(self, first_id: int = 0) -> list[PlannedRun]:
        return plan_runs(self.warmup, self.runs, self.order, first_id=first_id, source=SOURCE)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "patterns": dict(self.patterns), "measure": MEASURE}

    @classmethod
    def from_dict(cls, saved: Mapping[str, Any]) -> StartupSpec:
        return cls(**{f.name: saved[f.name] for f in fields(cls) if f.name in saved})


def serve_ab_conflicts(saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """One phrase per spec key of ``given`` that differs from ``saved``, named by its option: ``--runs 6 (saved: 5)``."""
    return option_conflicts(StartupSpec, saved, given)


def saved_serve_ab(out: str | os.PathLike[str] | Results) -> dict[str, Any]:
    """The startup benchmark's record of a results directory (its own, or beside a load benchmark)."""
    record = (out.suite if isinstance(out, Results) else Suite.read(out)).benchmark(MEMBER)
    if not isinstance(record, dict) or not isinstance(record.get("spec"), dict):
        raise ResultsError(f"--resume: {os.fspath(out)} holds no serve-ab benchmark to continue")
    return record


def serve_ab(baseline_cmd: Command, optimized_cmd: Command, health_url: str, out: str | os.PathLike[str],
             warmup: int = 1, runs: int = 5, timeout: float = 600.0,
             patterns: Mapping[str, str | re.Pattern[str]] | None = None, progress: Progress = True, *,
             order: str = "alternate", grace: float = 10.0, poll_interval: float = 0.05, port_wait: float = 10.0,
             device: str = "auto", model: str | None = None) -> Path:
    """Run the A/B start-up benchmark into ``out`` and return it: :func:`run_serve_ab` of the spec these make."""
    spec = StartupSpec(baseline_cmd, optimized_cmd, health_url, warmup, runs, order, timeout, grace, poll_interval,
                       port_wait, dict(DEFAULT_PATTERNS if patterns is None else patterns))
    return run_serve_ab(spec, out, progress, device=device, model=model)


def resume_serve_ab(out: str | os.PathLike[str], progress: Progress = True) -> Path:
    """Continue an interrupted serve-ab benchmark with the spec saved in ``out``: the missing runs only."""
    return run_serve_ab(StartupSpec.from_dict(saved_serve_ab(out)["spec"]), out, progress, resume=True)


def run_serve_ab(spec: StartupSpec, out: str | os.PathLike[str], progress: Progress = True, *, device: str = "auto",
                 model: str | None = None, resume: bool = False) -> Path:
    """Run (or, with ``resume``, continue) the startup benchmark ``spec`` into ``out``; returns ``out``. ``device``
    only chooses which device the environment record describes; ``model`` is recorded as given."""
    out = Path(out)
    with continuing(out, MEMBER, resume, lambda: Record.start(
            "serve-ab", spec.to_dict(), spec.plan(_first_free_id(out)), device, warmup=spec.warmup, repeats=spec.runs,
            order=spec.order, model=model), lambda saved: _conflicts(spec, saved),
            f"--resume: {out} holds a serve-ab benchmark made with another spec", _counts) as (rec, done), \
            ChildGuard(spec.grace_s) as guard:
        plan, logs = spec.plan(min((e["run_id"] for e in rec.record.plan), default=0)), out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        report = _Reporter(progress, len(plan), len(done))
        report.line(f"{len(plan)} runs ({spec.warmup} warm-up of each, then {spec.runs} of each, {spec.order}); "
                    f"health {spec.health_url}; logs in {logs}")
        compiled = compile_patterns(spec.patterns)

        def arm(run: PlannedRun) -> RunOutcome:
            report.start(run)
            return run_one(run, spec.command(run.variant), spec.health_url, logs, timeout=spec.timeout_s,
                           grace=spec.grace_s, poll_interval=spec.poll_interval_s, port_wait=spec.port_wait_s,
                           patterns=compiled, guard=guard, on_wait=report.waiting)

        def save(run: PlannedRun, outcome: RunOutcome) -> None:
            key = "runs_ok" if outcome.status == "ok" else "runs_failed"
            rec.ran(outcome.rows(), **{key: rec.fields[key] + 1})
            report.run(outcome)

        # beside a load benchmark (its run ids first) the suite is continued by reproduce
        command = ["omni-loader", "reproduce" if plan[0].run_id else "serve-ab", "--resume", "--out", str(out)]
        try:
            drive(out, plan, arm, save, done=done, resume=command)
        finally:
            report.close()
    return out


def _first_free_id(out: Path) -> int:
    """The first run id of a new startup benchmark in ``out``: after the runs of another benchmark there."""
    if (out / METADATA_FILE).is_file():
        if Suite.read(out).benchmark(MEMBER) is not None:
            raise ResultsError(f"{out} already holds a serve-ab result; choose a new --out")
        ids = read_runs(out)["run_id"].tolist()
        return max(int(i) for i in ids) + 1 if ids else 0
    if (out / RUNS_FILE).exists():
        raise ResultsError(f"{out} holds {RUNS_FILE} but no {METADATA_FILE}; choose a new --out")
    return 0


def _conflicts(spec: StartupSpec, results: Results) -> list[str]:
    """What in ``spec`` differs from the serve-ab benchmark saved in ``results``: its options, else its run plan."""
    saved = saved_serve_ab(results)
    given = spec.to_dict()
    conflicts = serve_ab_conflicts(saved["spec"], {k: given[k] for k in option_fields(StartupSpec) if k in saved["spec"]})
    first_id = min((int(r["run_id"]) for r in saved.get("plan") or []), default=0)

    def key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
        return int(entry["run_id"]), entry["variant"], bool(entry["warmup"]), entry.get("order")

    if not conflicts and [key(e) for e in saved.get("plan") or []] != [key(r.to_dict()) for r in spec.plan(first_id)]:
        conflicts = ["the run plan"]
    return conflicts


def _counts(resumed: Resumption | None) -> dict[str, int]:
    """How many of the runs already saved ended ok and how many failed: the record's running counts."""
    if resumed is None:
        return {"runs_ok": 0, "runs_failed": 0}
    frame = resumed.check.frame
    mine = frame[(frame["phase"] == PHASE) & frame["run_id"].isin(resumed.done)] if len(frame) else frame
    return {"runs_ok": int((mine["status"] == "ok").sum()), "runs_failed": int((mine["status"] != "ok").sum())}


class _Reporter:
    """Where serve-ab says how its runs go: a callable gets one line per event; ``True`` draws a progress bar
    (saying which start runs and how long it has waited for /health), a failed run's line beside it; ``False``
    is silent."""

    def __init__(self, progress: Progress, total: int, done: int) -> None:
        from ..progress import Redrawer, progress_bar

        self.say = progress if callable(progress) else None
        self.bar = None if self.say or not progress else progress_bar(total=total, initial=done, desc="startup runs",
                                                                      unit="run")
        self.redrawer = Redrawer(self.bar) if self.bar is not None else None
        self.total, self.index, self.what = total, done, ""

    def start(self, run: PlannedRun) -> None:
        self.index += 1
        # a non-breaking hyphen in "warm‑up": Lab wrapped "(warm-" over "up)"
        self.what = f"run {self.index}/{self.total} {run.variant}" + (" (warm\u2011up)" if run.warmup else "")
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.what}: starting", refresh=True)

    def waiting(self, seconds: float, last: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.what}: {seconds:.0f} s waiting for /health ({WAIT_WORDS.get(last, last)})",
                                     refresh=True)

    def line(self, text: str) -> None:
        if self.say:
            self.say(text)

    def run(self, outcome: RunOutcome) -> None:
        if self.say:
            self.say(outcome.describe())
        elif self.bar is not None:  # what ended, on the line a bar in line mode writes at this update
            ended = f"healthy after {outcome.seconds:.1f} s" if outcome.status == "ok" else outcome.status
            self.bar.set_postfix_str(f"{self.what}: {ended}", refresh=False)
            self.bar.update(1)
            if outcome.status != "ok":
                type(self.bar).write(outcome.describe(), file=self.bar.fp)

    def close(self) -> None:
        if self.redrawer is not None:
            self.redrawer.close()
        if self.bar is not None:
            self.bar.close()


def summarize(out: str | os.PathLike[str]) -> list[str]:
    """Median, min, max and n per variant for each server phase of ``out`` (measured, ok runs), one line each."""
    frame = _measured(out)
    lines = []
    phases = [PHASE] + sorted(p for p in set(frame["phase"]) if p != PHASE)
    for phase in phases:
        for variant in VARIANTS:
            vals = [v for v in frame[(frame["phase"] == phase) & (frame["variant"] == variant)]["seconds"]
                    if not math.isnan(v)]
            if vals:
                unit = time_unit(vals)
                lines.append(f"  {phase:<20} {variant:<10} median {duration(statistics.median(vals), unit):>14}   "
                             f"min {duration(min(vals), unit):>14}   max {duration(max(vals), unit):>14}   n {len(vals)}")
    return lines + timeline_summary(out, frame)


def stage_phase_samples(out: str | os.PathLike[str], frame: Any = None) -> dict[tuple[str, str], dict[str, list[float]]]:
    """``(lane, phase) -> variant -> seconds`` of each measured ok run's log read as a timeline."""
    from .timeline import read_timeline

    frame = _measured(out) if frame is None else frame
    samples: dict[tuple[str, str], dict[str, list[float]]] = {}
    runs = frame[frame["phase"] == PHASE][["run_id", "variant"]].drop_duplicates()
    for run_id, variant in runs.itertuples(index=False):
        log = Path(out) / "logs" / f"{int(run_id)}-{variant}.log"
        if not log.is_file():
            continue
        seen: dict[tuple[str, str], int] = {}
        for r in read_timeline(log).phases():
            count = seen[(r.lane, r.phase)] = seen.get((r.lane, r.phase), 0) + 1
            key = (r.lane, r.phase if count == 1 else f"{r.phase}#{count}")
            samples.setdefault(key, {}).setdefault(variant, []).append(r.seconds)
    return samples


def stage_phase_comparisons(out: str | os.PathLike[str], frame: Any = None) -> list[tuple[str, str, Any]]:
    """``(lane, phase, Comparison)`` of every stage's phase both variants timed, in lane and phase order."""
    from ..reporting.stats import Summary, compare

    out_rows = []
    for (lane, phase), per_variant in sorted(stage_phase_samples(out, frame).items()):
        a, b = (tuple(per_variant.get(v, ())) for v in VARIANTS[:2])
        if a and b:
            out_rows.append((lane, phase, compare(Summary(VARIANTS[0], phase, a), Summary(VARIANTS[1], phase, b))))
    return out_rows


def timeline_summary(out: str | os.PathLike[str], frame: Any) -> list[str]:
    """Per stage and phase, both variants' medians and the verdict; then what the startup spread lets it detect."""
    from .detectable import detectability

    by_stage = stage_phase_comparisons(out, frame)
    lines = ["  by stage and phase (each run's log read as a timeline):"] if by_stage else []
    for lane, phase, comparison in by_stage:
        unit = time_unit([*comparison.baseline.samples, *comparison.optimized.samples])
        lines.append(f"  {lane:<14} {phase:<20} {VARIANTS[0]} {duration(comparison.baseline.median, unit):>11}   "
                     f"{VARIANTS[1]} {duration(comparison.optimized.median, unit):>11}   "
                     f"{comparison.change(unit)}; {comparison.verdict()}")
    startup = [[float(x) for x in frame[(frame["phase"] == PHASE) & (frame["variant"] == v)]["seconds"]]
               for v in VARIANTS[:2]]
    if all(len(x) >= 2 for x in startup):
        lines.append(f"  {PHASE}: {detectability(*startup).sentence()}")
    return lines


def _measured(out: str | os.PathLike[str]) -> Any:
    """The trusted rows of ``out``'s measured, ok server runs."""
    from ..reporting.stats import measured

    frame = measured(check_results(out).frame)
    return frame[frame["source"] == SOURCE]
