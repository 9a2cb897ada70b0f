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


def top_functions(out: str | os.PathLike[str], variants: list[str], top: int = DEFAULT_TOP) -> list[Any]:
    """cProfile's top functions by cumulative time, for each variant that cProfile profiled."""
    from ..profiling.outputs import TOP_FUNCTIONS_CSV
    from ..profiling.tables import top_function_table

    return [x for v in variants if (Path(out) / v / TOP_FUNCTIONS_CSV).exists()
            for x in (f"### {v}", top_function_table(out, v, top))]


def torch_operators(out: str | os.PathLike[str], variants: list[str], top: int = DEFAULT_TOP) -> list[Any]:
    """torch.profiler's operators by self time and the load's phase ranges, for each variant it profiled."""
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


def diff_table(diff: Any):  # -> Styler
    """A differential profile's table (``diff.md``'s rows) as a notebook table: a function's name over its file in
    one cell, broken only at dots and slashes, the medians in one unit, the interval of B − A as one cell."""
    import pandas as pd

    from ..formatting import duration, table, time_unit
    from .ab_tables import TO

    shown = diff.shown()
    unit = time_unit([x for x in shown[["a_median_s", "b_median_s"]].to_numpy().ravel() if x > 0] or [0.0])

    def bare(seconds: float) -> str:
        return duration(seconds, unit, 1).rsplit(" ", 1)[0]

    frame = pd.DataFrame({
        "function (file)": [f"{r['function']}\n{r['file']}" for _, r in shown.iterrows()],
        "A median": shown["a_median_s"], "B median": shown["b_median_s"], "B − A": shown["delta_s"],
        f"95% interval of B − A ({unit})": [bare(r["ci_low"]) + TO + bare(r["ci_high"]) for _, r in shown.iterrows()],
        "q": shown["q"], "verdict": shown["verdict"], "role": shown["role"]})
    return table(frame.reset_index(drop=True), seconds=["A median", "B median", "B − A"], unit=unit,
                 decimals={"q": 4}, names=["function (file)"])
