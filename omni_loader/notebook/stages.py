"""A startup A/B of stage groups, as notebook 06 shows it: start, read the first start, compare, detect.

Why a module of its own: the notebook's cells chained the stage group's commands, ``serve_ab``, the
integrity checks, the run plan's columns and the startup phase's name; here each step is one call
that returns what the cell displays (a path, a table, a sentence), so the notebook reads as the
story and the startup folder can change underneath it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

VARIANTS = ("baseline", "optimized")


def start_stage_groups(out: str | os.PathLike[str], *, size: str = "tiny", stages: int = 3, token2wav_stage: int = 2,
                       simulate_seconds: Sequence[float] = (2.0, 3.0), warmup: int = 1, runs: int = 3,
                       device: str = "cpu", timeout: float = 600.0) -> Path:
    """Start two stage groups in turn (alike but for the Token2Wav stage's loader variant), ``warmup`` +
    ``runs`` starts of each, timed to ``/health`` and logged into ``out`` (``serve-ab`` of two
    ``stage-group`` commands). Returns ``out``."""
    from ..startup.serve_ab import serve_ab
    from ..startup.stage_group import stage_group_commands
    from ..token2wav.checkpoint import resolve_snapshot
    from ..token2wav.options import LoadOptions

    snapshot = resolve_snapshot(size=size)
    base, opt, url = stage_group_commands(snapshot.root, stages=stages, token2wav_stage=token2wav_stage,
                                          simulate_seconds=tuple(simulate_seconds), options=LoadOptions(device=device))
    return serve_ab(base, opt, url, out, warmup=warmup, runs=runs, timeout=timeout, progress=True, device=device)


def measured_starts(out: str | os.PathLike[str]):  # -> DataFrame
    """Each measured start's time to ``/health`` (warm-ups and failed starts left out)."""
    from ..results.integrity import check_results
    from ..startup.one_run import PHASE

    frame = check_results(out).frame
    return frame[(frame["phase"] == PHASE) & ~frame["warmup"].astype(bool) & (frame["status"] == "ok")]


def first_start_log(out: str | os.PathLike[str]) -> Path:
    """The log of the first measured baseline start."""
    starts = measured_starts(out)
    first = starts[starts["variant"] == VARIANTS[0]].iloc[0]
    return Path(out) / "logs" / f"{int(first['run_id'])}-{VARIANTS[0]}.log"


def timeline_sentence(log: str | os.PathLike[str], timeline: Any) -> str:
    """One sentence on a start's timeline: its lines, its lanes and which stage gated readiness."""
    path = timeline.critical_path()
    return (f"**{log}**: {timeline.lines} lines, lanes {', '.join(timeline.lane_names())}. "
            + (f"Critical path: {path.sentence()}" if path else "No stage reported ready."))


def timeline_table(timeline: Any):  # -> Styler
    """The phases of one start, a row each: lane, phase, start and end (seconds from the log's first
    line), duration, whether its extent was reported or inferred, and its line."""
    import pandas as pd

    from ..formatting import table

    rows = pd.DataFrame(timeline.rows())
    rows = rows[rows["kind"] == "phase"][["lane", "phase", "start", "end", "seconds", "source", "line"]]
    return table(rows.reset_index(drop=True), seconds=["seconds"], decimals={"start": 1, "end": 1},
                 caption="Phases of this start (start and end: seconds from the log's first line)")


def stage_comparison_table(out: str | os.PathLike[str]):  # -> Styler
    """Every (stage, phase) both variants have: the medians and the saving in ms (the unit in the header, one number
    a cell, as 01's tables), the saving's share and the kit's verdict in a word; when no row can be a claim for the
    same reason (3 + 3 runs cannot reach p < 0.05), the caption says it once instead of every row."""
    import math

    import pandas as pd

    from ..startup.serve_ab import stage_phase_comparisons
    from ..formatting import table
    from .ab_tables import verdict_word

    def shown(value: float, last: float) -> float:  # what rounds to zero at the decimals shown is 0, never "-0.000"
        return 0.0 if abs(value) < last / 2 else value

    comps = stage_phase_comparisons(out)
    frame = pd.DataFrame([{
        "stage": lane, "phase": phase, "baseline median": c.baseline.median, "optimized median": c.optimized.median,
        "saving": shown(-c.difference, 1e-6),
        "saving (%)": shown(-100 * c.difference / c.baseline.median, 0.1) if c.baseline.median else math.nan,
        "verdict": verdict_word(c)} for lane, phase, c in comps])
    reasons = {c.verdict().split(": ", 1)[-1] for _, _, c in comps}
    caption = "Medians per stage and phase, and the kit's verdict"
    if len(reasons) == 1 and "cannot reach" in next(iter(reasons)):
        caption += f" ({next(iter(reasons)).removesuffix(' (use more runs)')}: no row can be a claim)"
    if frame.empty:
        return table(frame, caption=caption)
    shown = table(frame, seconds=["baseline median", "optimized median", "saving"], unit="ms",
                  decimals={"saving (%)": 1}, caption=caption)
    return shown.set_properties(subset=["stage"], **{"white-space": "nowrap"})  # "stage-0", never "stage-" over "0"


def detectable_sentences(out: str | os.PathLike[str] | None, pr_spread: float = 1.0, pr_runs: int = 5) -> str:
    """What this A/B's starts could detect (from their own spread), and what the PR's design could, at a
    spread of ``pr_spread`` seconds per start with ``pr_runs`` runs a side."""
    from ..startup.detectable import PR_SAVING_S, detectability

    lines = []
    if out is not None:
        starts = measured_starts(out)
        samples = [list(starts[starts["variant"] == v]["seconds"]) for v in VARIANTS]
        if min(len(x) for x in samples) >= 2:
            lines.append(detectability(*samples, saving=PR_SAVING_S).sentence())
        else:
            lines.append(f"{min(len(x) for x in samples)} measured start(s) a side: the spread needs two or more.")
    design = detectability(spread=pr_spread, n=pr_runs, saving=PR_SAVING_S)
    lines.append(f"For the PR's design ({pr_runs} runs a side), at a spread of {pr_spread:g} s per start: "
                 + design.sentence().split(" runs, ", 1)[1])
    return "\n\n".join(lines)


def startup_row(out: str | os.PathLike[str]) -> str:
    """The PR's fourth row, "startup to /health", for this A/B beside the PR's: each variant's measured
    starts in the order they ran, their median, and whether the optimized median is the faster one."""
    from ..formatting import markdown_table, short_duration
    from ..reporting.measurements import load_reference

    starts = measured_starts(out).sort_values("run_id")
    rows, medians = [], {}
    for v in VARIANTS:
        seconds = starts[starts["variant"] == v]["seconds"]
        medians[v] = float(seconds.median()) if len(seconds) else None
        rows.append([v, ", ".join(f"{s:,.2f}" for s in seconds) or "none",
                     f"{medians[v]:,.2f}" if len(seconds) else ""])
    pr = next(m for m in load_reference()["measurements"] if m["measurement"] == "startup_to_health")
    rows.append(["the PR (MI300X, 5 a side)", pr.get("note", ""), f"{pr['baseline']:,.3f} → {pr['optimized']:,.3f}"])
    # One unit for every cell, said in the header: a start is seconds whatever its size (a list reading
    # "10.6 s, 7,397 ms" makes a person compare digits across units).
    table = markdown_table(rows, ["", "starts to /health (s), in the order they ran", "median (s)"], right=(2,))
    b, o = medians["baseline"], medians["optimized"]
    if b is None or o is None:
        return table
    which = "faster" if o < b else "slower"
    return (table + f"\n\nHere the optimized starts' median is {short_duration(abs(b - o))} {which} than the "
            f"baseline's: whether that is the change or the spread is the next section's question.")
