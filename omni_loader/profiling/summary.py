"""``profile.md``: where each variant's load spends its time, and the variants side by side.

Every sentence is computed from the files of the same run, so the text cannot drift from the data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..formatting import code, count, percent, short_duration, times
from ..reporting.measurements import label as words
from ..token2wav.options import LoadOptions
from .outputs import (FLAME_SVG, LOAD_JSON, PHASE_FUNCTIONS_CSV, PROFILE_MD, SPEEDSCOPE_JSON, TOP_FUNCTIONS_CSV,
                      TOP_FUNCTIONS_MD, frame_markdown)
from .result import OTHER_PHASE, VariantProfile, largest_cost, phase_share_frame
from .settings import TOOLS, resolve_tools
from ..safe_files import write_text


# profile.md's sections that notebook 02 shows as tables of its own: Profile.where_time_goes leaves them out
PHASE_SHARES = "## Phase shares"
STATE_DICT_CALLS = "## Module.state_dict() calls"


def bottleneck_sentence(vp: VariantProfile) -> str:
    """The load's largest cost in one sentence: its largest phase and what fills it (functions or page faults)."""
    c = largest_cost(vp)
    label = "Next bottleneck of the optimized load" if vp.variant == "optimized" else f"Largest cost of the {vp.variant} load"
    text = (f"**{label}:** {words(c['phase'])}, {percent(c['phase_share'])} of the load "
            f"({c['phase_seconds'] * 1e3:,.2f} ms)")  # two decimals, as the phase-share table beside it
    faults = fault_clause(vp, c["phase"], c["phase_seconds"])
    if faults["dominant"]:
        return text + "; " + faults["text"] + "."
    if "function" in c:
        text += f"; inside it the most own time goes to `{c['function']}` (about {percent(c['function_share'])} of the load)"
    return text + (f"; {faults['text']}" if faults["text"] else "") + "."


def fault_clause(vp: VariantProfile, phase: str, seconds: float) -> dict[str, Any]:
    """Page faults of ``phase`` in the reference load, priced at this machine's cost of a first touch: when they
    are half the phase or more, they, not the functions cProfile blames, are its cost."""
    from ..host.residency import fault_share, first_touch_seconds

    record = next((r for r in vp.reference.get("phase_records", []) if r.get("name") == phase), {})
    minor = int(record.get("minor_faults") or 0)
    if not minor or seconds <= 0:
        return {"dominant": False, "text": ""}
    per_fault = first_touch_seconds()
    share = fault_share(minor, seconds, per_fault)
    about = "under 0.1%" if round(share, 3) == 0 else f"about {percent(share)}"  # not "about 0.0%" of 132 faults
    text = (f"it took {minor:,} minor page faults (first touches of fresh memory), {about} of the phase "
            f"at {per_fault * 1e6:.2f} µs each as measured on this machine")
    if minor * per_fault > seconds:  # the share stops at all of it: say so
        text = (f"it took {minor:,} minor page faults (first touches of fresh memory), which at {per_fault * 1e6:.2f} µs "
                f"each as measured on this machine come to {short_duration(minor * per_fault)}, more than the phase's "
                f"{short_duration(seconds)} (all of it)")
    if share >= 0.5:
        text = f"the phase is dominated by page faults: {text}, so its own work (the copies, the writes) is not what costs"
    return {"dominant": share >= 0.5, "text": text}


def largest_phases(shares: pd.DataFrame, cover: float = 0.8, most: int = 3) -> list[str]:
    """The largest leaf phases, enough to cover ``cover`` of the load, at most ``most`` of them."""
    ranked = shares[shares["phase"] != OTHER_PHASE].sort_values("share", ascending=False)
    covered_before = ranked["share"].cumsum().shift(fill_value=0.0)
    return list(ranked["phase"][covered_before < cover].head(most))


def _header(title: str, snapshot: Any, options: LoadOptions | None) -> list[str]:
    """The title, then (with a snapshot) what was loaded, how, and on what software and machine."""
    import platform

    import torch

    if snapshot is None:
        return [title, ""]
    o, root, source = options or LoadOptions(), getattr(snapshot, "root", snapshot), getattr(snapshot, "source", "?")
    return [title, "", (f"- checkpoint: `{root}` ({source}); layout {o.layout}; device {o.device}; "
                        f"dtype {o.dtype}; construct {o.construct}"),
            (f"- torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPU{'' if os.cpu_count() == 1 else 's'}, "
             f"{platform.machine()}")]


def _cost_table(costs: pd.DataFrame) -> str:
    return frame_markdown(pd.DataFrame({"function": [code(f) for f in costs["function"]],
                                        "phase": costs["phase"].map(words),
                                        "≈ share of load": costs["share_of_load"].map(percent)}))


def _functions_in_phases(vp: VariantProfile, shares: pd.DataFrame) -> list[str]:
    md = ["## Top functions by own time inside the largest phases", "",
          ("From cProfile (profiler frames excluded). *share of phase* is the function's part of the own time "
           "measured inside the phase; *≈ share of load* scales it by the phase's share of the unprofiled load."), ""]
    share = dict(zip(shares["phase"], shares["share"]))
    for phase in largest_phases(shares):
        inside = vp.phase_functions[vp.phase_functions["phase"] == phase].head(8)
        md += [f"### {words(phase)}: {percent(share[phase])} of the load", ""]
        if inside.empty:
            md += ["(no function calls recorded inside this phase)", ""]
            continue
        shown = pd.DataFrame({"function": [code(f) for f in inside["function"]], "calls": inside["ncalls"],
                              "own ms (cProfile)": inside["tottime"] * 1e3,
                              "share of phase": inside["share_of_phase"].map(percent),
                              "≈ share of load": (inside["share_of_phase"] * share[phase]).map(percent)})
        md += [frame_markdown(shown, {"own ms (cProfile)": "{:,.3f}"}), ""]
    return md + ["## Costliest functions of the whole load", "", _cost_table(vp.top_costs(10)), ""]


def _tool_lines(vp: VariantProfile) -> list[str]:
    md = ["## Tools", ""]
    files = {k: v.name for k, v in vp.files.items()}
    if "pstats" in files:
        md.append(f"- cProfile: `{files['pstats']}`, `{TOP_FUNCTIONS_CSV}`/`{TOP_FUNCTIONS_MD}` (top functions by "
                  f"cumulative time), `{PHASE_FUNCTIONS_CSV}` (own time per function per phase)")
    md += [f"- {n}" for n in vp.notes]
    s = vp.py_spy
    if s.get("skipped"):
        md.append(f"- py-spy: **skipped**: {s['skipped']}")
    elif s:
        frac = s["state_dict_samples"] / s["load_samples"] if s["load_samples"] else 0.0
        how = ("two fresh worker processes, one per file" if s["py_spy_svg"]
               else "one fresh worker process; the SVG is drawn from the speedscope samples")
        md.append(f"- py-spy: `{FLAME_SVG}`, `{SPEEDSCOPE_JSON}` from {how} ({s['repeat']} load{'' if s['repeat'] == 1 else 's'} per worker, "
                  f"the first cold; {s['rate']} Hz{', native frames' if s['native'] else ''}); "
                  f"{s['samples']} samples, {s['load_samples']} inside `load_token2wav`, {s['state_dict_samples']} of "
                  f"them ({percent(frac)}) with `Module.state_dict` on the stack")
    return md + [f"- reference load: `{LOAD_JSON}`"]


def _reference_words(vp: VariantProfile) -> str:
    """Which load the shares are of: the median of so many unprofiled runs in fresh processes."""
    runs = vp.reference.get("reference", {}).get("runs")
    if not runs:
        return "an unprofiled load"
    return f"median of {count(runs, 'unprofiled run')}, each in a fresh process" if runs > 1 else \
        "one unprofiled run in a fresh process"


def write_variant_report(vp: VariantProfile, snapshot: Any = None, tools: Iterable[str] = TOOLS,
                         options: LoadOptions | None = None) -> Path:
    """``<variant>/profile.md``: where this variant's load spends its time, derived from the files."""
    shares = vp.phase_shares()
    total = vp.reference["phases"]["total"]
    shown = (shares.assign(ms=shares["seconds"] * 1e3, share=shares["share"].map(percent))[["phase", "ms", "share"]]
             .sort_values("ms", ascending=False).rename(columns={"ms": "time (ms)"}))
    shown["phase"] = shown["phase"].map(_phase_cell)
    md = _header(f"# Where the time goes: {vp.variant} load", snapshot, options)
    md += [f"- tools: {', '.join(resolve_tools(tools))}", "",
           f"## Phase shares (the {_reference_words(vp)}: {total * 1e3:,.2f} ms)", "",
           frame_markdown(shown, {"time (ms)": "{:,.2f}"}), bottleneck_sentence(vp), ""]
    if vp.state_dict_calls is not None:
        c = vp.state_dict_calls
        md += ["## state_dict() calls", "",
               (f"cProfile counts {c['primitive']:,} primitive (top-level) calls of `torch.nn.Module.state_dict` "
                f"({c['ncalls']:,} calls including the recursive calls into child modules); the kit's loader, which "
                f"counts the model's `state_dict()` calls during buffer discovery (whole state dicts built), counts "
                f"{c['counter']:,}."), ""]
    if vp.phase_functions is not None:
        md += _functions_in_phases(vp, shares)
    path = vp.directory / PROFILE_MD
    write_text(path, "\n".join(md + _tool_lines(vp)) + "\n")
    return path


def _side_by_side(profiles: dict[str, VariantProfile]) -> str:
    table = phase_share_frame(profiles)
    for variant in profiles:
        table[f"{variant} share"] = table[f"{variant} share"].map(percent, na_action="ignore")
    table["phase"] = table["phase"].replace({"total": "**total**"}).map(_phase_cell)
    return frame_markdown(table, {f"{variant} (ms)": "{:,.2f}" for variant in profiles})


def _phase_cell(phase: str) -> str:
    """A phase as profile.md's tables name it: in words, its id after."""
    return phase if phase.startswith(("**", "(")) else f"{words(phase)} (`{phase}`)"


def _discovery_change(profiles: dict[str, VariantProfile]) -> list[str]:
    """Discovery's ratio from each phase's median over the runs, as the kit's ratio tables take it."""
    if not {"baseline", "optimized"} <= profiles.keys():
        return []
    refs = [profiles[v].reference for v in ("baseline", "optimized")]
    medians = [r.get("reference", {}).get("medians") for r in refs]
    b, o = (m["buffer_discovery"] if m else r["phases"]["buffer_discovery"] for m, r in zip(medians, refs))
    tb, to = (r["phases"]["total"] for r in refs)
    ratio = f", {times(b / o)} less time" if o > 0 else ""  # as the ratio tables write it
    change = f"{percent(abs(tb - to) / tb)} {'less' if to <= tb else 'more'}"
    runs = refs[0].get("reference", {}).get("runs")
    which = (f", each variant's median of its {count(runs, 'run')} (as ratio tables take it)" if all(medians) and runs
             else ", the median runs")
    return [(f"Buffer discovery{which}: {b * 1e3:,.2f} ms → {o * 1e3:,.2f} ms{ratio}; whole load, the median "
             f"runs: {tb * 1e3:,.2f} ms → {to * 1e3:,.2f} ms ({change})."), ""]


def write_summary_report(profiles: dict[str, VariantProfile], out_dir: str | os.PathLike[str], snapshot: Any = None,
                         tools: Iterable[str] = TOOLS, options: LoadOptions | None = None) -> Path:
    """``out_dir/profile.md``: the variants side by side."""
    md = _header("# Where the time goes: " + " vs ".join(profiles), snapshot, options)
    md += [f"- tools: {', '.join(resolve_tools(tools))}; per-variant details in " +
           ", ".join(f"[`{v}/{PROFILE_MD}`]({v}/{PROFILE_MD})" for v in profiles), "",
           f"{PHASE_SHARES} (each variant's {_reference_words(next(iter(profiles.values())))})", "",
           _side_by_side(profiles), ""]
    md += _discovery_change(profiles)
    lines = [f"- {variant}: {c['primitive']:,} (cProfile primitive calls; {c['ncalls']:,} with recursion; "
             f"{c['counter']:,} counted by the kit's loader)" for variant, vp in profiles.items()
             if (c := vp.state_dict_calls) is not None]
    if lines:
        md += [STATE_DICT_CALLS, "", *lines, ""]
    md += ["## Largest costs", ""] + [f"- {bottleneck_sentence(vp)}" for vp in profiles.values()] + [""]
    if "optimized" in profiles and profiles["optimized"].phase_functions is not None:
        md += ["Costliest functions of the optimized load (cProfile own time, scaled to the unprofiled phase shares):",
               "", _cost_table(profiles["optimized"].top_costs(5)), ""]
    skipped = {vp.py_spy["skipped"] for vp in profiles.values() if vp.py_spy.get("skipped")}
    if skipped:
        md += ["## Skipped", ""] + [f"- py-spy: {s}" for s in sorted(skipped)] + [""]
    path = Path(out_dir) / PROFILE_MD
    write_text(path, "\n".join(md))
    return path


def read_summary(out_dir: str | os.PathLike[str], link_from: str | os.PathLike[str] | None = None) -> str:
    """``out_dir/profile.md`` with its relative links rewritten to be relative to ``link_from`` (default: the
    kernel's working directory, where JupyterLab resolves a notebook's links)."""
    out = Path(out_dir)
    path = out / PROFILE_MD
    if not path.is_file():
        raise OmniLoaderError(f"no {PROFILE_MD} in {out}: run the profiles first")
    base = Path(link_from) if link_from is not None else Path.cwd()

    def relink(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^/|^#", target):
            return m.group(0)
        return f"]({Path(os.path.relpath((out / target).resolve(), base.resolve())).as_posix()})"

    return re.sub(r"\]\(([<]?)([^)\s>]+)[>]?\)", relink, path.read_text())
