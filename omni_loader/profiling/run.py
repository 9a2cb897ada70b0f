"""One profiling run: unprofiled reference loads, warm-up loads, then per variant every chosen tool.

Every share in the reports comes from the reference loads (:mod:`~omni_loader.profiling.reference`), since the
profilers distort what they measure; the tools only say what fills the phases. Every load gets the same
:class:`~omni_loader.token2wav.options.LoadOptions`, its device resolved once so that the files name it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..formatting import count
from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from ..progress import BAR_FORMAT, TICK, TIMED, Countdown, Step, StepBar, progress_bar
from .cprofile import profile_cprofile
from .outputs import LOAD_JSON, remove_files, variant_files
from .pyspy import PySpyJob, PySpyUnavailable, find_py_spy, record_py_spy
from .notes import Profiles
from .reference import reference_loads, reference_spec
from .result import VariantProfile
from .settings import SETTING_NAMES, TOOLS, ProfileSettings, resolve_tools, resolve_variants
from .summary import write_summary_report, write_variant_report
from .torch_trace import profile_torch, torch_note
from ..safe_files import ensure_dir, write_text

LOAD_OPTION_NAMES = tuple(f.name for f in fields(LoadOptions))
SpyLookup = tuple[str | None, str]  # find_py_spy's answer: (executable, "") or (None, why not)
TOOL_KINDS = {"cprofile": "cProfile", "torch": "torch.profiler", "py-spy": "py-spy"}  # as profile_variant runs them
WARM_UP = "warm-up"
# Each kind's price in reference loads until one of its steps has ended (measured on 2 cores), so that the bar
# need not read "? left" until every tool has run once.
PRIORS = {WARM_UP: (TIMED, 2.0), "cProfile": (TIMED, 1.5), "torch.profiler": (TIMED, 5.0), "py-spy": (TIMED, 4.0)}


def with_overrides(options: LoadOptions | None, settings: ProfileSettings | None,
                   overrides: dict[str, Any]) -> tuple[LoadOptions, ProfileSettings]:
    """``options`` and ``settings`` with single fields overridden by keyword (``layout=``, ``top=``...),
    as :func:`~omni_loader.token2wav.loader.load_token2wav` takes them; ``None`` means "not given"."""
    unknown = sorted(set(overrides) - {*LOAD_OPTION_NAMES, *SETTING_NAMES})
    if unknown:
        raise TypeError(f"profile_variants() got an unexpected keyword argument {unknown[0]!r}")
    load = {k: v for k, v in overrides.items() if k in LOAD_OPTION_NAMES}
    tool = {k: v for k, v in overrides.items() if k in SETTING_NAMES}
    return (options or LoadOptions()).replace(**load), (settings or ProfileSettings()).replace(**tool)


def profile_variants(snapshot: Any, variants: str | Iterable[str] = "both", tools: str | Iterable[str] | None = "all",
                     out_dir: str | os.PathLike[str] = "profile", options: LoadOptions | None = None,
                     settings: ProfileSettings | None = None, *, progress: bool = False,
                     on_skip: Callable[[str], None] | None = None, **overrides: Any) -> Profiles:
    """Profile each variant into ``out_dir/<variant>/`` and write ``out_dir/profile.md``.

    ``options`` sets the loads, ``settings`` the tools; keywords of the same names (``layout=``, ``top=``...)
    override single fields of either. When py-spy is missing or may not trace, ``on_skip`` gets one line (default:
    printed to stderr) and the other tools still run. Returns a :class:`~omni_loader.profiling.notes.Profiles`.
    """
    options, settings = with_overrides(options, settings, overrides)
    variants, tools = resolve_variants(variants), resolve_tools(tools)
    options = options.resolved()  # 'auto' is resolved once; the files name the device used
    if not hasattr(snapshot, "token2wav_config"):  # a snapshot directory
        from ..token2wav.checkpoint import open_snapshot

        snapshot = open_snapshot(snapshot)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OmniLoaderError(f"--out {out} exists and is not a directory")
    ensure_dir(out)
    skip = on_skip or (lambda line: print(f"omni-loader profile: {line}", file=sys.stderr, flush=True))
    spy: SpyLookup | None = None
    if "py-spy" in tools:
        spy = find_py_spy(settings.py_spy)
        if spy[0] is None:
            skip(f"{spy[1]}; skipping the flamegraph and speedscope profiles")
    profiles = Profiles()  # a dict, and the sentences beside 02's tables
    plan = reference_spec(snapshot, variants, options, runs=settings.reference_runs, warmup=settings.warmup).plan()
    countdown = Countdown([*(Step(TIMED, r.variant) for r in plan), *(Step(WARM_UP, variants[0]),) * settings.warmup,
                           *(Step(kind, v) for v in variants for t, kind in TOOL_KINDS.items() if t in tools)],
                          priors=PRIORS)
    first = f"{countdown.clock_words()}, starting the worker server"  # the bar's first line says it too
    with StepBar(progress_bar(total=len(countdown.remaining), desc="profile", unit="step", enabled=progress,
                              bar_format=BAR_FORMAT, postfix=first), countdown, tick=TICK) as bar:
        bar.text = "starting the worker server"  # a step per reference run, warm-up load and tool
        started: list[int] = []

        def on_run(k: int, total: int, run: Any) -> None:  # run: a PlannedRun, the k-th of total to start
            bar.begin(Step(TIMED, run.variant), f"reference run {k}/{total} {run.variant}"
                                                + (" (warm-up)" if run.warmup else ""))
            started.append(k)

        references = reference_loads(snapshot, variants, options, out, runs=settings.reference_runs,
                                     warmup=settings.warmup, on_run=on_run)
        bar.end("references: " + ", ".join(f"{v} {r['phases']['total']:.2f} s" for v, r in references.items()))
        countdown.drop(TIMED)
        bar.bar.update(max(len(plan) - len(started), 0))  # a run that never started counts as done
        # The tools' steps scale by each variant's reference load, and py-spy's worker makes as many as it asks for.
        countdown.scale = {v: r["phases"]["total"] for v, r in references.items()}
        if "py-spy" in tools:
            for v in variants:
                countdown.revise(Step(TOOL_KINDS["py-spy"], v, settings.repeat_for(countdown.scale[v])))
        warm_up(snapshot, variants[0], options, settings.warmup, bar)
        for variant in variants:
            vp = profile_variant(snapshot, variant, out, tools, options, settings, spy=spy, bar=bar,
                                 reference=references[variant])
            if "skipped" in vp.py_spy and spy is not None and spy[0] is not None:
                skip(f"{vp.py_spy['skipped']}; skipping the flamegraph and speedscope profiles")
                spy = (None, vp.py_spy["skipped"])  # say it once; the next variant would fail the same way
            profiles[variant] = vp
    write_summary_report(profiles, out, snapshot=snapshot, tools=tools, options=options)
    return profiles


def warm_up(snapshot: Any, variant: str, options: LoadOptions, loads: int, bar: StepBar) -> None:
    """``loads`` unprofiled loads, so that no profiled variant pays for the first load in this process."""
    from ..token2wav.loader import load_token2wav

    for i in range(loads):
        bar.begin(Step(WARM_UP, variant), f"warm-up {i + 1}/{loads} {variant}")
        t = time.perf_counter()
        model, _ = load_token2wav(snapshot, variant, options, digest=False)
        del model
        bar.end(f"warm-up {i + 1}/{loads} {variant}: {time.perf_counter() - t:.2f} s")


def profile_variant(snapshot: Any, variant: str, out_dir: str | os.PathLike[str], tools: Iterable[str] = TOOLS,
                    options: LoadOptions | None = None, settings: ProfileSettings | None = None, *,
                    spy: SpyLookup | None = None, bar: StepBar | Any = None,
                    reference: dict[str, Any] | None = None) -> VariantProfile:
    """Profile one variant with the chosen tools into ``out_dir/<variant>/`` and write its profile.md; ``spy``: a
    py-spy lookup already made, ``bar``: a progress bar (none: silent), ``reference``: its median unprofiled run."""
    tools, options, settings = resolve_tools(tools), (options or LoadOptions()).resolved(), settings or ProfileSettings()
    bar = bar if isinstance(bar, StepBar) else StepBar(bar if bar is not None else progress_bar(enabled=False))
    directory = ensure_dir(Path(out_dir) / variant)
    vp = VariantProfile(variant=variant, directory=directory)
    if reference is None:
        reference = reference_loads(snapshot, (variant,), options, directory, runs=settings.reference_runs,
                                    warmup=settings.warmup)[variant]
    # Never leave a previous run's output next to this run's: profile.md describes this run only.
    remove_files(directory / name for name in variant_files(variant))
    keep_reference(vp, reference)
    if "cprofile" in tools:
        bar.begin(Step(TOOL_KINDS["cprofile"], variant), f"{variant}: cProfile")
        t = time.perf_counter()
        out = profile_cprofile(snapshot, variant, directory, options, settings.top)
        vp.files.update(out["files"])
        vp.state_dict_calls, vp.phase_functions = out["state_dict_calls"], out["phase_functions"]
        bar.end(f"{variant}: cProfile {time.perf_counter() - t:.2f} s")
    if "torch" in tools:
        bar.begin(Step(TOOL_KINDS["torch"], variant), f"{variant}: torch.profiler")
        t = time.perf_counter()
        out = profile_torch(snapshot, variant, directory, options, settings.top)
        vp.files.update(out["files"])
        vp.torch_phases = list(out["phase_ranges"]["phase"])
        vp.notes.append(torch_note(out["ops"], out["phase_ranges"], list(reference["phases"])))
        bar.end(f"{variant}: torch.profiler {time.perf_counter() - t:.2f} s")
    if "py-spy" in tools:
        loads = settings.repeat_for(reference["phases"]["total"])
        bar.begin(Step(TOOL_KINDS["py-spy"], variant, loads), f"{variant}: py-spy, {count(loads, 'load')}")
        bar.end(_run_py_spy(vp, snapshot, options, settings, spy or find_py_spy(settings.py_spy), reference))
    vp.files["profile_md"] = write_variant_report(vp, snapshot=snapshot, tools=tools, options=options)
    return vp


def keep_reference(vp: VariantProfile, reference: dict[str, Any]) -> None:
    """Keep the variant's reference run as ``vp.reference`` and ``load.json``: every share comes from it."""
    vp.reference = reference
    write_text(vp.directory / LOAD_JSON, json.dumps(reference, indent=2, default=str))
    vp.files["load"] = vp.directory / LOAD_JSON


def _run_py_spy(vp: VariantProfile, snapshot: Any, options: LoadOptions, settings: ProfileSettings,
                spy: SpyLookup, reference: dict[str, Any]) -> str:
    """Record the variant with py-spy, or note in ``vp.py_spy`` why it was skipped."""
    exe, why = spy
    if exe is None:
        vp.py_spy = {"skipped": why}
        return f"{vp.variant}: sampling skipped"
    chosen = settings.replace(repeat=settings.repeat_for(reference["phases"]["total"]))
    t = time.perf_counter()
    try:
        out = record_py_spy(PySpyJob(exe, str(snapshot.root), vp.variant, vp.directory, options, chosen))
    except PySpyUnavailable as exc:
        vp.py_spy = {"skipped": str(exc)}
        return f"{vp.variant}: sampling skipped"
    vp.files.update(out["files"])
    vp.py_spy = out["summary"]
    return f"{vp.variant}: py-spy {time.perf_counter() - t:.2f} s, {count(vp.py_spy['samples'], 'sample')}"
