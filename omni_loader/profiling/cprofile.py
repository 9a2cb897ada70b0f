"""cProfile around one load: the whole-load pstats, its top functions, and own time per function per phase.

Per phase because the question is what fills the slow phase: :class:`~omni_loader.profiling.clock.SnapshotClock`
snapshots the profiler at every phase edge, and :func:`phase_function_rows` turns the differences into rows.
"""

from __future__ import annotations

import cProfile
import os
import pstats
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..names import LEAF_PHASES
from ..token2wav.options import LoadOptions
from .outputs import PHASE_FUNCTIONS_CSV, TOP_FUNCTIONS_CSV, TOP_FUNCTIONS_MD, frame_markdown
from .settings import DEFAULT_TOP
from .sources import function_label, is_profiler_frame
from ..safe_files import refuse_links, replaced, write_text

TOP_COLUMNS = ["function", "ncalls", "primitive_calls", "tottime", "cumtime"]
STATE_DICT_FILE = "torch/nn/modules/module.py"


def profile_cprofile(snapshot: Any, variant: str, directory: Path, options: LoadOptions,
                     top: int = DEFAULT_TOP) -> dict[str, Any]:
    """One load under cProfile; writes the pstats, the top-functions table and per-phase functions."""
    from ..token2wav.loader import load_token2wav
    from .clock import SnapshotClock  # imports torch: only when a load is profiled

    # a link where a file goes is refused before the load, not after it
    refuse_links(directory, (f"{variant}.pstats", TOP_FUNCTIONS_CSV, TOP_FUNCTIONS_MD, PHASE_FUNCTIONS_CSV))
    prof = cProfile.Profile()
    clock = SnapshotClock(options.device, prof)
    prof.enable()
    try:
        model, result = load_token2wav(snapshot, variant, options, digest=False, clock=clock)
    finally:
        prof.disable()
    del model
    stats = pstats.Stats(prof)
    pstats_path = directory / f"{variant}.pstats"
    with replaced(pstats_path) as written:  # pstats writes by name: in a private folder, moved into place
        stats.dump_stats(str(written))
    csv_path, md_path = write_top_functions(top_functions(stats, top), directory,
                                            f"cProfile: top {top} functions of one {variant} load")
    phases = phase_function_rows(clock.marks)
    phase_path = directory / PHASE_FUNCTIONS_CSV
    write_text(phase_path, phases.to_csv(index=False))
    counts = state_dict_call_counts(stats)
    counts["counter"] = result.state_dict_calls
    return {"files": {"pstats": pstats_path, "top_functions_csv": csv_path, "top_functions_md": md_path,
                      "phase_functions_csv": phase_path}, "state_dict_calls": counts, "phase_functions": phases}


def phase_function_rows(marks: list[Any]) -> pd.DataFrame:
    """Own and cumulative time of every function inside every leaf phase, from the clock's
    :class:`~omni_loader.profiling.clock.PhaseMark` s; ``share_of_phase`` is its part of the phase's own time."""
    enter: dict[str, dict] = {}
    rows = []
    for mark in marks:
        if mark.edge == "enter":
            enter[mark.phase] = mark.counters
            continue
        if mark.phase not in LEAF_PHASES or mark.phase not in enter:
            continue
        before = enter.pop(mark.phase)
        for code, (calls, rec, cum, own) in mark.counters.items():
            c0, r0, cum0, own0 = before.get(code, (0, 0, 0.0, 0.0))
            key = cProfile.label(code)
            if (calls != c0 or own - own0 > 0) and not is_profiler_frame(key):
                rows.append((mark.phase, function_label(key), calls - c0, (calls - rec) - (c0 - r0), own - own0,
                             cum - cum0))
    df = pd.DataFrame(rows, columns=["phase", "function", "ncalls", "primitive_calls", "tottime", "cumtime"])
    phase_own = df.groupby("phase")["tottime"].transform("sum")
    df["share_of_phase"] = (df["tottime"] / phase_own.where(phase_own > 0)).fillna(0.0)
    return df.sort_values(["phase", "tottime"], ascending=[True, False], ignore_index=True)


def top_functions(stats: str | os.PathLike[str] | pstats.Stats, n: int = DEFAULT_TOP) -> pd.DataFrame:
    """The ``n`` functions of a pstats file with the most cumulative time, profiler frames left out: function,
    ncalls, primitive_calls, tottime, cumtime (s)."""
    rows = [(function_label(k), nc, cc, tt, ct) for k, (cc, nc, tt, ct, _) in read_pstats(stats).stats.items()
            if not is_profiler_frame(k)]
    df = pd.DataFrame(rows, columns=TOP_COLUMNS)
    return df.sort_values("cumtime", ascending=False, kind="stable", ignore_index=True).head(n)


def read_pstats(path: str | os.PathLike[str] | pstats.Stats) -> pstats.Stats:
    if isinstance(path, pstats.Stats):
        return path
    path = Path(path)
    if not path.is_file():
        raise OmniLoaderError(f"pstats file not found: {path}")
    try:
        return pstats.Stats(str(path))
    except Exception as exc:
        raise OmniLoaderError(f"not a pstats file: {path} ({exc})") from None


def state_dict_call_counts(stats: str | os.PathLike[str] | pstats.Stats) -> dict[str, int]:
    """Calls of ``torch.nn.Module.state_dict`` in a profile: ``ncalls`` (one per module, as it recurses) and
    ``primitive`` (not made from inside another ``state_dict``: whole state dicts built)."""
    primitive = ncalls = 0
    for (file, _, name), (cc, nc, *_rest) in read_pstats(stats).stats.items():
        if name == "state_dict" and file.replace(os.sep, "/").endswith(STATE_DICT_FILE):
            primitive += cc
            ncalls += nc
    return {"primitive": primitive, "ncalls": ncalls}


def state_dict_primitive_calls(stats: str | os.PathLike[str] | pstats.Stats) -> int:
    """How many whole state dicts the profiled code built (top-level ``Module.state_dict`` calls)."""
    return state_dict_call_counts(stats)["primitive"]


def write_top_functions(df: pd.DataFrame, directory: Path, title: str) -> tuple[Path, Path]:
    """``top_functions.csv`` (seconds) and ``top_functions.md`` (milliseconds) from :func:`top_functions`."""
    csv_path, md_path = directory / TOP_FUNCTIONS_CSV, directory / TOP_FUNCTIONS_MD
    write_text(csv_path, df.to_csv(index=False))
    shown = df.assign(tottime=df["tottime"] * 1e3, cumtime=df["cumtime"] * 1e3).rename(
        columns={"primitive_calls": "primitive calls", "tottime": "tottime (ms)", "cumtime": "cumtime (ms)"})
    write_text(md_path, f"# {title}\n\nSorted by cumulative time; the CSV holds seconds.\n\n"
                        + frame_markdown(shown, {"tottime (ms)": "{:.3f}", "cumtime (ms)": "{:.3f}"}))
    return csv_path, md_path
