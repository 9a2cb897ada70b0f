"""One profiling run: unprofiled reference loads, warm-up loads, then per variant every chosen tool.

Why reference loads: the profilers distort what they measure (cProfile most of all), so every
share in the reports comes from loads that ran without one, in fresh worker processes as
``reproduce`` runs them (:mod:`~omni_loader.profiling.reference`; ``load.json`` is each variant's
median run); the tools only say what fills the phases. Every load is told the same :class:`~omni_loader.token2wav.options.LoadOptions`
(its device resolved once, so that the files name the device used) and the tools run with one
:class:`~omni_loader.profiling.settings.ProfileSettings`.
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

from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from ..progress import progress_bar
from .cprofile import profile_cprofile
from .outputs import LOAD_JSON, remove_files, variant_files
from .pyspy import PySpyJob, PySpyUnavailable, find_py_spy, record_py_spy
from .reference import reference_loads, reference_spec
from .result import VariantProfile
from .settings import SETTING_NAMES, TOOLS, ProfileSettings, resolve_tools, resolve_variants
from .summary import write_summary_report, write_variant_report
from .torch_trace import profile_torch, torch_note
from ..results.safe_files import ensure_dir, write_text

LOAD_OPTION_NAMES = tuple(f.name for f in fields(LoadOptions))
SpyLookup = tuple[str | None, str]  # find_py_spy's answer: (executable, "") or (None, why not)
# No whole-profile "time left": its steps take from under a second (a reference load) to half a minute (the
# torch.profiler load), so a rate per step promised 69 s where 98 s were left. The postfix says what runs now,
# and the reference loads, steps of one kind, their own time left (:class:`ReferenceProgress`).
BAR_FORMAT = "{desc}: {n}/{total} |{bar}| {elapsed} elapsed{postfix}"


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
                     on_skip: Callable[[str], None] | None = None, **overrides: Any) -> dict[str, VariantProfile]:
    """Profile each variant into ``out_dir/<variant>/`` and write ``out_dir/profile.md``.

    ``options`` sets the loads (layout, device, dtype, construct), ``settings`` the tools (table
    rows, py-spy's rate, loads per worker, warm-up loads...); keywords of the same names
    (``layout=``, ``device=``, ``top=``, ``warmup=``...) override single fields of either.
    When py-spy is missing or may not trace, ``on_skip`` gets one line (default: printed to stderr)
    and the other tools still run. Returns ``{variant: VariantProfile}``.
    """
    options, settings = with_overrides(options, settings, overrides)
    variants, tools = resolve_variants(variants), resolve_tools(tools)
    options = options.resolved()  # 'auto' is resolved once; the files name the device used
    snapshot = _opened(snapshot)
    out = _output_directory(out_dir)
    skip = on_skip or (lambda line: print(f"omni-loader profile: {line}", file=sys.stderr, flush=True))
    spy: SpyLookup | None = None
    if "py-spy" in tools:
        spy = find_py_spy(settings.py_spy)
        if spy[0] is None:
            skip(f"{spy[1]}; skipping the flamegraph and speedscope profiles")
    profiles: dict[str, VariantProfile] = {}
    runs = len(reference_spec(snapshot, variants, options, runs=settings.reference_runs,
                              warmup=settings.warmup).plan())
    steps = runs + settings.warmup + len(variants) * len(tools)  # a step per reference run, load and tool
    with progress_bar(total=steps, desc="profile", unit="step", enabled=progress, bar_format=BAR_FORMAT) as bar:
        bar.set_postfix_str(f"reference loads: starting the worker server (imports torch and the model code once), "
                            f"then {runs} runs in fresh processes", refresh=True)
        reference = ReferenceProgress(bar)
        references = reference_loads(snapshot, variants, options, out, runs=settings.reference_runs,
                                     warmup=settings.warmup, on_run=reference)
        reference.finish(runs, "reference loads: " + ", ".join(f"{v} {r['phases']['total']:.3f} s"
                                                                for v, r in references.items()))
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


def _opened(snapshot: Any) -> Any:
    if hasattr(snapshot, "token2wav_config"):
        return snapshot
    from ..token2wav.checkpoint import open_snapshot  # a snapshot directory

    return open_snapshot(snapshot)


def _output_directory(out_dir: str | os.PathLike[str]) -> Path:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OmniLoaderError(f"--out {out} exists and is not a directory")
    return ensure_dir(out)


class ReferenceProgress:
    """The bar during the reference loads, called as each run starts (``on_run`` of
    :func:`~omni_loader.profiling.reference.reference_loads`): it names the run that runs now
    (``reference loads: run 3/8 baseline``), advances a step per run that ended, and gives the time left of
    them from the runs so far (their mean, once one has ended); ``clock`` is a seconds counter."""

    def __init__(self, bar: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.bar, self.clock, self.began, self.ended = bar, clock, None, 0

    def __call__(self, k: int, total: int, what: str) -> None:
        now = self.clock()
        self.began = now if self.began is None else self.began
        if k - 1 > self.ended:  # the runs before this one have ended
            self.bar.update(k - 1 - self.ended)
            self.ended = k - 1
        left = (f", about {(now - self.began) / self.ended * (total - self.ended):.0f} s left of them"
                if self.ended else "")
        self.bar.set_postfix_str(f"reference loads: run {k}/{total} {what}{left}", refresh=True)

    def finish(self, total: int, text: str) -> None:
        """The last run ended (and any that never started count as done): ``text`` says what they found."""
        self.bar.set_postfix_str(text, refresh=False)
        self.bar.update(max(total - self.ended, 0))
        self.ended = total


def _begin(bar: Any, text: str) -> None:
    """Say what runs now, before it starts (a step can take half a minute)."""
    bar.set_postfix_str(text, refresh=True)


def _step(bar: Any, text: str) -> None:
    """A step ended: ``text`` says what it found, on the line a bar in line mode writes now."""
    bar.set_postfix_str(text, refresh=False)
    bar.update(1)


def warm_up(snapshot: Any, variant: str, options: LoadOptions, loads: int, bar: Any) -> None:
    """``loads`` unprofiled loads, so that no profiled variant pays for the first load in this process."""
    from ..token2wav.loader import load_token2wav

    for i in range(loads):
        _begin(bar, f"warm-up load {i + 1}/{loads} ({variant})")
        t = time.perf_counter()
        model, _ = load_token2wav(snapshot, variant, options, digest=False)
        del model
        _step(bar, f"warm-up load {i + 1}/{loads} ({variant}): {time.perf_counter() - t:.3f} s")


def profile_variant(snapshot: Any, variant: str, out_dir: str | os.PathLike[str], tools: Iterable[str] = TOOLS,
                    options: LoadOptions | None = None, settings: ProfileSettings | None = None, *,
                    spy: SpyLookup | None = None, bar: Any = None,
                    reference: dict[str, Any] | None = None) -> VariantProfile:
    """Profile one variant with the chosen tools into ``out_dir/<variant>/`` and write its profile.md.

    ``spy`` is a py-spy lookup already made (:func:`~omni_loader.profiling.pyspy.find_py_spy`);
    ``bar`` a progress bar that advances one step per load (none: silent); ``reference`` the
    variant's median unprofiled run (:func:`~omni_loader.profiling.reference.reference_loads`;
    none: its reference loads are run here).
    """
    tools, options, settings = resolve_tools(tools), (options or LoadOptions()).resolved(), settings or ProfileSettings()
    bar = bar if bar is not None else progress_bar(enabled=False)
    directory = ensure_dir(Path(out_dir) / variant)
    vp = VariantProfile(variant=variant, directory=directory)
    if reference is None:
        reference = reference_loads(snapshot, (variant,), options, directory, runs=settings.reference_runs,
                                    warmup=settings.warmup)[variant]
    # Never leave a previous run's output next to this run's: profile.md describes this run only.
    remove_files(directory / name for name in variant_files(variant))
    keep_reference(vp, reference)
    if "cprofile" in tools:
        _begin(bar, f"{variant}: cProfile load")
        _step(bar, _run_cprofile(vp, snapshot, options, settings))
    if "torch" in tools:
        _begin(bar, f"{variant}: torch.profiler load (every op traced)")
        _step(bar, _run_torch(vp, snapshot, options, settings, reference))
    if "py-spy" in tools:
        _begin(bar, f"{variant}: py-spy sampling")
        _step(bar, _run_py_spy(vp, snapshot, options, settings, spy or find_py_spy(settings.py_spy), reference))
    vp.files["profile_md"] = write_variant_report(vp, snapshot=snapshot, tools=tools, options=options)
    return vp


def keep_reference(vp: VariantProfile, reference: dict[str, Any]) -> None:
    """Keep the variant's reference run as ``vp.reference`` and ``load.json``: every share comes from it."""
    vp.reference = reference
    write_text(vp.directory / LOAD_JSON, json.dumps(reference, indent=2, default=str))
    vp.files["load"] = vp.directory / LOAD_JSON


def _run_cprofile(vp: VariantProfile, snapshot: Any, options: LoadOptions, settings: ProfileSettings) -> str:
    t = time.perf_counter()
    out = profile_cprofile(snapshot, vp.variant, vp.directory, options, settings.top)
    vp.files.update(out["files"])
    vp.state_dict_calls = out["state_dict_calls"]
    vp.phase_functions = out["phase_functions"]
    return f"{vp.variant}: cProfile load {time.perf_counter() - t:.3f} s"


def _run_torch(vp: VariantProfile, snapshot: Any, options: LoadOptions, settings: ProfileSettings,
               reference: dict[str, Any]) -> str:
    t = time.perf_counter()
    out = profile_torch(snapshot, vp.variant, vp.directory, options, settings.top)
    vp.files.update(out["files"])
    vp.torch_phases = list(out["phase_ranges"]["phase"])
    vp.notes.append(torch_note(out["ops"], out["phase_ranges"], list(reference["phases"])))
    return f"{vp.variant}: torch.profiler load {time.perf_counter() - t:.3f} s"


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
    return f"{vp.variant}: sampled {chosen.repeat} load(s), {vp.py_spy['samples']} samples, {time.perf_counter() - t:.1f} s"
