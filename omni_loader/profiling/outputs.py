"""The files a profiling run writes under ``DIR/<variant>/``: their names, named once so that the profilers,
the reports and the notebook tables agree, and reading them back.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..formatting import markdown_table

PROFILE_MD = "profile.md"
TOP_FUNCTIONS_CSV = "top_functions.csv"
TOP_FUNCTIONS_MD = "top_functions.md"
PHASE_FUNCTIONS_CSV = "phase_functions.csv"
TORCH_OPS_CSV = "torch_ops.csv"
TORCH_OPS_MD = "torch_ops.md"
TRACE_JSON = "trace.json"
FLAME_SVG = "flame.svg"
SPEEDSCOPE_JSON = "speedscope.json"
LOAD_JSON = "load.json"
PY_SPY_LOG = "py-spy.log"
TORCH_LOG = "torch-profiler.log"


def variant_files(variant: str) -> tuple[str, ...]:
    """Every file a profiling run may leave in ``<variant>/`` (all but ``load.json`` and ``profile.md``)."""
    return (f"{variant}.pstats", TOP_FUNCTIONS_CSV, TOP_FUNCTIONS_MD, PHASE_FUNCTIONS_CSV, TRACE_JSON, TORCH_OPS_CSV,
            TORCH_OPS_MD, FLAME_SVG, SPEEDSCOPE_JSON, PY_SPY_LOG, TORCH_LOG)


def remove_files(paths: Iterable[Path]) -> None:
    """Delete the files that exist, so that no previous run's output stays beside this one's; a link among them
    was planted, not written by a run, and is refused before any is removed."""
    from ..safe_files import refuse_link

    paths = list(paths)
    for p in paths:
        refuse_link(p)
    for p in paths:
        if p.is_file():
            p.unlink()


def frame_markdown(df: pd.DataFrame, formats: Mapping[str, str] | None = None) -> str:
    """A DataFrame as a Markdown table: numeric columns right-aligned, ``formats`` applied per column
    (a NaN cell is written as is, not formatted)."""
    formats = formats or {}
    cols = list(df.columns)
    right = [i for i, c in enumerate(cols) if pd.api.types.is_numeric_dtype(df[c])]
    rows = [[_cell(df[c].iloc[i], formats.get(c)) for c in cols] for i in range(len(df))]
    return markdown_table(rows, [str(c) for c in cols], right=right)


def _cell(value: Any, fmt: str | None) -> str:
    if fmt is None or (isinstance(value, float) and math.isnan(value)):
        return str(value)
    return fmt.format(value)


def read_top_functions(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    """The top-functions table back: a CSV path, a variant directory, or an output directory + variant."""
    return read_table(path, variant, TOP_FUNCTIONS_CSV)


def read_phase_functions(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    """Own time of every function inside every leaf phase (see :func:`~omni_loader.profiling.cprofile.profile_cprofile`)."""
    return read_table(path, variant, PHASE_FUNCTIONS_CSV)


def read_torch_ops(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    """torch.profiler's operator table (``key_averages``), every operator, by self time."""
    return read_table(path, variant, TORCH_OPS_CSV)


def read_table(path: str | os.PathLike[str], variant: str | None, name: str) -> pd.DataFrame:
    """The CSV ``name`` found from a file path, a variant directory, or an output directory + variant."""
    p = Path(path)
    if variant:
        p = p / variant
    if p.is_dir():
        p = p / name
    if not p.is_file():
        raise OmniLoaderError(f"{name} not found: {p}")
    return pd.read_csv(p)
