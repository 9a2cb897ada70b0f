"""torch.profiler around one load: a Chrome trace with the load's phases, and the operator table.

cProfile sees Python calls, not the operators the tensor library runs inside one; each operator lands inside a
``phase::<name>`` range (:class:`~omni_loader.host.timing.PhaseClock`) of the phase that caused it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from .outputs import TORCH_LOG, TORCH_OPS_CSV, TORCH_OPS_MD, TRACE_JSON, frame_markdown
from .settings import DEFAULT_TOP
from ..safe_files import open_file, refuse_links, replaced, write_text

# operator_table's columns in words, each time's unit in its header: the notebook's table and profile.md say these
OPERATOR_HEADERS = {"name": "operator", "calls": "calls", "self_cpu_ms": "self CPU time (ms)",
                    "cpu_total_ms": "CPU time incl. children (ms)", "self_gpu_ms": "self GPU time (ms)",
                    "gpu_total_ms": "GPU time incl. children (ms)"}
PHASE_RANGE = "phase::"  # the name prefix of the kit's own phase ranges (PhaseClock's record_function), not operators


def profile_torch(snapshot: Any, variant: str, directory: Path, options: LoadOptions,
                  top: int = DEFAULT_TOP) -> dict[str, Any]:
    """One load under torch.profiler (CPU, plus CUDA on a GPU): Chrome trace and key_averages table."""
    from torch.profiler import ProfilerActivity, profile

    from ..host.devices import resolve_device
    from ..token2wav.loader import load_token2wav

    on_gpu = resolve_device(options.device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    refuse_links(directory, (TRACE_JSON, TORCH_OPS_CSV, TORCH_OPS_MD, TORCH_LOG))  # before the load, not after it
    with stderr_to(directory / TORCH_LOG), profile(activities=activities) as prof:
        model, _ = load_token2wav(snapshot, variant, options, digest=False)
    del model
    trace_path = directory / TRACE_JSON
    with replaced(trace_path) as written:  # torch.profiler writes by name: in a private folder, moved into place
        prof.export_chrome_trace(str(written))
    ops = operator_table(prof.key_averages(), on_gpu)
    csv_path, md_path = directory / TORCH_OPS_CSV, directory / TORCH_OPS_MD
    write_text(csv_path, ops.to_csv(index=False))
    sort = "self_gpu_ms" if on_gpu else "self_cpu_ms"
    fmt = {c: "{:.3f}" for c in ops.columns if c.endswith("_ms")}
    write_text(md_path, f"# torch.profiler: operators of one {variant} load, by {in_words(sort)}\n\n"
                        f"Top {top} of {len(ops)}; the CSV holds all. `phase::` rows are the load's phase ranges.\n\n"
                        + frame_markdown(ops.head(top), fmt))
    ranges = trace_phase_ranges(trace_path)
    return {"files": {"trace": trace_path, "torch_ops_csv": csv_path, "torch_ops_md": md_path,
                      "torch_log": directory / TORCH_LOG},
            "ops": ops, "phase_ranges": ranges}


def operator_table(averages: Any, on_gpu: bool) -> pd.DataFrame:
    """``key_averages()`` as a frame in ms, by self GPU time on a GPU, else by self CPU time."""
    rows = [{"name": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
             "cpu_total_ms": e.cpu_time_total / 1e3,
             **({"self_gpu_ms": e.self_device_time_total / 1e3, "gpu_total_ms": e.device_time_total / 1e3}
                if on_gpu else {})} for e in averages]
    sort = "self_gpu_ms" if on_gpu else "self_cpu_ms"
    return pd.DataFrame(rows).sort_values(sort, ascending=False, ignore_index=True)


@contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Send what C++ code writes to file descriptor 2 into ``path`` for the duration of the block: Kineto's
    ``USDT`` lines, which no setting turns off, would be red stderr output in a notebook."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open_file(path, "a", binary=True) as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def trace_phase_ranges(trace: str | os.PathLike[str] | dict) -> pd.DataFrame:
    """The ``phase::<name>`` CPU ranges of a Chrome trace: phase, start (us), duration (us)."""
    if isinstance(trace, dict):
        data = trace
    else:
        try:
            data = json.loads(Path(trace).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise OmniLoaderError(f"cannot read Chrome trace {trace}: {exc}") from None
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    rows = [(e["name"].split("::", 1)[1], e.get("ts"), e.get("dur")) for e in events
            if str(e.get("name", "")).startswith("phase::") and e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    return pd.DataFrame(rows, columns=["phase", "ts_us", "dur_us"])


def torch_note(ops: pd.DataFrame, ranges: pd.DataFrame, expected: list[str]) -> str:
    """One line for profile.md: whether the trace holds one range per ``expected`` phase, and the top operators."""
    counts = ranges["phase"].value_counts()
    ok = all(counts.get(p, 0) == 1 for p in expected)
    real = ops[~ops["name"].str.startswith(PHASE_RANGE)]
    col = "self_gpu_ms" if "self_gpu_ms" in ops.columns else "self_cpu_ms"
    top3 = ", ".join(f"`{r['name']}` {r[col]:.1f} ms" for _, r in real.head(3).iterrows())
    where = "one `phase::` range per load phase" if ok else f"phase ranges found: {dict(counts)}"
    return f"torch.profiler: {where} in `{TRACE_JSON}`; top operators by {in_words(col)}: {top3}"


def in_words(column: str) -> str:
    """An :func:`operator_table` column in words without its unit: ``self_cpu_ms`` → ``self CPU time``."""
    return OPERATOR_HEADERS[column].removesuffix(" (ms)")
