"""Where a Token2Wav load spends its time: cProfile, py-spy and torch.profiler, one load per variant.

``omni-loader profile --variant both --tool all --out DIR`` writes, under ``DIR/<variant>/``:

cProfile        ``<variant>.pstats`` (the whole load), ``top_functions.csv``/``.md`` (sorted by
                cumulative time) and ``phase_functions.csv``: every function's own time inside each
                leaf phase of the load, taken from snapshots of the running profiler at the phase
                edges (exact for every call that starts and ends inside the phase).
py-spy          ``speedscope.json`` recorded from a fresh worker process (``python -m
                omni_loader.worker``, as a server restart loads the model; ``--repeat`` loads in it, by
                default enough for ~250 samples) and ``flame.svg`` drawn from the same samples
                (``--py-spy-svg``: a second recording in py-spy's own interactive SVG instead).
torch.profiler  ``trace.json`` (Chrome trace; one ``phase::<name>`` range per load phase) and
                ``torch_ops.csv``/``.md`` (``key_averages``, by self CPU time, or self GPU time on a GPU).
always          ``load.json`` (an unprofiled reference load: the phase shares come from it) and
                ``profile.md``: phase shares, the functions that cost the most inside the largest
                phases, and the load's largest cost, all derived from the files above.

``DIR/profile.md`` sets the variants side by side. Everything is also a library call for notebooks:
:func:`profile_variants`, :func:`read_top_functions`, :func:`read_phase_functions`,
:func:`state_dict_primitive_calls`, :func:`trace_phase_ranges`, :func:`speedscope_samples`.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import pstats
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import OmniLoaderError

TOOLS = ("cprofile", "py-spy", "torch")
VARIANT_CHOICES = ("baseline", "optimized", "both")
PY_SPY_ENV = "OMNI_LOADER_PY_SPY"
DEFAULT_RATE = 250
DEFAULT_TOP = 30
MAX_AUTO_REPEAT = 50
SAMPLES_WANTED = 250  # auto --repeat aims at this many py-spy samples inside the loads
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
OTHER_PHASE = "(between phases)"
TOP_COLUMNS = ["function", "ncalls", "primitive_calls", "tottime", "cumtime"]
_STATE_DICT_FILE = "torch/nn/modules/module.py"
_PTRACE_HINTS = ("permission denied", "operation not permitted", "ptrace", "os error 1)", "elevated permissions")


# --------------------------------------------------------------------------- results


@dataclass
class VariantProfile:
    """What profiling one variant produced: its files, the reference load and derived figures."""

    variant: str
    directory: Path
    files: dict[str, Path] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)  # LoadResult.to_dict() of the unprofiled load
    state_dict_calls: dict[str, int] | None = None  # primitive / ncalls (cProfile), counter (loader)
    phase_functions: pd.DataFrame | None = None
    torch_phases: list[str] = field(default_factory=list)
    py_spy: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def phase_shares(self) -> pd.DataFrame:
        return phase_shares(self.reference)

    def top_costs(self, n: int = 10) -> pd.DataFrame:
        return top_costs(self.phase_functions, self.phase_shares(), n) if self.phase_functions is not None else pd.DataFrame()

    def flamegraph(self, link_from: str | os.PathLike[str] | None = None) -> Any:
        """The load's flamegraph for a notebook (:class:`omni_loader.flamegraph.FlameView`), or None
        when py-spy did not run. Links are relative to ``link_from`` (default: the working directory,
        which in a notebook is the notebook's own directory)."""
        from . import flamegraph

        speedscope = self.files.get("speedscope")
        if not speedscope or not Path(speedscope).is_file():
            return None
        flame = flamegraph.build(speedscope, title=f"{self.variant} load: where its samples are")
        files = {"speedscope.json": Path(speedscope)}
        if self.files.get("flamegraph"):
            files["flame.svg"] = Path(self.files["flamegraph"])
        return flamegraph.FlameView(flame, link_from=link_from, files=files)


# --------------------------------------------------------------------------- input checks


def resolve_tools(tools: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"all"``/None -> every tool; otherwise the named tools, checked, in the canonical order."""
    if tools is None:
        return TOOLS
    names = [tools] if isinstance(tools, str) else list(tools)
    if not names or "all" in names:
        return TOOLS
    unknown = [t for t in names if t not in TOOLS]
    if unknown:
        raise OmniLoaderError(f"unknown profiling tool {unknown[0]!r}; choose from {', '.join(TOOLS)} or all")
    return tuple(t for t in TOOLS if t in names)


def resolve_variants(variants: str | Iterable[str]) -> tuple[str, ...]:
    """``"both"`` -> baseline and optimized; otherwise the named variants, checked."""
    from .discovery import VARIANTS

    names = [variants] if isinstance(variants, str) else list(variants)
    if "both" in names:
        return VARIANTS
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        bad = unknown[0] if unknown else "(none)"
        raise OmniLoaderError(f"unknown variant {bad!r}; choose from {', '.join(VARIANT_CHOICES)}")
    return tuple(dict.fromkeys(names))


def find_py_spy(explicit: str | os.PathLike[str] | None = None) -> tuple[str | None, str]:
    """The py-spy executable to run, or ``(None, why not)``.

    Looked up in order: ``explicit`` (``--py-spy``), ``$OMNI_LOADER_PY_SPY``, the bin directory of
    this interpreter (a virtualenv's ``bin/``), ``PATH``. A path given explicitly or through the
    environment is used as is: if nothing executable is there, py-spy counts as missing.
    """
    for given, source in ((explicit, "--py-spy"), (os.environ.get(PY_SPY_ENV) or None, f"${PY_SPY_ENV}")):
        if given:
            path = Path(given)
            if path.is_file() and os.access(path, os.X_OK):
                return str(path), ""
            return None, f"py-spy not found at {path} (set by {source})"
    local = Path(sys.executable).parent / "py-spy"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local), ""
    found = shutil.which("py-spy")
    if found:
        return found, ""
    return None, f"py-spy not found (not in {local.parent}, not on PATH); install it with 'pip install py-spy'"


# --------------------------------------------------------------------------- small helpers


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, flush=True)


def _short_path(path: str) -> str:
    """A source path relative to site-packages, the standard library or this repository."""
    roots = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")}
    roots.add(str(Path(__file__).resolve().parent.parent))
    best = ""
    for root in filter(None, roots):
        root = root.rstrip(os.sep) + os.sep
        if path.startswith(root) and len(root) > len(best):
            best = root
    return path[len(best) :] if best else path


def function_label(key: tuple[str, int, str]) -> str:
    """``file:line(name)`` as pstats prints it (built-ins as ``{name}``), with a shortened path."""
    file, line, name = key
    if file == "~" and line == 0:
        return f"{{{name[1:-1]}}}" if name.startswith("<") and name.endswith(">") else name
    return f"{_short_path(file)}:{line}({name})"


def _is_profiler_itself(key: tuple[str, int, str]) -> bool:
    """Frames of the profiling machinery, not of the load: this module and the profiler's own code."""
    file, _, name = key
    if file == "~":
        return "_lsprof" in name
    path = Path(file)
    return path.name in ("cProfile.py", "pstats.py") or (path.name == Path(__file__).name and "omni_loader" in file)


def _md_table(df: pd.DataFrame, formats: dict[str, str] | None = None) -> str:
    formats = formats or {}
    cols = list(df.columns)
    lines = ["| " + " | ".join(str(c) for c in cols) + " |",
             "| " + " | ".join("---:" if pd.api.types.is_numeric_dtype(df[c]) else "---" for c in cols) + " |"]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            text = formats[c].format(v) if c in formats and not (isinstance(v, float) and math.isnan(v)) else str(v)
            cells.append(text.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _pct(x: float) -> str:
    from .formatting import percent

    return percent(x)


def _code(names: Iterable[str]) -> list[str]:
    """Function names as Markdown code, so ``__setattr__`` is not rendered as bold 'setattr'."""
    from .formatting import code

    return [code(n) for n in names]


def _remove(paths: Iterable[Path]) -> None:
    for p in paths:
        if p.is_file() or p.is_symlink():
            p.unlink()


# --------------------------------------------------------------------------- phase shares


def phase_shares(result: Any) -> pd.DataFrame:
    """Leaf phases of one load with seconds and share of the total (a LoadResult or its dict).

    Time the clock spent between leaf phases (phase bookkeeping, the lazy shard iterator being
    created) is one more row, so the shares add up to 100%.
    """
    from .loader import LEAF_PHASES

    seconds = result.phase_seconds() if hasattr(result, "phase_seconds") else dict(result["phases"])
    total = seconds.get("total")
    if not total or total <= 0:
        raise OmniLoaderError("load result has no positive 'total' phase; cannot compute phase shares")
    rows = [(name, seconds[name]) for name in LEAF_PHASES if name in seconds]
    rest = total - sum(s for _, s in rows)
    if rest > 0:
        rows.append((OTHER_PHASE, rest))
    df = pd.DataFrame(rows, columns=["phase", "seconds"])
    df["share"] = df["seconds"] / total
    return df


# --------------------------------------------------------------------------- cProfile


def _snapshot(prof: cProfile.Profile) -> dict[Any, tuple[int, int, float, float]]:
    """The profiler's counters now: code -> (calls, recursive calls, cumulative s, own s); labelled later."""
    return {e.code: (e.callcount, e.reccallcount, e.totaltime, e.inlinetime) for e in prof.getstats()}


@contextmanager
def _phase_snapshots(prof: cProfile.Profile) -> Iterator[list[tuple[str, str, dict]]]:
    """Snapshot the running profiler at the inner edges of every ``PhaseClock`` phase of a load.

    ``load_token2wav`` builds its own ``PhaseClock``; for the duration of the block the loader's
    name for that class points at a subclass that also takes the snapshots. The difference of two
    snapshots is exactly what the calls made inside the phase cost.
    """
    from . import loader

    original = loader.PhaseClock
    marks: list[tuple[str, str, dict]] = []

    class SnapshottingPhaseClock(original):  # type: ignore[misc, valid-type]
        @contextmanager
        def phase(self, name: str) -> Iterator[None]:
            with original.phase(self, name):
                marks.append((name, "enter", _snapshot(prof)))
                try:
                    yield
                finally:
                    marks.append((name, "exit", _snapshot(prof)))

    loader.PhaseClock = SnapshottingPhaseClock
    try:
        yield marks
    finally:
        loader.PhaseClock = original


def _phase_function_rows(marks: list[tuple[str, str, dict]]) -> pd.DataFrame:
    from .loader import LEAF_PHASES

    enter: dict[str, dict] = {}
    rows = []
    for name, edge, snap in marks:
        if edge == "enter":
            enter[name] = snap
            continue
        if name not in LEAF_PHASES or name not in enter:
            continue
        before = enter.pop(name)
        for code, (calls, rec, cum, own) in snap.items():
            c0, r0, cum0, own0 = before.get(code, (0, 0, 0.0, 0.0))
            key = cProfile.label(code)
            if (calls == c0 and own - own0 <= 0) or _is_profiler_itself(key):
                continue
            rows.append((name, function_label(key), calls - c0, (calls - rec) - (c0 - r0), own - own0, cum - cum0))
    df = pd.DataFrame(rows, columns=["phase", "function", "ncalls", "primitive_calls", "tottime", "cumtime"])
    phase_own = df.groupby("phase")["tottime"].transform("sum")
    df["share_of_phase"] = (df["tottime"] / phase_own.where(phase_own > 0)).fillna(0.0)
    return df.sort_values(["phase", "tottime"], ascending=[True, False], ignore_index=True)


def top_functions(stats: str | os.PathLike[str] | pstats.Stats, n: int = DEFAULT_TOP, sort: str = "cumtime",
                  exclude_profiler: bool = True) -> pd.DataFrame:
    """The ``n`` costliest functions of a pstats file: function, ncalls, primitive_calls, tottime, cumtime (s)."""
    if sort not in ("cumtime", "tottime", "ncalls", "primitive_calls"):
        raise OmniLoaderError(f"cannot sort the top functions by {sort!r}")
    st = stats if isinstance(stats, pstats.Stats) else read_pstats(stats)
    rows = [(function_label(k), nc, cc, tt, ct) for k, (cc, nc, tt, ct, _) in st.stats.items()
            if not (exclude_profiler and _is_profiler_itself(k))]
    df = pd.DataFrame(rows, columns=TOP_COLUMNS)
    return df.sort_values(sort, ascending=False, kind="stable", ignore_index=True).head(n)


def read_pstats(path: str | os.PathLike[str]) -> pstats.Stats:
    path = Path(path)
    if not path.is_file():
        raise OmniLoaderError(f"pstats file not found: {path}")
    try:
        return pstats.Stats(str(path))
    except Exception as exc:
        raise OmniLoaderError(f"not a pstats file: {path} ({exc})") from None


def state_dict_call_counts(stats: str | os.PathLike[str] | pstats.Stats) -> dict[str, int]:
    """Calls of ``torch.nn.Module.state_dict`` in a profile: ``primitive`` and ``ncalls``.

    ``Module.state_dict`` recurses into every child module, so ``ncalls`` counts one call per
    module per state dict built. The *primitive* calls (those not made from inside another
    ``state_dict``) are the number of times a whole state dict was built: the PR's figure.
    """
    st = stats if isinstance(stats, pstats.Stats) else read_pstats(stats)
    primitive = ncalls = 0
    for (file, _, name), (cc, nc, *_rest) in st.stats.items():
        if name == "state_dict" and file.replace(os.sep, "/").endswith(_STATE_DICT_FILE):
            primitive += cc
            ncalls += nc
    return {"primitive": primitive, "ncalls": ncalls}


def state_dict_primitive_calls(stats: str | os.PathLike[str] | pstats.Stats) -> int:
    """How many whole state dicts the profiled code built (top-level ``Module.state_dict`` calls)."""
    return state_dict_call_counts(stats)["primitive"]


def write_top_functions(df: pd.DataFrame, directory: Path, title: str) -> tuple[Path, Path]:
    csv_path, md_path = directory / TOP_FUNCTIONS_CSV, directory / TOP_FUNCTIONS_MD
    df.to_csv(csv_path, index=False)
    shown = df.assign(tottime=df["tottime"] * 1e3, cumtime=df["cumtime"] * 1e3).rename(
        columns={"primitive_calls": "primitive calls", "tottime": "tottime (ms)", "cumtime": "cumtime (ms)"})
    md_path.write_text(f"# {title}\n\nSorted by cumulative time; the CSV holds seconds.\n\n"
                       + _md_table(shown, {"tottime (ms)": "{:.3f}", "cumtime (ms)": "{:.3f}"}))
    return csv_path, md_path


def read_top_functions(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    """The top-functions table back: a CSV path, a variant directory, or an output directory + variant."""
    return _read_csv(path, variant, TOP_FUNCTIONS_CSV)


def read_phase_functions(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    """Own time of every function inside every leaf phase (see :func:`profile_cprofile`)."""
    return _read_csv(path, variant, PHASE_FUNCTIONS_CSV)


def read_torch_ops(path: str | os.PathLike[str], variant: str | None = None) -> pd.DataFrame:
    return _read_csv(path, variant, TORCH_OPS_CSV)


def _read_csv(path: str | os.PathLike[str], variant: str | None, name: str) -> pd.DataFrame:
    p = Path(path)
    if variant:
        p = p / variant
    if p.is_dir():
        p = p / name
    if not p.is_file():
        raise OmniLoaderError(f"{name} not found: {p}")
    return pd.read_csv(p)


def profile_cprofile(snapshot: Any, variant: str, directory: Path, layout: str = "vllm-omni", device: str = "auto",
                     dtype: str = "float32", top: int = DEFAULT_TOP) -> dict[str, Any]:
    """One load under cProfile; writes the pstats, the top-functions table and per-phase functions."""
    from .loader import load_token2wav

    prof = cProfile.Profile()
    with _phase_snapshots(prof) as marks:
        prof.enable()
        try:
            model, result = load_token2wav(snapshot, variant, layout=layout, device=device, dtype=dtype, digest=False)
        finally:
            prof.disable()
    del model
    stats = pstats.Stats(prof)
    pstats_path = directory / f"{variant}.pstats"
    stats.dump_stats(str(pstats_path))
    csv_path, md_path = write_top_functions(top_functions(stats, top), directory,
                                            f"cProfile: top {top} functions of one {variant} load")
    phases = _phase_function_rows(marks)
    phase_path = directory / PHASE_FUNCTIONS_CSV
    phases.to_csv(phase_path, index=False)
    counts = state_dict_call_counts(stats)
    counts["counter"] = result.state_dict_calls
    return {
        "files": {"pstats": pstats_path, "top_functions_csv": csv_path, "top_functions_md": md_path,
                  "phase_functions_csv": phase_path},
        "state_dict_calls": counts,
        "phase_functions": phases,
        "result": result,
    }


def top_costs(phase_functions: pd.DataFrame, shares: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The costliest (phase, function) pairs of the load, as an estimated share of the whole load.

    A function's share of its phase's own time under cProfile, times the phase's share of the
    unprofiled reference load: cProfile slows Python-heavy code more than C code, so the phase
    shares are taken from the load that ran without it.
    """
    share = dict(zip(shares["phase"], shares["share"]))
    df = phase_functions[phase_functions["phase"].isin(share)].copy()
    df["share_of_load"] = df["phase"].map(share) * df["share_of_phase"]
    return df.sort_values("share_of_load", ascending=False, ignore_index=True).head(n)


# --------------------------------------------------------------------------- torch.profiler


def profile_torch(snapshot: Any, variant: str, directory: Path, layout: str = "vllm-omni", device: str = "auto",
                  dtype: str = "float32", top: int = DEFAULT_TOP) -> dict[str, Any]:
    """One load under torch.profiler (CPU, plus CUDA on a GPU): Chrome trace and key_averages table."""
    from torch.profiler import ProfilerActivity, profile

    from .devices import resolve_device
    from .loader import load_token2wav

    on_gpu = resolve_device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with _stderr_to(directory / TORCH_LOG), profile(activities=activities) as prof:
        model, result = load_token2wav(snapshot, variant, layout=layout, device=device, dtype=dtype, digest=False)
    del model
    trace_path = directory / TRACE_JSON
    prof.export_chrome_trace(str(trace_path))
    rows = []
    for e in prof.key_averages():
        row = {"name": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
               "cpu_total_ms": e.cpu_time_total / 1e3}
        if on_gpu:
            row.update(self_gpu_ms=e.self_device_time_total / 1e3, gpu_total_ms=e.device_time_total / 1e3)
        rows.append(row)
    sort = "self_gpu_ms" if on_gpu else "self_cpu_ms"
    ops = pd.DataFrame(rows).sort_values(sort, ascending=False, ignore_index=True)
    csv_path, md_path = directory / TORCH_OPS_CSV, directory / TORCH_OPS_MD
    ops.to_csv(csv_path, index=False)
    fmt = {c: "{:.3f}" for c in ops.columns if c.endswith("_ms")}
    md_path.write_text(f"# torch.profiler: operators of one {variant} load, by {sort.replace('_ms', '')} time\n\n"
                       f"Top {top} of {len(ops)}; the CSV holds all. `phase::` rows are the load's phase ranges.\n\n"
                       + _md_table(ops.head(top), fmt))
    ranges = trace_phase_ranges(trace_path)
    return {"files": {"trace": trace_path, "torch_ops_csv": csv_path, "torch_ops_md": md_path,
                      "torch_log": directory / TORCH_LOG},
            "ops": ops, "phase_ranges": ranges, "result": result}


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Send what C++ code writes to file descriptor 2 into ``path`` for the duration of the block.

    Kineto (torch.profiler's engine) writes ``USDT: … profiler_start`` lines straight to fd 2, with
    no setting to turn them off; in a notebook every one is a red stderr output. They are kept in
    the variant's ``torch-profiler.log`` instead.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
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


# --------------------------------------------------------------------------- py-spy


class PySpyUnavailable(Exception):
    """py-spy is missing or may not trace here; the message is the one line to show."""


def auto_repeat(load_seconds: float, rate: int) -> int:
    """Loads per py-spy worker so that about ``SAMPLES_WANTED`` samples land inside the loads."""
    if load_seconds <= 0:
        return 1
    return max(1, min(MAX_AUTO_REPEAT, math.ceil(SAMPLES_WANTED / rate / load_seconds)))


def record_py_spy(py_spy: str, snapshot_root: str | os.PathLike[str], variant: str, directory: Path,
                  layout: str = "vllm-omni", device: str = "auto", dtype: str = "float32", rate: int = DEFAULT_RATE,
                  native: bool = False, repeat: int = 1, py_spy_svg: bool = False) -> dict[str, Any]:
    """Record a fresh worker process with py-spy: ``speedscope.json`` and ``flame.svg``.

    The flamegraph is drawn from the same samples as the speedscope file (one recording); with
    ``py_spy_svg`` a second worker is recorded in py-spy's own (interactive) flamegraph format.
    Raises :class:`PySpyUnavailable` when py-spy cannot run or may not trace (ptrace), and
    :class:`OmniLoaderError` when the load itself failed in the worker.
    """
    log = directory / PY_SPY_LOG
    log.write_text("")
    _remove([directory / FLAME_SVG, directory / SPEEDSCOPE_JSON])
    args = (py_spy, snapshot_root, variant, directory, log, layout, device, dtype, rate, native, repeat)
    worker = _py_spy_run("speedscope", directory / SPEEDSCOPE_JSON, *args)
    files = {"speedscope": directory / SPEEDSCOPE_JSON}
    if py_spy_svg:
        _py_spy_run("flamegraph", directory / FLAME_SVG, *args)
    else:
        speedscope_to_svg(files["speedscope"], directory / FLAME_SVG,
                          title=f"{variant} load, fresh worker process ({repeat} load(s)), py-spy {rate} Hz")
    files["flamegraph"] = directory / FLAME_SVG
    files["py_spy_log"] = log
    summary = speedscope_summary(files["speedscope"])
    summary.update(rate=rate, native=native, repeat=repeat, py_spy_svg=py_spy_svg,
                   worker_load_seconds=worker.get("phases", {}).get("total"))
    return {"files": files, "summary": summary}


def _py_spy_run(fmt: str, out: Path, py_spy: str, snapshot_root: str | os.PathLike[str], variant: str,
                directory: Path, log: Path, layout: str, device: str, dtype: str, rate: int, native: bool,
                repeat: int) -> dict[str, Any]:
    """``py-spy record --format fmt`` around one worker; returns the worker's JSON result."""
    from .worker import worker_command

    worker_json = directory / f"py-spy-worker-{fmt}.json"
    _remove([worker_json])
    cmd = [py_spy, "record", "--format", fmt, "--output", str(out), "--rate", str(rate)]
    cmd += ["--native"] if native else []
    cmd += ["--", *worker_command(str(snapshot_root), variant, layout, device, dtype, out=str(worker_json),
                                  repeat=repeat), "--no-digest"]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    except OSError as exc:
        raise PySpyUnavailable(f"cannot run py-spy at {py_spy}: {exc.strerror or exc}") from None
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(cmd)}\n[exit {proc.returncode}]\n{proc.stdout}{proc.stderr}\n")
    text = f"{proc.stdout}\n{proc.stderr}"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    last = lines[-1] if lines else "no output"
    if proc.returncode != 0:
        first = next((ln for ln in lines if "error" in ln.lower()), last)
        if any(h in text.lower() for h in _PTRACE_HINTS):
            raise PySpyUnavailable(f"py-spy may not trace processes here (ptrace not permitted: {first}); "
                                   "run as root, or set kernel.yama.ptrace_scope=0 / grant CAP_SYS_PTRACE")
        raise PySpyUnavailable(f"py-spy failed (exit {proc.returncode}): {first}")
    if not worker_json.is_file():
        reason = next((ln for ln in reversed(lines) if "omni-loader worker: error" in ln or "Error" in ln), last)
        raise OmniLoaderError(f"the {variant} load under py-spy failed: {reason}")
    result = json.loads(worker_json.read_text())
    worker_json.unlink()
    if not out.is_file():
        raise PySpyUnavailable(f"py-spy wrote no {fmt} output ({last})")
    return result


def speedscope_to_svg(speedscope: str | os.PathLike[str], svg: str | os.PathLike[str], title: str = "py-spy") -> Path:
    """Draw the load's flamegraph from a speedscope file (see :mod:`omni_loader.flamegraph`: only the
    stacks under ``load_token2wav``; hover for names and shares, click to zoom)."""
    from . import flamegraph

    return flamegraph.svg(flamegraph.build(speedscope, title=title), svg)


def speedscope_samples(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per py-spy sample of a speedscope file: thread, weight (s) and the stack's frame names
    (root first), plus ``stack_files`` as ``file:line`` of each frame."""
    try:
        data = json.loads(Path(path).read_text())
        frames = data["shared"]["frames"]
        rows = []
        for prof in data["profiles"]:
            for sample, weight in zip(prof["samples"], prof["weights"]):
                rows.append((prof.get("name", ""), weight, [frames[i]["name"] for i in sample],
                             [f"{frames[i].get('file')}:{frames[i].get('line')}" for i in sample]))
    except (OSError, json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise OmniLoaderError(f"cannot read speedscope file {path}: {exc}") from None
    return pd.DataFrame(rows, columns=["thread", "weight", "stack", "stack_files"])


def speedscope_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Sample counts: all, inside ``load_token2wav``, and with ``Module.state_dict`` on the stack."""
    df = speedscope_samples(path)
    in_load = df["stack"].map(lambda s: any(f.endswith("load_token2wav") for f in s))
    with_sd = df["stack"].map(lambda s: any(f.split(".")[-1] == "state_dict" for f in s))
    return {"samples": len(df), "load_samples": int(in_load.sum()),
            "state_dict_samples": int((in_load & with_sd).sum())}


# --------------------------------------------------------------------------- one variant, all tools


def profile_variant(snapshot: Any, variant: str, out_dir: str | os.PathLike[str], tools: Iterable[str] = TOOLS,
                    layout: str = "vllm-omni", device: str = "auto", dtype: str = "float32", top: int = DEFAULT_TOP,
                    rate: int = DEFAULT_RATE, native: bool = False, repeat: int | None = None,
                    py_spy: tuple[str | None, str] | None = None, py_spy_svg: bool = False,
                    progress: bool = False) -> VariantProfile:
    """Profile one variant with the chosen tools into ``out_dir/<variant>/`` and write its profile.md."""
    from .loader import load_token2wav

    from .devices import resolve_device

    tools = resolve_tools(tools)
    device = str(resolve_device(device))
    directory = Path(out_dir) / variant
    directory.mkdir(parents=True, exist_ok=True)
    vp = VariantProfile(variant=variant, directory=directory)

    t0 = time.perf_counter()
    model, reference = load_token2wav(snapshot, variant, layout=layout, device=device, dtype=dtype, digest=False)
    del model
    vp.reference = reference.to_dict()
    (directory / LOAD_JSON).write_text(json.dumps(vp.reference, indent=2, default=str))
    vp.files["load"] = directory / LOAD_JSON
    _say(progress, f"[{variant}] reference load (no profiler): {reference.phase_seconds()['total']:.3f} s")

    # Never leave a previous run's output next to this run's: profile.md describes this run only.
    _remove([directory / f"{variant}.pstats"] + [directory / n for n in (
        TOP_FUNCTIONS_CSV, TOP_FUNCTIONS_MD, PHASE_FUNCTIONS_CSV, TRACE_JSON, TORCH_OPS_CSV, TORCH_OPS_MD, FLAME_SVG,
        SPEEDSCOPE_JSON, PY_SPY_LOG, TORCH_LOG)])

    if "cprofile" in tools:
        t = time.perf_counter()
        out = profile_cprofile(snapshot, variant, directory, layout, device, dtype, top)
        vp.files.update(out["files"])
        vp.state_dict_calls = out["state_dict_calls"]
        vp.phase_functions = out["phase_functions"]
        _say(progress, f"[{variant}] cProfile load: {time.perf_counter() - t:.3f} s; Module.state_dict primitive "
                       f"calls {vp.state_dict_calls['primitive']} (ncalls {vp.state_dict_calls['ncalls']})")
    if "torch" in tools:
        t = time.perf_counter()
        out = profile_torch(snapshot, variant, directory, layout, device, dtype, top)
        vp.files.update(out["files"])
        vp.torch_phases = list(out["phase_ranges"]["phase"])
        vp.notes.append(_torch_note(out["ops"], out["phase_ranges"], reference))
        _say(progress, f"[{variant}] torch.profiler load: {time.perf_counter() - t:.3f} s")
    if "py-spy" in tools:
        exe, why = py_spy if py_spy is not None else find_py_spy()
        if exe is None:
            vp.py_spy = {"skipped": why}
        else:
            n = repeat if repeat else auto_repeat(reference.phase_seconds()["total"], rate)
            t = time.perf_counter()
            try:
                out = record_py_spy(exe, snapshot.root, variant, directory, layout, device, dtype, rate, native, n,
                                    py_spy_svg)
            except PySpyUnavailable as exc:
                vp.py_spy = {"skipped": str(exc)}
            else:
                vp.files.update(out["files"])
                vp.py_spy = out["summary"]
                workers = "2 fresh workers" if py_spy_svg else "1 fresh worker"
                _say(progress, f"[{variant}] py-spy: {workers} x {n} load(s), {time.perf_counter() - t:.1f} s, "
                               f"{vp.py_spy['samples']} samples in the speedscope profile")
    vp.files["profile_md"] = write_variant_report(vp, snapshot=snapshot, tools=tools, layout=layout, device=device,
                                                  dtype=dtype)
    _say(progress, f"[{variant}] done in {time.perf_counter() - t0:.1f} s: {directory / PROFILE_MD}")
    return vp


def profile_variants(snapshot: Any, variants: str | Iterable[str] = "both", tools: str | Iterable[str] | None = "all",
                     out_dir: str | os.PathLike[str] = "profile", layout: str = "vllm-omni", device: str = "auto",
                     dtype: str = "float32", top: int = DEFAULT_TOP, rate: int = DEFAULT_RATE, native: bool = False,
                     repeat: int | None = None, py_spy: str | os.PathLike[str] | None = None, py_spy_svg: bool = False,
                     warmup: int = 1, progress: bool = False, on_skip: Callable[[str], None] | None = None) -> dict[str, VariantProfile]:
    """Profile each variant into ``out_dir/<variant>/`` and write ``out_dir/profile.md``.

    ``warmup`` unprofiled loads run first, so that no variant pays for the first load in this process.
    ``repeat`` is the number of loads per py-spy worker (None: enough for ~250 samples).
    When py-spy is missing or may not trace, ``on_skip`` gets one line (default: printed to stderr)
    and the other tools still run. Returns ``{variant: VariantProfile}``.
    """
    from .loader import load_token2wav

    from .devices import resolve_device

    variants = resolve_variants(variants)
    tools = resolve_tools(tools)
    device = str(resolve_device(device))  # 'auto' is resolved once; the files name the device used
    if not hasattr(snapshot, "token2wav_config"):  # a snapshot directory
        from .checkpoint import open_snapshot

        snapshot = open_snapshot(snapshot)
    if top < 1:
        raise OmniLoaderError(f"--top must be at least 1, not {top}")
    if rate < 1:
        raise OmniLoaderError(f"--rate must be a positive number of samples per second, not {rate}")
    if repeat is not None and repeat < 1:
        raise OmniLoaderError(f"--repeat must be at least 1, not {repeat}")
    if warmup < 0:
        raise OmniLoaderError(f"--warmup must be 0 or more, not {warmup}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OmniLoaderError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    skip = on_skip or (lambda line: print(f"omni-loader profile: {line}", file=sys.stderr, flush=True))

    spy: tuple[str | None, str] | None = None
    if "py-spy" in tools:
        spy = find_py_spy(py_spy)
        if spy[0] is None:
            skip(f"{spy[1]}; skipping the flamegraph and speedscope profiles")

    for i in range(warmup):
        t = time.perf_counter()
        model, _ = load_token2wav(snapshot, variants[0], layout=layout, device=device, dtype=dtype, digest=False)
        del model
        _say(progress, f"warm-up load {i + 1}/{warmup} ({variants[0]}): {time.perf_counter() - t:.3f} s")

    profiles: dict[str, VariantProfile] = {}
    for variant in variants:
        vp = profile_variant(snapshot, variant, out, tools, layout, device, dtype, top, rate, native, repeat, spy,
                             py_spy_svg, progress)
        if "skipped" in vp.py_spy and spy is not None and spy[0] is not None:
            skip(f"{vp.py_spy['skipped']}; skipping the flamegraph and speedscope profiles")
            spy = (None, vp.py_spy["skipped"])  # say it once; the next variant would fail the same way
        profiles[variant] = vp
    write_summary_report(profiles, out, snapshot=snapshot, tools=tools, layout=layout, device=device, dtype=dtype)
    return profiles


# --------------------------------------------------------------------------- reports


def _torch_note(ops: pd.DataFrame, ranges: pd.DataFrame, reference: Any) -> str:
    expected = [p.name for p in reference.phases]
    counts = ranges["phase"].value_counts()
    ok = all(counts.get(p, 0) == 1 for p in expected)
    real = ops[~ops["name"].str.startswith("phase::")]
    col = "self_gpu_ms" if "self_gpu_ms" in ops.columns else "self_cpu_ms"
    top3 = ", ".join(f"`{r['name']}` {r[col]:.1f} ms" for _, r in real.head(3).iterrows())
    where = "one `phase::` range per load phase" if ok else f"phase ranges found: {dict(counts)}"
    return f"torch.profiler: {where} in `{TRACE_JSON}`; top operators by {col[:-3].replace('_', ' ')} time: {top3}"


def largest_cost(vp: VariantProfile) -> dict[str, Any]:
    """The largest leaf phase of the reference load and, with cProfile, its costliest function."""
    shares = vp.phase_shares()
    shares = shares[shares["phase"] != OTHER_PHASE].sort_values("share", ascending=False)
    top = shares.iloc[0]
    found: dict[str, Any] = {"phase": top["phase"], "phase_share": float(top["share"]),
                             "phase_seconds": float(top["seconds"])}
    if vp.phase_functions is not None:
        inside = vp.phase_functions[vp.phase_functions["phase"] == top["phase"]]
        if len(inside):
            f = inside.sort_values("tottime", ascending=False).iloc[0]
            found.update(function=f["function"], function_share=float(top["share"] * f["share_of_phase"]))
    return found


def _bottleneck_sentence(vp: VariantProfile) -> str:
    c = largest_cost(vp)
    label = "Next bottleneck of the optimized load" if vp.variant == "optimized" else f"Largest cost of the {vp.variant} load"
    text = f"**{label}:** phase `{c['phase']}`, {_pct(c['phase_share'])} of the load ({c['phase_seconds'] * 1e3:,.1f} ms)"
    faults = _fault_clause(vp, c["phase"], c["phase_seconds"])
    if faults["dominant"]:
        return text + "; " + faults["text"] + "."
    if "function" in c:
        text += f"; inside it the most own time goes to `{c['function']}` (about {_pct(c['function_share'])} of the load)"
    return text + (f"; {faults['text']}" if faults["text"] else "") + "."


def _fault_clause(vp: VariantProfile, phase: str, seconds: float) -> dict[str, Any]:
    """Page faults of ``phase`` in the reference load, priced at this machine's measured cost of a
    first touch: when they account for half the phase or more, they, not the phase's functions, are
    its cost (cProfile attributes the kernel's time to whichever function touched the page)."""
    from .residency import fault_share, first_touch_seconds

    record = next((r for r in vp.reference.get("phase_records", []) if r.get("name") == phase), {})
    minor = int(record.get("minor_faults") or 0)
    if not minor or seconds <= 0:
        return {"dominant": False, "text": ""}
    per_fault = first_touch_seconds()
    share = fault_share(minor, seconds, per_fault)
    text = (f"it took {minor:,} minor page faults (first touches of fresh memory), about {_pct(share)} of the phase "
            f"at {per_fault * 1e6:.2f} µs each as measured on this machine")
    if share >= 0.5:
        text = f"the phase is dominated by page faults: {text}, so the copies are not what costs"
    return {"dominant": share >= 0.5, "text": text}


def _largest_phases(shares: pd.DataFrame, cover: float = 0.8, most: int = 3) -> list[str]:
    ranked = shares[shares["phase"] != OTHER_PHASE].sort_values("share", ascending=False)
    chosen, covered = [], 0.0
    for _, row in ranked.iterrows():
        if len(chosen) >= most or (chosen and covered >= cover):
            break
        chosen.append(row["phase"])
        covered += row["share"]
    return chosen


def _context_lines(snapshot: Any, layout: str, device: str, dtype: str) -> list[str]:
    import platform

    import torch

    root = getattr(snapshot, "root", snapshot)
    source = getattr(snapshot, "source", "?")
    return [f"- checkpoint: `{root}` ({source}); layout {layout}; device {device}; dtype {dtype}",
            (f"- torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPU(s), "
            f"{platform.machine()}")]


def write_variant_report(vp: VariantProfile, snapshot: Any = None, tools: Iterable[str] = TOOLS,
                         layout: str = "vllm-omni", device: str = "auto", dtype: str = "float32") -> Path:
    """``<variant>/profile.md``: where this variant's load spends its time, derived from the files."""
    shares = vp.phase_shares()
    total = vp.reference["phases"]["total"]
    md = [f"# Where the time goes: {vp.variant} load", ""]
    md += _context_lines(snapshot, layout, device, dtype) if snapshot is not None else []
    md += [f"- tools: {', '.join(resolve_tools(tools))}", "",
           f"## Phase shares (unprofiled reference load: {total * 1e3:,.1f} ms)", "",
           _md_table(shares.assign(ms=shares["seconds"] * 1e3, share=shares["share"].map(_pct))[["phase", "ms", "share"]]
                     .sort_values("ms", ascending=False).rename(columns={"ms": "time (ms)"}), {"time (ms)": "{:,.2f}"}),
           _bottleneck_sentence(vp), ""]
    if vp.state_dict_calls is not None:
        c = vp.state_dict_calls
        md += ["## state_dict() calls", "",
               (f"cProfile counts {c['primitive']} primitive (top-level) calls of `torch.nn.Module.state_dict` "
               f"({c['ncalls']} calls including the recursive calls into child modules); the loader's own counter "
               f"says {c['counter']}."), ""]
    if vp.phase_functions is not None:
        md += ["## Top functions by own time inside the largest phases", "",
               ("From cProfile (profiler frames excluded). *share of phase* is the function's part of the own time "
               "measured inside the phase; *≈ share of load* scales it by the phase's share of the unprofiled load."), ""]
        share = dict(zip(shares["phase"], shares["share"]))
        for phase in _largest_phases(shares):
            inside = vp.phase_functions[vp.phase_functions["phase"] == phase].head(8)
            md += [f"### `{phase}`: {_pct(share[phase])} of the load", ""]
            if inside.empty:
                md += ["(no function calls recorded inside this phase)", ""]
                continue
            shown = pd.DataFrame({"function": _code(inside["function"]), "calls": inside["ncalls"],
                                  "own ms (cProfile)": inside["tottime"] * 1e3,
                                  "share of phase": inside["share_of_phase"].map(_pct),
                                  "≈ share of load": (inside["share_of_phase"] * share[phase]).map(_pct)})
            md += [_md_table(shown, {"own ms (cProfile)": "{:,.3f}"}), ""]
        costs = vp.top_costs(10)
        md += ["## Costliest functions of the whole load", "",
               _md_table(pd.DataFrame({"function": _code(costs["function"]), "phase": costs["phase"],
                                       "≈ share of load": costs["share_of_load"].map(_pct)})), ""]
    md += ["## Tools", ""]
    files = {k: v.name for k, v in vp.files.items()}
    if "pstats" in files:
        md.append(f"- cProfile: `{files['pstats']}`, `{TOP_FUNCTIONS_CSV}`/`{TOP_FUNCTIONS_MD}` (top functions by "
                  f"cumulative time), `{PHASE_FUNCTIONS_CSV}` (own time per function per phase)")
    md += [f"- {n}" for n in vp.notes]
    if vp.py_spy.get("skipped"):
        md.append(f"- py-spy: **skipped**: {vp.py_spy['skipped']}")
    elif vp.py_spy:
        s = vp.py_spy
        frac = s["state_dict_samples"] / s["load_samples"] if s["load_samples"] else 0.0
        how = ("two fresh worker processes, one per file" if s["py_spy_svg"]
               else "one fresh worker process; the SVG is drawn from the speedscope samples")
        md.append(f"- py-spy: `{FLAME_SVG}`, `{SPEEDSCOPE_JSON}` from {how} ({s['repeat']} load(s) per worker, "
                  f"the first cold; {s['rate']} Hz{', native frames' if s['native'] else ''}); "
                  f"{s['samples']} samples, {s['load_samples']} inside `load_token2wav`, {s['state_dict_samples']} of "
                  f"them ({_pct(frac)}) with `Module.state_dict` on the stack")
    md.append(f"- reference load: `{LOAD_JSON}`")
    path = vp.directory / PROFILE_MD
    path.write_text("\n".join(md) + "\n")
    return path


def read_summary(out_dir: str | os.PathLike[str], link_from: str | os.PathLike[str] | None = None) -> str:
    """``out_dir/profile.md`` with its relative links rewritten to be relative to ``link_from``.

    The file links to ``baseline/profile.md`` relative to itself; a notebook shows it from its own
    directory (the kernel's working directory, the default ``link_from``), where JupyterLab resolves
    links, so the links are rewritten for that place.
    """
    import re

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


def phase_share_table(profiles: dict[str, VariantProfile]):  # -> pandas Styler
    """Phase times (ms) and shares of each variant's unprofiled reference load, side by side."""
    from .formatting import table

    frame = None
    for variant, vp in profiles.items():
        s = vp.phase_shares().set_index("phase")
        part = pd.DataFrame({f"{variant} (ms)": s["seconds"] * 1e3, f"{variant} share": s["share"]})
        frame = part if frame is None else frame.join(part, how="outer")
    frame = frame.reset_index()
    return table(frame, percent=[c for c in frame.columns if c.endswith(" share")],
                 decimals={c: 2 for c in frame.columns if c.endswith("(ms)")})


def state_dict_call_table(profiles: dict[str, VariantProfile]):  # -> Styler
    """``Module.state_dict`` calls per variant: cProfile's primitive and total calls, the loader's counter."""
    from .formatting import table

    counts = {v: p.state_dict_calls for v, p in profiles.items() if p.state_dict_calls}
    frame = pd.DataFrame(counts).rename(index={"primitive": "primitive calls (whole state dicts)",
                                               "ncalls": "all calls (with recursion)", "counter": "loader's counter"})
    return table(frame, index=True)


def top_function_table(out_dir: str | os.PathLike[str], variant: str, n: int = DEFAULT_TOP):  # -> Styler
    """cProfile's top functions by cumulative time: own and cumulative time in ms, full names."""
    from .formatting import table

    df = read_top_functions(out_dir, variant).head(n)
    return table(df.rename(columns={"primitive_calls": "primitive calls", "tottime": "own", "cumtime": "cumulative"}),
                 seconds=["own", "cumulative"], unit="ms")


def torch_ops_table(out_dir: str | os.PathLike[str], variant: str, n: int = DEFAULT_TOP):  # -> Styler
    """torch.profiler's operators, by self time (ms)."""
    from .formatting import table

    df = read_torch_ops(out_dir, variant).head(n)
    ms = [c for c in df.columns if c.endswith("_ms")]
    df = df.rename(columns={c: c[:-3].replace("_", " ") + " (ms)" for c in ms})
    return table(df, decimals={c: 3 for c in df.columns if c.endswith("(ms)")})


def phase_range_table(trace: str | os.PathLike[str] | dict):  # -> Styler
    """The ``phase::`` ranges of a Chrome trace: start relative to the load (ms) and duration (ms)."""
    from .formatting import table

    ranges = trace_phase_ranges(trace)
    start = ranges["ts_us"].min() if len(ranges) else 0
    shown = pd.DataFrame({"phase": ranges["phase"], "start (ms)": (ranges["ts_us"] - start) / 1e3,
                          "duration (ms)": ranges["dur_us"] / 1e3})
    return table(shown.sort_values("start (ms)", kind="stable"), decimals={"start (ms)": 3, "duration (ms)": 3})


def write_summary_report(profiles: dict[str, VariantProfile], out_dir: str | os.PathLike[str], snapshot: Any = None,
                         tools: Iterable[str] = TOOLS, layout: str = "vllm-omni", device: str = "auto",
                         dtype: str = "float32") -> Path:
    """``out_dir/profile.md``: the variants side by side."""
    md = ["# Where the time goes: " + " vs ".join(profiles), ""]
    md += _context_lines(snapshot, layout, device, dtype) if snapshot is not None else []
    md += [f"- tools: {', '.join(resolve_tools(tools))}; per-variant details in " +
           ", ".join(f"[`{v}/{PROFILE_MD}`]({v}/{PROFILE_MD})" for v in profiles), "",
           "## Phase shares (unprofiled reference loads)", ""]
    table = None
    for variant, vp in profiles.items():
        s = vp.phase_shares().set_index("phase")
        part = pd.DataFrame({f"{variant} (ms)": s["seconds"] * 1e3, f"{variant} share": s["share"].map(_pct)})
        table = part if table is None else table.join(part, how="outer")
    from .loader import LEAF_PHASES

    order = {name: i for i, name in enumerate((*LEAF_PHASES, OTHER_PHASE))}
    table = table.reset_index().sort_values("phase", key=lambda col: col.map(order), ignore_index=True)
    totals = {"phase": "**total**"}
    for variant, vp in profiles.items():
        totals.update({f"{variant} (ms)": vp.reference["phases"]["total"] * 1e3, f"{variant} share": "100.0%"})
    table = pd.concat([table, pd.DataFrame([totals])], ignore_index=True)
    md += [_md_table(table, {c: "{:,.2f}" for c in table.columns if c.endswith("(ms)")}), ""]
    if {"baseline", "optimized"} <= profiles.keys():
        b = profiles["baseline"].reference["phases"]["buffer_discovery"]
        o = profiles["optimized"].reference["phases"]["buffer_discovery"]
        tb, to = (profiles[v].reference["phases"]["total"] for v in ("baseline", "optimized"))
        ratio = f", {b / o:,.0f}× less time" if o > 0 else ""
        change = f"{_pct(abs(tb - to) / tb)} {'less' if to <= tb else 'more'}"
        md += [(f"Buffer discovery: {b * 1e3:,.2f} ms → {o * 1e3:,.2f} ms{ratio}; whole load: "
               f"{tb * 1e3:,.1f} ms → {to * 1e3:,.1f} ms ({change})."), ""]
    lines = []
    for variant, vp in profiles.items():
        if vp.state_dict_calls is not None:
            c = vp.state_dict_calls
            lines.append(f"- {variant}: {c['primitive']} (cProfile primitive calls; {c['ncalls']} with recursion; "
                         f"loader counter {c['counter']})")
    if lines:
        md += ["## Module.state_dict() calls", "", *lines, ""]
    md += ["## Largest costs", ""] + [f"- {_bottleneck_sentence(vp)}" for vp in profiles.values()] + [""]
    if "optimized" in profiles and profiles["optimized"].phase_functions is not None:
        costs = profiles["optimized"].top_costs(5)
        md += ["Costliest functions of the optimized load (cProfile own time, scaled to the unprofiled phase shares):",
               "", _md_table(pd.DataFrame({"function": _code(costs["function"]), "phase": costs["phase"],
                                           "≈ share of load": costs["share_of_load"].map(_pct)})), ""]
    skipped = {vp.py_spy["skipped"] for vp in profiles.values() if vp.py_spy.get("skipped")}
    if skipped:
        md += ["## Skipped", ""] + [f"- py-spy: {s}" for s in sorted(skipped)] + [""]
    path = Path(out_dir) / PROFILE_MD
    path.write_text("\n".join(md))
    return path


# --------------------------------------------------------------------------- command line


def add_command(subparsers: Any) -> None:
    from .cli import _add_checkpoint_args, _add_load_args

    p = subparsers.add_parser("profile", help="profile one load per variant with cProfile, py-spy and torch.profiler",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", choices=VARIANT_CHOICES, default="both", help="variant(s) to profile (default both)")
    p.add_argument("--tool", choices=(*TOOLS, "all"), action="append",
                   help="profiler to run; repeat for several (default all)")
    _add_checkpoint_args(p)
    _add_load_args(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (DIR/<variant>/ and DIR/profile.md)")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N", help=f"rows in the tables (default {DEFAULT_TOP})")
    p.add_argument("--rate", type=int, default=DEFAULT_RATE, metavar="HZ",
                   help=f"py-spy samples per second (default {DEFAULT_RATE})")
    p.add_argument("--native", action="store_true", help="py-spy: also record native (C/C++) frames")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help=f"py-spy: loads per worker process (default: enough for ~{SAMPLES_WANTED} samples, at most "
                        f"{MAX_AUTO_REPEAT})")
    p.add_argument("--py-spy", dest="py_spy", metavar="PATH",
                   help=f"py-spy executable (default ${PY_SPY_ENV}, this Python's bin directory, then PATH)")
    p.add_argument("--py-spy-svg", action="store_true",
                   help="record flame.svg with a second py-spy run in its own interactive format (default: draw it "
                        "from the speedscope samples of the one recording)")
    p.add_argument("--warmup", type=int, default=1, metavar="N", help="unprofiled loads before profiling (default 1)")
    p.set_defaults(func=cmd_profile)


def cmd_profile(args: argparse.Namespace) -> int:
    from .cli import snapshot_from_args

    snapshot = snapshot_from_args(args)
    print(f"profiling {args.variant} on {snapshot.root} ({snapshot.source}), tools: "
          f"{', '.join(resolve_tools(args.tool))}", flush=True)
    profiles = profile_variants(snapshot, args.variant, args.tool, args.out, layout=args.layout, device=args.device,
                                dtype=args.dtype, top=args.top, rate=args.rate, native=args.native,
                                repeat=args.repeat, py_spy=args.py_spy,
                                py_spy_svg=args.py_spy_svg, warmup=args.warmup, progress=True)
    print()
    for variant, vp in profiles.items():
        c = largest_cost(vp)
        calls = vp.state_dict_calls
        print(f"{variant}: largest phase {c['phase']} {_pct(c['phase_share'])}"
              + (f", top function {c['function']} ~{_pct(c['function_share'])}" if "function" in c else "")
              + (f"; Module.state_dict primitive calls {calls['primitive']}" if calls else ""))
        for key, path in vp.files.items():
            print(f"  {key:<20} {path}")
    print(f"summary: {Path(args.out) / PROFILE_MD}")
    return 0
