"""The unprofiled loads every phase share comes from: fresh worker processes, as ``reproduce`` runs them.

A profiler distorts what it measures, and a load in a long-lived process pays host faults a server restart does
not, so the reference is a small benchmark of its own (``DIR/reference/``) and each variant's reference load its
*median run*: a real run, whose phases add up, with each phase's median over the runs beside it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from ..names import VARIANTS
from ..token2wav.options import LoadOptions

REFERENCE_DIR = "reference"
COUNT_FIELDS = ("state_dict_calls", "weights_loaded", "persistent_buffers")
RECORD_FIELDS = ("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches", "rss_peak_bytes")


def reference_spec(snapshot: Any, variants: tuple[str, ...], options: LoadOptions, *, runs: int, warmup: int) -> Any:
    """The reference benchmark's spec (its ``plan()``: the runs it makes); one variant alone runs beside the other."""
    from ..bench.runner import benchmark_spec

    arms = variants if len(set(variants)) > 1 else (*variants, *(v for v in VARIANTS if v not in variants))[:2]
    return benchmark_spec(snapshot, options, variants=arms, warmup=warmup, runs=runs, order="blocks",
                          workers="forkserver")


def reference_loads(snapshot: Any, variants: tuple[str, ...], options: LoadOptions, out: Path, *, runs: int,
                    warmup: int, on_run: Callable[[int, int, Any], None] | None = None) -> dict[str, dict[str, Any]]:
    """Benchmark ``variants`` unprofiled into ``out/reference/`` (replacing a previous one) and return each one's
    median run; ``on_run(k, total, run)`` is called as the k-th of the ``total`` runs starts."""
    from ..bench.runner import run_benchmark
    from ..results.integrity import check_results

    directory = out / REFERENCE_DIR
    if directory.is_symlink() or (directory.exists() and not directory.is_dir()):
        raise OmniLoaderError(f"{directory} is a link or a file; the reference loads need a directory of their own")
    if directory.exists():
        shutil.rmtree(directory)
    spec = reference_spec(snapshot, variants, options, runs=runs, warmup=warmup)
    plan, started = spec.plan(), {}

    def on_start(run: Any, _pid: int) -> None:
        started.setdefault(run.run_id, len(started) + 1)
        if on_run is not None:
            on_run(started[run.run_id], len(plan), run)

    run_benchmark(spec, directory, snapshot=snapshot, progress=False, on_start=on_start)
    checked = check_results(directory)
    return {v: median_run(checked.frame, v, options, directory) for v in variants}


def median_run(frame: Any, variant: str, options: LoadOptions, directory: Path) -> dict[str, Any]:
    """The measured run of ``variant`` whose whole load is the median (the lower of an even count: a real run),
    as a load result's dict with ``reference`` (which run, how many, every run's total, each phase's median)."""
    ok = frame[(frame["variant"] == variant) & ~frame["warmup"].astype(bool) & (frame["status"] == "ok")]
    totals = ok[ok["phase"] == "total"].sort_values("seconds", kind="stable")
    if totals.empty:
        failed = frame[(frame["variant"] == variant) & (frame["status"] != "ok")]["error"]
        why = f": {failed.iloc[0]}" if len(failed) else ""
        raise OmniLoaderError(f"no reference load of {variant} succeeded{why} (see {directory})")
    chosen = int(totals.iloc[(len(totals) - 1) // 2]["run_id"])
    rows = ok[ok["run_id"] == chosen]
    first = rows.iloc[0]
    return {
        "variant": variant, **options.to_dict(),  # every load option, as a load result names them
        "phases": {r["phase"]: float(r["seconds"]) for _, r in rows.iterrows()},
        "phase_records": [{"name": r["phase"], "parent": r["parent"] or None, "seconds": float(r["seconds"]),
                           **{k: _number(r.get(k)) for k in RECORD_FIELDS}} for _, r in rows.iterrows()],
        **{k: _number(first.get(k)) for k in COUNT_FIELDS}, "digest": first.get("digest"),
        "reference": {"run_id": chosen, "runs": len(totals), "totals": [float(s) for s in totals["seconds"]],
                      "medians": {k: float(v) for k, v in ok.groupby("phase")["seconds"].median().items()},
                      "how": "the median run of fresh worker processes (blocks order), as reproduce runs them",
                      "results": str(directory)},
    }


def _number(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None
