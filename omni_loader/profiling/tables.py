"""The profiles as notebook tables (pandas Stylers), read back from the files of a run, so that a notebook
shows exactly what the files hold, whoever made them.
"""

from __future__ import annotations

import os
import re

import pandas as pd

from ..formatting import table
from ..reporting.measurements import label
from .outputs import read_top_functions, read_torch_ops
from .result import VariantProfile, phase_share_frame
from .settings import DEFAULT_TOP
from .torch_trace import OPERATOR_HEADERS, PHASE_RANGE, in_words, trace_phase_ranges

LOADER_COUNT = "state_dict() calls counted by the kit's loader (whole state dicts built)"  # the third row's name


def phase_share_table(profiles: dict[str, VariantProfile]):  # -> pandas Styler
    """Phase times (ms) and shares (%) of each variant's unprofiled reference load, side by side
    (:func:`~omni_loader.profiling.result.phase_share_frame`); each phase in words
    (:data:`~omni_loader.reporting.measurements.LABELS`), each cell one number in the unit its header names."""
    frame = phase_share_frame(profiles)
    shares = [f"{variant} share" for variant in profiles]
    frame[shares] = frame[shares] * 100
    frame = frame.rename(columns={c: f"{c} (%)" for c in shares}).assign(phase=frame["phase"].map(label))
    return table(frame, decimals={c: 2 if c.endswith("(ms)") else 1 for c in frame.columns if c != "phase"})


def state_dict_call_table(profiles: dict[str, VariantProfile]):  # -> Styler
    """``Module.state_dict`` calls per variant: cProfile's primitive and total calls, and the loader's own count of
    whole state dicts built (:data:`LOADER_COUNT`)."""
    counts = {v: p.state_dict_calls for v, p in profiles.items() if p.state_dict_calls}
    frame = pd.DataFrame(counts).rename(index={"primitive": "primitive calls (whole state dicts)",
                                               "ncalls": "all calls (with recursion)", "counter": LOADER_COUNT})
    return table(frame, index=True)


# cProfile's name of a Python function: file:line(function)
_CPROFILE_NAME = re.compile(r"^(?P<file>.+):(?P<line>\d+)\((?P<name>.+)\)$")


def name_over_file(cprofile_name: str) -> str:
    """cProfile's ``file:line(function)`` as ``"function\\nfile:line"``; a built-in has no file: its name alone."""
    m = _CPROFILE_NAME.match(str(cprofile_name))
    if not m:
        return str(cprofile_name)
    return m["name"] if m["file"] == "~" else f"{m['name']}\n{m['file']}:{m['line']}"


def top_function_table(out_dir: str | os.PathLike[str], variant: str, n: int = DEFAULT_TOP):  # -> Styler
    """cProfile's top functions by cumulative time: own and cumulative time in ms, each function's name over its
    file and line, broken only at dots and slashes."""
    df = read_top_functions(out_dir, variant).head(n)
    df = df.assign(function=df["function"].map(name_over_file))
    return table(df.rename(columns={"function": "function (file:line)", "ncalls": "all calls (with recursion)",
                                    "primitive_calls": "primitive calls", "tottime": "own", "cumtime": "cumulative"}),
                 seconds=["own", "cumulative"], unit="ms", names=["function (file:line)"])


def torch_ops_table(out_dir: str | os.PathLike[str], variant: str, n: int = DEFAULT_TOP):  # -> Styler
    """torch.profiler's top ``n`` operators by self time, each column in words with its unit, without the kit's
    ``phase::`` ranges: a range is a load phase's span, not an operator (:func:`phase_range_table` shows them)."""
    every = read_torch_ops(out_dir, variant)
    ops = every[~every["name"].astype(str).str.startswith(PHASE_RANGE)]
    sort = next(c for c in ("self_gpu_ms", "self_cpu_ms") if c in ops.columns)
    df = ops.head(n).rename(columns=OPERATOR_HEADERS).reset_index(drop=True)
    ranges = len(every) - len(ops)
    caption = f"The top {min(n, len(ops)):,} of {len(ops):,} operators by {in_words(sort)}" + (
        f"; the load's {ranges:,} phases are in the table below, each in words" if ranges else "")
    return table(df, decimals={c: 3 for c in df.columns if c.endswith("(ms)")}, caption=caption)


def phase_range_table(trace: str | os.PathLike[str] | dict):  # -> Styler
    """The ``phase::`` ranges of a Chrome trace, each phase in words: start relative to the load (ms) and
    duration (ms)."""
    ranges = trace_phase_ranges(trace)
    start = ranges["ts_us"].min() if len(ranges) else 0
    shown = pd.DataFrame({"phase": ranges["phase"].map(label), "start (ms)": (ranges["ts_us"] - start) / 1e3,
                          "duration (ms)": ranges["dur_us"] / 1e3})
    return table(shown.sort_values("start (ms)", kind="stable"), decimals={"start (ms)": 3, "duration (ms)": 3})
