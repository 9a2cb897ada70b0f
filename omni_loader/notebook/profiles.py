"""A profile of both variants, table by table, as notebook 02 shows it.

Why a module of its own: each of the notebook's tables is a file one tool wrote for each variant, and
a tool that did not run (py-spy without permission, torch.profiler left out) leaves no file; here each
function returns the tables that exist, each under its variant's heading, so a cell is one call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..profiling.settings import DEFAULT_TOP

Q = "q (BH-adjusted p)"  # the differential table's q-value column: Benjamini-Hochberg's adjusted p-value


def top_functions(out: str | os.PathLike[str], variants: list[str], top: int = DEFAULT_TOP) -> list[Any]:
    """cProfile's top functions by cumulative time, for each variant that cProfile profiled."""
    from ..profiling.outputs import TOP_FUNCTIONS_CSV
    from ..profiling.tables import top_function_table

    shown = [x for v in variants if (Path(out) / v / TOP_FUNCTIONS_CSV).exists()
             for x in (f"### {v}", top_function_table(out, v, top))]
    return shown + ([] if (said := profiled_against_unprofiled(out, variants)) is None else [said])


MEMORY_WORK = ("'zero_'", "'copy_'")  # the tensor methods that write fresh memory: construction, the parameters' copies


def profiled_against_unprofiled(out: str | os.PathLike[str], variants: list[str]) -> str | None:
    """A sentence under the top functions when cProfile's whole loads rank the variants the other way round from
    their unprofiled runs: each load profiled and unprofiled, and its memory work (``zero_``, ``copy_``).

    Why: in the second Lab pass 02's optimized load took 4,512 ms under cProfile against the baseline's 2,451 ms,
    the reverse of its unprofiled runs, and nothing beside the table said why: almost all the difference was in
    ``zero_`` and ``copy_``, first touches of fresh memory, whose price on a virtual machine varies from load to
    load (the flamegraphs' note). ``None`` when the order agrees or a figure is missing."""
    import json

    from ..formatting import duration
    from ..profiling.outputs import LOAD_JSON, read_top_functions

    figures = {}
    for v in variants:
        try:
            top = read_top_functions(out, v)
            unprofiled = json.loads((Path(out) / v / LOAD_JSON).read_text())["phases"]["total"]
        except (OSError, ValueError, KeyError):
            return None
        load = top[top["function"].str.endswith("(load_token2wav)")]["cumtime"]
        memory = [top[top["function"].str.contains(m, regex=False)]["tottime"].sum() for m in MEMORY_WORK]
        if load.empty:
            return None
        figures[v] = (float(load.iloc[0]), float(unprofiled), memory)
    if len(figures) != 2:
        return None
    (a, (pa, ua, ma)), (b, (pb, ub, mb)) = figures.items()
    if (pa > pb) == (ua > ub):
        return None
    return (f"Profiled, the {b} load took {duration(pb)} against the {a} load's {duration(pa)}, the other way round "
            f"from their unprofiled runs above ({duration(ub)} against {duration(ua)}). Of the whole loads, "
            f"`zero_` and `copy_` took {duration(mb[0])} + {duration(mb[1])} ({b}) against {duration(ma[0])} + "
            f"{duration(ma[1])} ({a}): writing fresh memory, whose first touch on a virtual machine costs what the "
            "host asks at that moment (the flamegraphs' note below), not the Python code the fix changed.")


def torch_operators(out: str | os.PathLike[str], variants: list[str], top: int = DEFAULT_TOP) -> list[Any]:
    """torch.profiler's operators by self time (the operators alone, headers in words: see
    :func:`~omni_loader.profiling.tables.torch_ops_table` for why the kit's ``phase::`` ranges are not among them)
    and under them the load's phase ranges, each phase in words, for each variant it profiled."""
    from ..profiling.outputs import TORCH_OPS_CSV, TRACE_JSON
    from ..profiling.tables import phase_range_table, torch_ops_table

    return [x for v in variants if (Path(out) / v / TORCH_OPS_CSV).exists()
            for x in (f"### {v}", torch_ops_table(out, v, top), phase_range_table(Path(out) / v / TRACE_JSON))]


def flamegraphs(profiles: dict[str, Any]) -> list[Any]:
    """Each variant's interactive flamegraph of the load, or a line saying why there is none."""
    shown: list[Any] = []
    for variant, p in profiles.items():
        flame = p.flamegraph()
        shown += [f"### {variant}", flame if flame is not None else
                  f"no flamegraph: {p.py_spy.get('skipped', 'py-spy was not run')}"]
    return shown


def where_time_goes(out: str | os.PathLike[str], link_from: str | os.PathLike[str] | None = None) -> str:
    """``profile.md``'s attribution (:func:`~omni_loader.profiling.summary.read_summary`, links relative to the
    notebook) as a section of notebook 02: without its title, which the notebook's own heading says, and without the
    phase-share table and the ``state_dict()`` counts, which the notebook's cells above show as tables (the sentence
    setting discovery beside the whole load stays); its sections one level under the notebook's (``###`` under
    ``##``). The file keeps all of it."""
    import re

    from ..profiling.summary import PHASE_SHARES, STATE_DICT_CALLS, read_summary
    from .showing import nested

    kept, section = [], ""
    for line in read_summary(out, link_from).splitlines():
        if line.startswith("# "):  # the title
            continue
        if line.startswith("## "):
            section = line
            if line.startswith((PHASE_SHARES, STATE_DICT_CALLS)):
                continue
        if section.startswith(STATE_DICT_CALLS) or (section.startswith(PHASE_SHARES) and line.startswith("|")):
            continue
        kept.append(line)
    return nested(re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n", under=2)


def diff_section(diff: Any) -> list[Any]:
    """The differential profile as notebook 02's last section shows it: its sentences (``diff.md`` without the
    table, its heading one level under the notebook's), its table (:func:`diff_table`) and its flamegraph."""
    from .showing import nested

    return [nested(diff.markdown(with_table=False), under=2), diff_table(diff), diff.flamegraph()]


def sampling_digits(step_seconds: float, unit: str) -> int:
    """Decimals of a time in ``unit`` that are no finer than one sample of ``step_seconds``: 0 for py-spy's
    4 ms in ms (250 Hz), 1 for 0.5 ms, 2 for 4 ms written in seconds."""
    import math

    from ..formatting import TIME_SCALE

    return max(0, math.floor(-math.log10(step_seconds * TIME_SCALE[unit])))


def diff_table(diff: Any):  # -> Styler
    """A differential profile's table (``diff.md``'s rows) as a notebook table: a function's name over its file in
    one cell, broken only at dots and slashes, the medians in one unit, the interval of B − A as one cell, the verdict
    in 01's words (``no claim``, never wrapped); every time
    to the precision py-spy's sampling resolves (one sample every 1/rate s, the rate the diff recorded: whole ms at
    250 Hz), which the caption says once."""
    import numpy as np
    import pandas as pd

    from ..formatting import TIME_SCALE, number, short_duration, table, time_unit
    from ..profiling.diff_stats import NO_CLAIM as NOT_CLAIMED
    from ..profiling.settings import DEFAULT_RATE
    from .ab_tables import NO_CLAIM, TO, unbroken

    shown = diff.shown()
    unit = time_unit([x for x in shown[["a_median_s", "b_median_s"]].to_numpy().ravel() if x > 0] or [0.0])
    rate = float(diff.settings.get("rate") or DEFAULT_RATE)
    digits = sampling_digits(1 / rate, unit)

    def shown_in_unit(seconds: Any) -> Any:  # a time or a column of them, rounded to what is shown, a -0 made 0
        return np.round(seconds * TIME_SCALE[unit], digits) + 0.0

    def bare_shown(value: float) -> str:  # with a minus sign, as the sentences write one, not a hyphen
        return f"{value:,.{digits}f}".replace("-", "\u2212")

    def bare(seconds: float) -> str:
        return bare_shown(shown_in_unit(seconds))

    times = {f"A median ({unit})": "a_median_s", f"B median ({unit})": "b_median_s", f"B − A ({unit})": "delta_s"}
    frame = pd.DataFrame({
        "function (file)": [f"{r['function']}\n{r['file']}" for _, r in shown.iterrows()],
        **{name: shown_in_unit(shown[column]) for name, column in times.items()},
        f"95% interval of B − A ({unit})": [bare(r["ci_low"]) + TO + bare(r["ci_high"]) for _, r in shown.iterrows()],
        Q: shown["q"], "verdict": [unbroken(NO_CLAIM if v == NOT_CLAIMED else v) for v in shown["verdict"]],
        "role": shown["role"]})
    caption = (f"Times to the nearest {10.0 ** -digits:g} {unit}: py-spy sampled at {number(rate)} Hz, "
               f"one sample every {short_duration(1 / rate)}")
    styler = table(frame.reset_index(drop=True), decimals={**{name: digits for name in times}, Q: 4},
                   names=["function (file)"], caption=caption)
    return styler.format(bare_shown, subset=[f"B − A ({unit})"])  # a minus sign, as in the interval beside it


# The frames a flamegraph's phases are read from: the discovery rules' functions, the model's construction.
FLAME_PHASES = {"buffer_discovery": ("_baseline", "_optimized"), "construct": ("build_model",)}


def flame_note(profiles: dict[str, Any]) -> str:
    """Under 02's flamegraphs, in numbers: how wide buffer discovery and construction are drawn in each variant's
    graph (their share of the samples under ``load_token2wav``) beside their share of the median unprofiled run
    in the phase table above, and how many MiB of parameters construction writes (:func:`_parameter_mib`). Why:
    the baseline's graph drew discovery about a third as wide as the table's share (the issue's
    12% against 35.8%), and the prose said why in words only; a flamegraph is one first load of a fresh worker
    under a sampler, where construction's first touches of fresh memory cost what the host asks, so every other
    frame is narrower by what construction gains."""
    from ..profiling.flamegraph import load_stacks
    from ..reporting.measurements import label

    lines, size = [], None
    for variant, p in profiles.items():
        speedscope = p.files.get("speedscope")
        if not speedscope or not Path(speedscope).is_file():
            continue
        try:
            stacks, _ = load_stacks(speedscope)
            shares = p.phase_shares().set_index("phase")["share"]
        except Exception:  # noqa: BLE001 - a note, not a table: no file, no sentence
            continue
        total = sum(w for _, w in stacks)
        if not total:
            continue
        parts = []
        for phase, functions in FLAME_PHASES.items():
            drawn = sum(w for path, w in stacks if any(name.split(".")[-1].split(" ")[0] in functions
                                                       for name, _ in path))
            if phase in shares:
                parts.append(f"{label(phase).lower() if phase == 'construct' else label(phase)} "
                             f"{100 * drawn / total:.1f}% of the graph's width against {100 * shares[phase]:.1f}% of "
                             "the table's run")
        if parts:
            lines.append(f"- **{variant}**: " + "; ".join(parts) + ".")
        size = size or _parameter_mib(p.reference)
    if not lines:
        return ""
    return ("How wide each graph draws two phases, beside their share of the median unprofiled run in the phase "
            "table above:\n\n" + "\n".join(lines) + "\n\nThe widths differ because the two count different loads: "
            "a graph is one load, the first in a fresh worker that py-spy stops for every sample, where construction "
            + (f"writes {size:,.1f} MiB of fresh parameters" if size else "writes every parameter afresh")
            + " whose first touches the host prices at that moment; whatever construction gains there, every other "
            "frame loses in width. The table's run is unprofiled and its shares are of its own whole load: read the "
            "graph for *what* fills a load, the table for *how much*.")


def _parameter_mib(reference: dict[str, Any]) -> float | None:
    """The MiB of parameters construction writes in a profiled load: the model its baseline's state_dict() calls
    name (one per named buffer: full-size or tiny, :data:`~omni_loader.reporting.plots.MODEL_BY_BUFFERS`), counted
    on the meta device in its layout, as notebook 04 weighs it; None for a model of another size."""
    from ..reporting.plots import MODEL_BY_BUFFERS
    from ..token2wav.model import inventory

    size = MODEL_BY_BUFFERS.get(int(reference.get("state_dict_calls") or 0))
    if size is None or reference.get("variant") != "baseline":
        return None
    return inventory(reference.get("layout") or "vllm-omni", "full" if size == "full-size" else size).parameter_bytes / 2**20
