"""report.md, rendered only from a saved results directory (runs.csv + metadata.json).

``reproduce`` calls :func:`write_report` at the end, and ``omni-loader report DIR`` calls it at
any later time: the same files always give the same tables.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from .model import DATA_DIR
from .results import read_metadata, read_runs
from .stats import (
    Comparison,
    compare,
    equivalence,
    format_seconds,
    measured,
    memory_verdict,
    phase_summary,
    run_summary,
    time_unit,
)

REPORT_FILE = "report.md"
REFERENCE_FILE = DATA_DIR / "reference" / "pr7061.json"

# The PR's rows first, in its order; then every other phase of the load.
LABELS = {
    "state_dict_calls": "Calls to state_dict()",
    "buffer_discovery": "Buffer discovery",
    "weight_loading": "Token2Wav weight loading",
    "startup_to_health": "Startup to /health",
    "construct": "Construction",
    "speaker_conditioning": "Speaker conditioning (spk_dict.pt, 1st load)",
    "materialise_weights": "Materialise weights and split buffers",
    "load_parameters": "Load parameters",
    "load_buffers": "Load persistent buffers",
    "load_spk_dict": "spk_dict.pt (2nd load)",
    "post_load": "Post-load check and eval()",
    "total": "Whole Token2Wav load",
}
PR_ROWS = ("state_dict_calls", "buffer_discovery", "weight_loading", "startup_to_health")


def load_reference() -> dict[str, Any]:
    return json.loads(REFERENCE_FILE.read_text())


def comparisons(frame) -> list[Comparison]:
    """One comparison per measurement present in the rows: the PR's rows first, then every other
    loader phase, then the figures read from server logs (``server:NAME``)."""
    calls = compare(run_summary(frame, "baseline", "state_dict_calls"),
                    run_summary(frame, "optimized", "state_dict_calls"), unit="calls")
    ok = measured(frame)
    load = list(dict.fromkeys(ok[ok["source"] == "load"]["phase"]))
    server = list(dict.fromkeys(ok[ok["source"] == "server"]["phase"]))
    timed = []
    for phase in [p for p in LABELS if p in load] + [p for p in load if p not in LABELS]:
        timed.append(compare(phase_summary(frame, "baseline", phase), phase_summary(frame, "optimized", phase)))
    for phase in server:
        c = compare(phase_summary(frame, "baseline", phase, "server"), phase_summary(frame, "optimized", phase, "server"))
        timed.append(replace(c, phase=phase if phase == "startup_to_health" else f"server:{phase}"))
    rank = {p: i for i, p in enumerate(PR_ROWS)}
    timed.sort(key=lambda c: (rank.get(c.phase, len(rank)), c.phase.startswith("server:")))
    return [c for c in [calls, *timed] if c.baseline.n and c.optimized.n]


def label(phase: str) -> str:
    if phase.startswith("server:"):
        return f"Server log: {phase.split(':', 1)[1]}"
    return LABELS.get(phase, phase)


def row_unit(c: Comparison) -> str:
    """The time unit of a table row: startup in seconds (as the PR), others by magnitude."""
    return "s" if c.phase == "startup_to_health" else time_unit(c.baseline.median)


def _fmt(value: float, unit: str, row_unit: str | None = None) -> str:
    if unit == "calls":
        return f"{value:g}"
    if unit == "bytes":
        return f"{value / 2**20:,.0f} MiB"
    return format_seconds(value, row_unit)


def _spread(c: Comparison, which: str) -> str:
    s = getattr(c, which)
    if c.unit != "s":
        return f"{_fmt(s.min, c.unit)}–{_fmt(s.max, c.unit)}"
    u = row_unit(c)
    return f"{_fmt(s.min, 's', u)}–{_fmt(s.max, 's', u)} (IQR {_fmt(s.iqr, 's', u)})"


def _ratio(c: Comparison) -> str:
    if c.unit == "calls":
        return "—"
    return "∞" if math.isinf(c.ratio) else f"{c.ratio:.2f}x"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def environment_table(meta: dict[str, Any]) -> str:
    env, ck, spec = meta.get("environment", {}), meta.get("checkpoint", {}), meta.get("spec", {})
    mem = env.get("device_memory_bytes")
    gpu = env.get("gpu_backend")
    rows = [
        ["Model", meta.get("model", "")],
        ["Checkpoint", f"{ck.get('checkpoint_source', '?')}: {ck.get('checkpoint_dir', '')}"],
        ["Device", f"{env.get('device', '')} ({env.get('device_name', '')}"
                   + (f", {mem / 2**30:.0f} GiB" if mem else "") + ")"],
        ["CPU", f"{env.get('cpu', '')} ({env.get('cpu_count', '?')} cores)"],
        ["Memory", f"{env['memory_bytes'] / 2**30:.0f} GiB" if env.get("memory_bytes") else "?"],
        ["PyTorch", env.get("torch", "")],
        ["ROCm (HIP)" if gpu == "rocm" else "CUDA", env.get("rocm_hip") or env.get("cuda") or "none (CPU build)"],
        ["transformers", env.get("transformers", "")],
        ["Python", env.get("python", "")],
        ["omni-loader", f"{env.get('kit_version', '')} ({env.get('kit_commit') or 'no git commit'})"],
        ["Layout / dtype", f"{spec.get('layout', '')} / {spec.get('dtype', '')}"],
        ["Warm-ups", f"{meta.get('warmup')} per variant"],
        ["Repeats", f"{meta.get('repeats')} per variant, order {meta.get('order')}"
                    + (", in-process" if spec.get("in_process") else ", fresh process per run")],
        ["Command", f"`{meta.get('command_line', '')}`"],
        ["Started / finished", f"{meta.get('started_at', '?')} / {meta.get('finished_at', meta.get('status', '?'))}"],
    ]
    return _table(["Item", "Value"], rows)


def measurement_table(comps: list[Comparison]) -> str:
    header = ["Measurement", "Baseline median", "Optimized median", "Change", "Ratio",
              "Baseline min–max", "Optimized min–max", "Mann-Whitney p", "95% CI of Δ median", "Verdict"]
    rows = []
    for c in comps:
        u = row_unit(c)
        ci = (f"{_fmt(c.ci_low, 's', u)} … {_fmt(c.ci_high, 's', u)}" if c.ci_low is not None else "—")
        rows.append([label(c.phase), _fmt(c.baseline.median, c.unit, u),
                     _fmt(c.optimized.median, c.unit, u),
                     c.change(u), _ratio(c), _spread(c, "baseline"), _spread(c, "optimized"),
                     f"{c.p_value:.3g}" if c.p_value is not None else "—", ci, c.verdict()])
    return _table(header, rows)


def reference_table(comps: list[Comparison], reference: dict[str, Any]) -> str:
    mine = {c.phase: c for c in comps}
    rows = []
    for ref in reference["measurements"]:
        c = mine.get(ref["measurement"])
        unit = "calls" if ref["unit"] == "calls" else "s"
        pr_ratio = "—" if unit == "calls" else f"{ref['baseline'] / ref['optimized']:.2f}x"
        pr_u = time_unit(ref["baseline"])
        u = row_unit(c) if c else None
        rows.append([ref["label"], _fmt(ref["baseline"], unit, pr_u), _fmt(ref["optimized"], unit, pr_u), pr_ratio,
                     _fmt(c.baseline.median, unit, u) if c else "not measured",
                     _fmt(c.optimized.median, unit, u) if c else "not measured", _ratio(c) if c else "—"])
    return _table(["Measurement", "PR baseline", "PR optimized", "PR ratio", "This run baseline",
                   "This run optimized", "This run ratio"], rows)


def attribution_table(frame) -> str:
    from .loader import LEAF_PHASES

    rows = []
    totals = {v: phase_summary(frame, v, "total").median for v in ("baseline", "optimized")}
    if any(math.isnan(t) for t in totals.values()):
        return "No loader runs in this directory."
    u = time_unit(max(totals.values()))
    for phase in LEAF_PHASES:
        cells = [LABELS.get(phase, phase)]
        for v in ("baseline", "optimized"):
            s = phase_summary(frame, v, phase)
            share = 100 * s.median / totals[v] if s.n and totals[v] else math.nan
            cells += [format_seconds(s.median, u), f"{share:.1f}%"]
        rows.append(cells)
    return _table(["Phase", "Baseline median", "Share", "Optimized median", "Share"], rows)


def memory_table(frame) -> tuple[str, str]:
    rows, verdicts = [], []
    for column, label in (("rss_peak_bytes", "Peak process RSS"), ("device_peak_bytes", "Peak device memory")):
        base, opt = run_summary(frame, "baseline", column), run_summary(frame, "optimized", column)
        if not base.n or not opt.n:
            continue
        verdict = memory_verdict(base, opt)
        rows.append([label, _fmt(base.median, "bytes"), f"{_fmt(base.min, 'bytes')}–{_fmt(base.max, 'bytes')}",
                     _fmt(opt.median, "bytes"), f"{_fmt(opt.min, 'bytes')}–{_fmt(opt.max, 'bytes')}", verdict])
        verdicts.append(f"{label}: {verdict}")
    table = _table(["Memory", "Baseline median", "Baseline min–max", "Optimized median", "Optimized min–max",
                    "Verdict"], rows)
    return table, "; ".join(verdicts) or "not measured"


def headline(comps: list[Comparison], equiv: dict[str, Any], memory: str) -> list[str]:
    lines = []
    for c in comps:
        if c.phase in PR_ROWS:
            u = row_unit(c)
            lines.append(f"- **{LABELS[c.phase]}**: {_fmt(c.baseline.median, c.unit, u)} → "
                         f"{_fmt(c.optimized.median, c.unit, u)} ({c.change(u)}); {c.verdict()}.")
    lines.append(f"- **Equivalence**: {equiv['statement']}.")
    lines.append(f"- **Memory**: {memory}.")
    return lines


def render_report(directory: str | Path) -> str:
    directory = Path(directory)
    meta = read_metadata(directory)
    frame = read_runs(directory)
    comps = comparisons(frame)
    equiv = equivalence(frame)
    mem_table, mem_verdict = memory_table(frame)
    failed = frame[frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    warnings = [f"- {label(c.phase)}: {note}" for c in comps for note in c.notes]
    n = {v: run_summary(frame, v, "state_dict_calls").n for v in ("baseline", "optimized")}
    parts = [
        "# Token2Wav loading: baseline vs optimized buffer discovery",
        "",
        f"vLLM-Omni PR 7061 replaced one `state_dict()` per named buffer with one walk of the module tree. "
        f"This report measures both loader variants: {n['baseline']} + {n['optimized']} measured runs after "
        f"{meta.get('warmup')} warm-up(s) per variant, order {meta.get('order')}; status {meta.get('status')}.",
        "",
        *headline(comps, equiv, mem_verdict),
        "",
        "## Environment",
        "",
        environment_table(meta),
        "",
        "## Measurements",
        "",
        "Medians of the measured runs; spread as min–max and interquartile range; Mann-Whitney U (two-sided) "
        "and a percentile bootstrap interval for median(optimized) − median(baseline). Where the min–max ranges "
        "overlap no stable difference is claimed, as the PR did for startup.",
        "",
        measurement_table(comps),
        "",
        "## Verdicts",
        "",
        *[f"- {label(c.phase)}: {c.verdict()}" for c in comps],
        f"- Equivalence: {equiv['statement']}",
        f"- Memory: {mem_verdict}",
        *([f"- Failed runs: {len(failed)} ({'; '.join(f'run {r.run_id} {r.variant}: {r.error}' for r in failed.itertuples())})"]
          if len(failed) else ["- Failed runs: none"]),
        "",
        *(["### Spread warnings", "", *warnings, ""] if warnings else []),
        "## Memory",
        "",
        mem_table,
        "",
        "## Against the PR's figures",
        "",
        "The PR measured Qwen2.5-Omni-3B on one AMD MI300X (ROCm 7.2, PyTorch 2.12) inside vLLM-Omni; absolute "
        "times differ across machines, so compare the ratios.",
        "",
        reference_table(comps, load_reference()),
        "",
        "## Where the load time goes",
        "",
        attribution_table(frame),
        "",
    ]
    parts += _plots_section(directory, frame, comps)
    parts += _profiles_section(directory)
    return "\n".join(parts) + "\n"


def _plots_section(directory: Path, frame, comps: list[Comparison]) -> list[str]:
    from .plots import write_plots

    paths = write_plots(directory, frame, comps, load_reference())
    lines = ["## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(directory).as_posix()})" for p in paths if p.suffix == ".png"]
    return lines + [""]


def _profiles_section(directory: Path) -> list[str]:
    """Links to ``reproduce --profile`` output: the attribution first, then every file per variant."""
    profiles = directory / "profiles"
    if not profiles.is_dir():
        return []
    lines = ["## Profiles", ""]
    if (profiles / "profile.md").is_file():
        lines += ["Where the time goes, both variants: [profiles/profile.md](profiles/profile.md)", ""]
    for variant_dir in sorted(p for p in profiles.iterdir() if p.is_dir()):
        files = sorted(p for p in variant_dir.iterdir() if p.suffix in {".md", ".svg", ".json", ".pstats", ".csv"})
        links = ", ".join(f"[{p.name}]({p.relative_to(directory).as_posix()})" for p in files)
        lines.append(f"- {variant_dir.name}: {links}")
    return lines + [""]


def write_report(directory: str | Path) -> Path:
    directory = Path(directory)
    path = directory / REPORT_FILE
    path.write_text(render_report(directory))
    return path


def cmd_report(args: Any) -> int:
    path = write_report(args.directory)
    if not args.quiet:
        print(path.read_text())
    print(f"report: {path}")
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render report.md and plots from a saved results directory")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the report")
    p.set_defaults(func=cmd_report)
