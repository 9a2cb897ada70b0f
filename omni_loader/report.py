"""report.md, rendered only from a saved results directory (runs.csv + metadata.json).

``reproduce`` calls :func:`write_report` at the end, and ``omni-loader report DIR`` calls it at
any later time: the same files always give the same tables.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from .formatting import command_text, duration, mib
from .model import DATA_DIR
from .results import PHASE_COUNTERS, check_results
from .stats import (
    Comparison,
    phrase_change,
    NoiseFloor,
    compare,
    equivalence,
    format_seconds,
    measured,
    memory_verdict,
    noise_floor,
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
    "read_checkpoint": "Read checkpoint into a list",
    "speaker_conditioning": "Speaker conditioning (spk_dict.pt, 1st load)",
    "split_buffers": "Split off persistent buffers",
    "materialise_weights": "Materialise weights and split buffers",  # schema-1 directories
    "load_parameters": "Load parameters",
    "load_buffers": "Load persistent buffers",
    "load_spk_dict": "spk_dict.pt (2nd load)",
    "post_load": "Post-load check and eval()",
    "total": "Whole Token2Wav load",
    "reference_copy": "Reference: strict load_state_dict (after the load)",
}
PR_ROWS = ("state_dict_calls", "buffer_discovery", "weight_loading", "startup_to_health")
# Timed after the load, outside "total": not an A/B row, but the yardstick a phase is held against.
YARDSTICKS = {"reference_copy": "load_parameters"}


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
    for phase in [p for p in LABELS if p in load and p not in YARDSTICKS] + [p for p in load if p not in LABELS]:
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
        return mib(value, 0)
    return duration(value, row_unit)


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
        ["Construction", CONSTRUCT_NOTES.get(spec.get("construct", ""), spec.get("construct", "not recorded"))],
        ["Torch threads per load", _threads(spec)],
        ["Warm-ups", f"{meta.get('warmup')} per variant"],
        ["Repeats", f"{meta.get('repeats')} per variant, order {meta.get('order')}"
                    + ", " + WORKER_NOTES.get(_workers(spec), _workers(spec))],
        ["Command", command_text(meta)],
        ["Started / finished", f"{meta.get('started_at', '?')} / {meta.get('finished_at', meta.get('status', '?'))}"],
    ]
    return _table(["Item", "Value"], rows)


CONSTRUCT_NOTES = {
    "upstream": "upstream: parameters written at construction as vLLM-Omni's constructors do (fused qkv_proj "
                "left empty)",
    "empty": "empty: no parameter written before loading (first touches land in load_parameters)",
    "init": "init: full random init at construction",
}
WORKER_NOTES = {
    "forkserver": "a fresh process per run, forked from a server that imported torch and the model code once",
    "spawn": "a fresh interpreter per run (imports included)",
    "in-process": "in-process (later runs see a warm process)",
}


def _threads(spec: dict[str, Any]) -> str:
    if "threads" not in spec:
        return "not recorded"
    return f"{spec['threads']} (intra-op)" if spec["threads"] else "torch's default"


def _workers(spec: dict[str, Any]) -> str:
    if "workers" in spec:
        return spec["workers"]
    return "in-process" if spec.get("in_process") else "spawn"  # schema 1


def _floor_cell(c: Comparison, floor: NoiseFloor | None) -> str:
    if c.unit != "s" or floor is None or math.isnan(floor.resolvable_fraction):
        return "—"
    return f"±{100 * floor.resolvable_fraction:.1f}% ({'resolved' if floor.resolves(c) else 'below the floor'})"


def measurement_table(comps: list[Comparison], floors: dict[str, NoiseFloor] | None = None) -> str:
    header = ["Measurement", "Baseline median", "Optimized median", "Change", "Ratio",
              "Baseline min–max", "Optimized min–max", "Mann-Whitney p", "95% CI of Δ median", "Verdict"]
    header += ["A/A noise floor"] if floors else []
    rows = []
    for c in comps:
        u = row_unit(c)
        ci = (f"{_fmt(c.ci_low, 's', u)} … {_fmt(c.ci_high, 's', u)}" if c.ci_low is not None else "—")
        rows.append([label(c.phase), _fmt(c.baseline.median, c.unit, u),
                     _fmt(c.optimized.median, c.unit, u),
                     c.change(u), _ratio(c), _spread(c, "baseline"), _spread(c, "optimized"),
                     f"{c.p_value:.3g}" if c.p_value is not None else "—", ci, c.verdict()]
                    + ([_floor_cell(c, floors.get(c.phase))] if floors else []))
    return _table(header, rows)


def noise_floors(frame) -> dict[str, NoiseFloor]:
    """The A/A floor of every phase the A/A benchmark timed (empty without ``--aa``)."""
    aa = measured(frame)
    phases = dict.fromkeys(aa[aa["source"] == "aa"]["phase"])
    return {p: f for p in phases if (f := noise_floor(frame, p)) is not None}


def noise_floor_table(floors: dict[str, NoiseFloor]) -> str:
    rows = []
    for phase, f in floors.items():
        u = time_unit(f.median)
        rows.append([label(phase), f"{f.arm1.n} + {f.arm2.n}", format_seconds(f.arm1.median, u),
                     format_seconds(f.arm2.median, u),
                     f"{format_seconds(min(f.arm1.min, f.arm2.min), u)}–{format_seconds(max(f.arm1.max, f.arm2.max), u)}",
                     format_seconds(f.resolvable_seconds, u), f"±{100 * f.resolvable_fraction:.1f}%"])
    return _table(["Phase", "Runs (arm 1 + arm 2)", "Arm 1 median", "Arm 2 median", "Min–max (both arms)",
                   "Smallest resolvable change", "Relative"], rows)


def yardstick_lines(frame) -> list[str]:
    """``load_parameters`` against a plain strict ``load_state_dict`` of the same tensors, same runs."""
    lines = []
    for yardstick, phase in YARDSTICKS.items():
        for v in ("baseline", "optimized"):
            ref, ours = phase_summary(frame, v, yardstick), phase_summary(frame, v, phase)
            if not ref.n or not ours.n:
                continue
            ratios = [o / r for o, r in zip(ours.samples, ref.samples) if r > 0]
            lines.append(f"- {v}: {label(phase)} {format_seconds(ours.median)} against {label(yardstick)[11:]} "
                         f"{format_seconds(ref.median)} in the same {ours.n} runs: {statistics.median(ratios):.2f}x "
                         f"(per-run ratios {min(ratios):.2f}–{max(ratios):.2f}x)")
    if not lines:
        return []
    return ["### Load parameters against a plain copy", "",
            "After each load (outside its timed phases) the same checkpoint tensors were copied once more into "
            "the same, now resident, model with a strict `load_state_dict`: what copying alone costs on this "
            "machine. The ratio is how much more the loader's own step takes.", "", *lines, ""]


def counters_table(frame) -> str:
    """Medians per phase of the kernel's counters: where first touches land, when the CPU was taken away."""
    from .loader import LEAF_PHASES

    rows = []
    ok = measured(frame)
    ok = ok[ok["source"] == "load"]
    for phase in ("total", *LEAF_PHASES):
        cells = [label(phase)]
        for column in PHASE_COUNTERS:
            for v in ("baseline", "optimized"):
                values = ok[(ok["variant"] == v) & (ok["phase"] == phase)][column].dropna()
                cells.append(f"{values.median():,.0f}" if len(values) else "—")
        rows.append(cells)
    header = ["Phase"] + [f"{name} ({v[:4]}.)" for name in ("Minor faults", "Major faults", "Voluntary switches",
                                                            "Involuntary switches") for v in ("baseline", "optimized")]
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


def headline(comps: list[Comparison], equiv: dict[str, Any], memory: str,
             floors: dict[str, NoiseFloor] | None = None) -> list[str]:
    lines = []
    floors = floors or {}
    for c in comps:
        if c.phase in PR_ROWS:
            u = row_unit(c)
            floor = _floor_cell(c, floors.get(c.phase))
            lines.append(f"- **{LABELS[c.phase]}**: {_fmt(c.baseline.median, c.unit, u)} → "
                         f"{_fmt(c.optimized.median, c.unit, u)} ({c.change(u)}); {c.verdict()}"
                         + (f"; A/A noise floor {floor}" if floor != "—" else "") + ".")
    lines.append(f"- **Equivalence**: {equiv['statement']}.")
    lines.append(f"- **Memory**: {memory}.")
    return lines


BEYOND_ROWS = ("state_dict_calls", "buffer_discovery", "load_parameters", "weight_loading", "total")


def planned_arms(meta: dict[str, Any]) -> list[str]:
    """The variants a benchmark planned (schema 1: the PR's two), then the A/A arms if it had them."""
    spec = meta.get("spec", {})
    arms = list(spec.get("variants") or ("baseline", "optimized"))
    return arms + (["aa-1", "aa-2"] if spec.get("aa") else [])


def beyond_pr_section(frame, meta: dict[str, Any]) -> list[str]:
    """Every variant outside the PR's pair, compared with the benchmark's first variant."""
    spec = meta.get("spec", {})
    arms = list(spec.get("variants") or ("baseline", "optimized"))
    first = arms[0]
    others = [v for v in arms[1:] if {first, v} != {"baseline", "optimized"}]
    if not others:
        return []
    from .variants import variant_from

    custom = {v["name"]: v for v in spec.get("custom_variants", [])}
    rows, notes = [], []
    for v in others:
        for phase in BEYOND_ROWS:
            if phase == "state_dict_calls":
                c = compare(run_summary(frame, first, phase), run_summary(frame, v, phase), unit="calls")
            else:
                c = compare(phase_summary(frame, first, phase), phase_summary(frame, v, phase))
            if not c.baseline.n or not c.optimized.n:
                continue
            u = row_unit(c)
            rows.append([v, label(c.phase), _fmt(c.baseline.median, c.unit, u), _fmt(c.optimized.median, c.unit, u),
                         c.change(u), _ratio(c), _spread(c, "optimized"), c.verdict()])
        base_rss, rss = run_summary(frame, first, "rss_peak_bytes"), run_summary(frame, v, "rss_peak_bytes")
        if base_rss.n and rss.n:
            rows.append([v, "Peak process RSS", _fmt(base_rss.median, "bytes"), _fmt(rss.median, "bytes"),
                         phrase_change(base_rss.median, rss.median, "bytes"), "—",
                         f"{_fmt(rss.min, 'bytes')}–{_fmt(rss.max, 'bytes')}", memory_verdict(base_rss, rss)])
        variant = variant_from(custom[v]) if v in custom else variant_from(v)
        steps = f"discovery `{variant.discovery}`, parameters `{variant.parameters}`"
        notes.append(f"- **{v}**: {steps}. Memory: {variant.memory or 'no change to where parameters live'}.")
    return ["## Beyond the PR", "",
            f"Each other variant against `{first}`, the first of this benchmark's variants, in the same runs "
            "(same alternation, same statistics; equivalence above covers every variant).", "",
            _table(["Variant", "Measurement", f"{first} median", "Variant median", "Change", "Ratio",
                    "Variant min–max", "Verdict"], rows), "", *notes, ""]


def render_report(directory: str | Path) -> str:
    directory = Path(directory)
    check = check_results(directory)  # rows that cannot be trusted are left out, and said so below
    meta, frame = check.metadata, check.frame
    comps = comparisons(frame)
    floors = noise_floors(frame)
    equiv = equivalence(frame, planned_arms(meta))
    mem_table, mem_verdict = memory_table(frame)
    failed = frame[frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    warnings = [f"- {label(c.phase)}: {note}" for c in comps for note in c.notes]
    n = {v: run_summary(frame, v, "state_dict_calls").n for v in ("baseline", "optimized")}
    parts = [
        "# Token2Wav loading: baseline vs optimized buffer discovery",
        "",
        f"vLLM-Omni PR 7061 replaced one `state_dict()` per named buffer with one walk of the module tree. "
        f"This report measures both loader variants: {n['baseline']} + {n['optimized']} measured runs after "
        f"{meta.get('warmup')} warm-up(s) per variant, order {meta.get('order')}; status {meta.get('status')}; "
        f"{check.summary or 'integrity checks found nothing wrong'}.",
        "",
        *([*(f"- Integrity: {p}" for p in check.problems), ""] if check.problems else []),
        *headline(comps, equiv, mem_verdict, floors),
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
        measurement_table(comps, floors),
        "",
        *(["### A/A noise floor", "",
           "The optimized variant in both arms, planned like the A/B runs: any difference between the arms is "
           "noise, so an A/B difference smaller than the floor cannot be told apart from identical loads.", "",
           noise_floor_table(floors), ""] if floors else []),
        *beyond_pr_section(frame, meta),
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
        "### Page faults and context switches per phase",
        "",
        "Medians per run of `getrusage` deltas. Minor faults are first touches of fresh memory (on a CPU, every "
        "4 KiB page of a parameter written for the first time); involuntary switches are the scheduler giving "
        "the CPU to another process: a phase with many of them was slowed by a neighbour, not by its own work.",
        "",
        counters_table(frame),
        "",
        *yardstick_lines(frame),
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
    import sys

    path = write_report(args.directory)
    if not args.quiet:
        print(path.read_text())
    print(f"report: {path}")
    problems = check_results(args.directory).problems
    if args.strict and problems:
        print(f"omni-loader: error: {args.directory}: {len(problems)} integrity problem(s): {' | '.join(problems)}",
              file=sys.stderr)
        return 1
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render report.md and plots from a saved results directory")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the report")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when the integrity checks find anything (torn or duplicated rows, rows off the plan, "
                        "missing runs, a writer still running or dead)")
    p.set_defaults(func=cmd_report)
