"""Every number a notebook's sentences carry, checked against the files its run saved.

Why: a notebook's prose is the part a reader believes, and a sentence typed once (or computed from the
wrong column) stays in place while the numbers beside it change. ``test_notebooks`` executes each notebook
once; :func:`check` then finds each number-carrying sentence the notebook printed and recomputes its numbers
here, from the saved ``runs.csv``, ``fits.csv`` and ``.wav`` with pandas and the standard library, not
through the kit's own summaries. A shown number agrees when it is the true value rounded to the digits
shown (half a unit of its last digit).

A check that finds none of the sentences it knows fails too: a renamed sentence must be re-checked here.
"""

from __future__ import annotations

import json
import math
import re
import wave
from collections.abc import Callable
from pathlib import Path

import nbformat
import pandas as pd
import scipy.stats

NUM = r"[−-]?\d[\d,]*(?:\.\d+)?"
DURATION = rf"({NUM})[ \u00a0](ns|µs|ms|s)\b"  # a no-break space where prose keeps a number with its unit
REFERENCE = Path(__file__).resolve().parent.parent / "data" / "reference" / "pr7061.json"
SCALE = {"ns": 1e-9, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def shown_value(text: str) -> tuple[float, float]:
    """A number as printed ("1,234.5", "−4.813") and half a unit of its last digit."""
    plain = text.replace(",", "").replace("−", "-")
    decimals = len(plain.split(".")[1]) if "." in plain else 0
    return float(plain), 0.5 * 10.0 ** -decimals


def agrees(text: str, true: float, scale: float = 1.0) -> bool:
    """``text`` (a number shown in units of ``scale``) is ``true`` rounded to the digits shown."""
    value, half = shown_value(text)
    return math.isfinite(true) and abs(value - true / scale) <= half * (1 + 1e-9) + 1e-12


def agrees_duration(number: str, unit: str, seconds: float) -> bool:
    return agrees(number, seconds, SCALE[unit])


def shown_text(nb: nbformat.NotebookNode) -> str:
    """What the executed notebook printed and displayed as text: streams, Markdown and plain text."""
    parts = []
    for cell in nb.cells:
        for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
            parts.append(o.get("text", ""))
            data = o.get("data", {})
            parts.append(str(data.get("text/markdown", "")))
    return "\n".join(parts)


def measured(runs_csv: Path) -> pd.DataFrame:
    """The measured runs of a ``runs.csv``: warm-ups and failed runs left out."""
    frame = pd.read_csv(runs_csv)
    warm = frame["warmup"].astype(str).str.lower() == "true"
    return frame[~warm & (frame["status"] == "ok")]


def medians(frame: pd.DataFrame, phase: str) -> dict[str, float]:
    return frame[frame["phase"] == phase].groupby("variant")["seconds"].median().to_dict()


class Findings:
    """Problems found, and how many sentences were checked."""

    def __init__(self, name: str) -> None:
        self.name, self.problems, self.checked = name, [], 0

    def expect(self, ok: bool, sentence: str, what: str) -> None:
        self.checked += 1
        if not ok:
            self.problems.append(f"{self.name}: {what}: {sentence.strip()[:300]!r}")


def _saving_sentences(f: Findings, text: str, frame: pd.DataFrame) -> None:
    """report.md's opening rows: ``**Buffer discovery**: 28.561 ms → 4.930 ms (23.630 ms faster, 82.74%)``."""
    for label, phase in (("Buffer discovery", "buffer_discovery"), ("Token2Wav weight loading", "weight_loading")):
        m = medians(frame, phase)
        for s in re.finditer(rf"\*\*{label}\*\*: {DURATION} → {DURATION} \({DURATION} (faster|slower), ({NUM})%\)",
                             text):
            b, o = m["baseline"], m["optimized"]
            f.expect(agrees_duration(s[1], s[2], b) and agrees_duration(s[3], s[4], o), s[0], f"{phase} medians")
            f.expect(agrees_duration(s[5], s[6], abs(b - o)) and s[7] == ("faster" if o < b else "slower"), s[0],
                     f"{phase} saving")
            f.expect(agrees(s[8], 100 * abs(b - o) / b), s[0], f"{phase} saving's share")
    calls = frame.groupby("variant")["state_dict_calls"].max().to_dict()
    for s in re.finditer(r"\*\*Calls to state_dict\(\)\*\*: (\d+) → (\d+)", text):
        f.expect((int(s[1]), int(s[2])) == (calls["baseline"], calls["optimized"]), s[0], "state_dict() calls")


def _parts_sentences(f: Findings, text: str, frame: pd.DataFrame) -> None:
    """``This run: weight loading A → B (Rx), of which buffer discovery C → D and the rest E → F.``"""
    w, d = medians(frame, "weight_loading"), medians(frame, "buffer_discovery")
    for s in re.finditer(rf"This run: weight loading {DURATION} → {DURATION} \(({NUM})×\), of which buffer discovery "
                         rf"{DURATION} → {DURATION} and the rest {DURATION} → {DURATION}\.", text):
        wb, wo, db, do = w["baseline"], w["optimized"], d["baseline"], d["optimized"]
        ok = all(agrees_duration(n, u, v) for n, u, v in ((s[1], s[2], wb), (s[3], s[4], wo), (s[6], s[7], db),
                                                          (s[8], s[9], do), (s[10], s[11], wb - db),
                                                          (s[12], s[13], wo - do)))
        f.expect(ok and agrees(s[5], wb / wo), s[0], "weight loading taken apart")


def _warm_cold(f: Findings, text: str, results: Path) -> None:
    """``**Warm**: the fix saves X of Token2Wav weight loading, P% of a Y whole baseline load``, and the same for cold;
    then buffer discovery's saving in each, and how far the traversal's and the rest's savings differ between them."""
    said, walks = {}, {}
    for s in re.finditer(rf"\*\*(Warm|Cold)\*\*(?: \([^)]*\))?: the fix saves {DURATION} of Token2Wav weight loading, "
                         rf"({NUM})% of a {DURATION} whole baseline load", text):
        frame = measured(results / ("runs.csv" if s[1] == "Warm" else "cold/runs.csv"))
        w, t = medians(frame, "weight_loading"), medians(frame, "total")
        saving = w["baseline"] - w["optimized"]
        d = medians(frame, "buffer_discovery")
        said[s[1]] = (saving, t["baseline"])
        walks[s[1]] = d["baseline"] - d["optimized"]
        f.expect(agrees_duration(s[2], s[3], saving) and agrees_duration(s[5], s[6], t["baseline"])
                 and agrees(s[4], 100 * saving / t["baseline"]), s[0], f"{s[1].lower()} saving")
    for s in re.finditer(rf"the fix saves {DURATION} (more|less) cold than warm, ({NUM})% of the cold load against "
                         rf"({NUM})% of the warm one", text):  # the two side by side: no "same saving" it is not
        (ws, wt), (cs, ct) = said.get("Warm", (0, 1)), said.get("Cold", (0, 1))
        f.expect(agrees_duration(s[1], s[2], abs(cs - ws)) and s[3] == ("more" if cs > ws else "less")
                 and agrees(s[4], 100 * cs / ct) and agrees(s[5], 100 * ws / wt), s[0], "cold against warm")
    for s in re.finditer(rf"A cold load takes ({NUM})× the warm one \({DURATION} (longer|shorter)\)", text):
        wt, ct = said.get("Warm", (0, 1))[1], said.get("Cold", (0, 1))[1]  # 01 ran "-101.414 ms more" once
        f.expect(agrees(s[1], ct / wt) and agrees_duration(s[2], s[3], abs(ct - wt))
                 and s[4] == ("longer" if ct > wt else "shorter"), s[0], "the cold load against the warm one")
    for s in re.finditer(rf"Buffer discovery alone, the traversal the fix removes, saves {DURATION} warm and {DURATION} "
                         rf"cold: between the two conditions the traversal's saving differs by {DURATION}, the rest of "
                         rf"Token2Wav weight loading's by {DURATION}", text):
        (ws, _), (cs, _) = said.get("Warm", (0, 1)), said.get("Cold", (0, 1))
        ww, cw = walks.get("Warm", 0.0), walks.get("Cold", 0.0)
        f.expect(agrees_duration(s[1], s[2], ww) and agrees_duration(s[3], s[4], cw)
                 and agrees_duration(s[5], s[6], abs(cw - ww)) and agrees_duration(s[7], s[8], abs((cs - ws) - (cw - ww))),
                 s[0], "the traversal's saving warm and cold")


def _shared_phases(f: Findings, text: str, frame: pd.DataFrame) -> None:
    """The line under where-the-time-goes: the shared phases that differ (their medians), or the runs too few to tell."""
    from omni_loader.reporting.measurements import LABELS

    words = {text: phase for phase, text in LABELS.items()}
    for s in re.finditer(r"cannot be told from (\d+) \+ (\d+) runs", text):
        n = frame[frame["phase"] == "total"].groupby("variant")["run_id"].nunique()
        f.expect((int(s[1]), int(s[2])) == (n["baseline"], n["optimized"]), s[0], "the runs of each variant")
    for s in re.finditer(r"here (\d+) of the (\d+) phases both variants run unchanged differs? too"
                         r"(?:: (.*?)\. | by the kit's test \((.*?)\), each by less)", text):
        parts = [re.fullmatch(rf"(.+) {DURATION} → {DURATION}", part) for part in (s[3] or s[4]).split("; ")]
        f.expect(all(parts) and len(parts) == int(s[1]) and all(
            agrees_duration(m[2], m[3], medians(frame, words[m[1]])["baseline"])
            and agrees_duration(m[4], m[5], medians(frame, words[m[1]])["optimized"]) for m in parts), s[0],
            "the shared phases' medians")


def _discovery_ratios(f: Findings, text: str, frame: pd.DataFrame, first: str) -> None:
    """The lines under a discovery-ratio table (``kit.discovery_ratios``) whose first row is this run: the PR's
    ratio from its table, this run's from runs.csv, and the three factors that multiply to their quotient."""
    reference = json.loads(REFERENCE.read_text())
    pr = {m["measurement"]: m for m in reference["measurements"]}
    disc = medians(frame, "buffer_discovery")
    calls = frame[(frame["phase"] == "total") & (frame["variant"] == "baseline")]["state_dict_calls"].median()
    for s in re.finditer(rf"\*\*the PR \(its table\)\*\*: ({NUM})× against {re.escape(first)}'s ({NUM})×, ({NUM}) times it\. "
                         rf".*? the factor is ({NUM}) \(B: (\d+) against (\d+)", text):
        ours = disc["baseline"] / disc["optimized"]
        theirs = pr["buffer_discovery"]["baseline"] / pr["buffer_discovery"]["optimized"]
        f.expect(agrees(s[1], theirs) and agrees(s[2], ours) and agrees(s[3], theirs / ours)
                 and int(s[5]) == pr["state_dict_calls"]["baseline"] and int(s[6]) == calls
                 and agrees(s[4], pr["state_dict_calls"]["baseline"] / calls), s[0], "the discovery ratios")


def _notebook_01(f: Findings, text: str, results: Path) -> None:
    frame = measured(results / "runs.csv")
    _discovery_ratios(f, text, frame, "this run")
    _shared_phases(f, text, frame)
    _saving_sentences(f, text, frame)
    _parts_sentences(f, text, frame)
    _warm_cold(f, text, results)


def median_run(frame: pd.DataFrame, variant: str) -> pd.Series:
    """Each phase's seconds in ``variant``'s median run: the run whose whole load is the median (the lower of
    the two middle ones for an even count), as a profile's phase shares are read (one real run, whose
    phases add up)."""
    totals = frame[(frame["variant"] == variant) & (frame["phase"] == "total")].sort_values("seconds")
    run = totals["run_id"].iloc[(len(totals) - 1) // 2]
    return frame[(frame["variant"] == variant) & (frame["run_id"] == run)].set_index("phase")["seconds"]


def _notebook_02(f: Findings, text: str, results: Path) -> None:
    """The profile's phase shares: each variant's median unprofiled run (``reference/runs.csv``)."""
    from omni_loader.names import LEAF_PHASES
    from omni_loader.reporting.measurements import LABELS

    frame = measured(results / "reference" / "runs.csv")
    run = {v: median_run(frame, v) for v in ("baseline", "optimized")}
    # discovery as each variant's median over its runs (the ratio table's figures), the whole load as the median runs'
    med = {v: frame[frame["variant"] == v].groupby("phase")["seconds"].median() for v in ("baseline", "optimized")}
    for s in re.finditer(rf"Buffer discovery, each variant's median of its \d+ runs [^:]*: {DURATION} → {DURATION}, "
                         rf"({NUM})× less time; whole load, the median runs: {DURATION} → {DURATION}", text):
        b, o = run["baseline"], run["optimized"]
        d = med["baseline"]["buffer_discovery"], med["optimized"]["buffer_discovery"]
        f.expect(all(agrees_duration(n, u, v) for n, u, v in (
            (s[1], s[2], d[0]), (s[3], s[4], d[1]), (s[6], s[7], b["total"]), (s[8], s[9], o["total"])))
            and agrees(s[5], d[0] / d[1]), s[0], "discovery's medians and the whole load of the median runs")
    phase_of = {LABELS.get(p, p): p for p in LEAF_PHASES}  # a phase is said in words only
    for s in re.finditer(rf"\*\*(?:Largest cost of the (\w+) load|Next bottleneck of the (optimized) load):\*\* "
                         rf"(.+?), ({NUM})% of the load \(({NUM}) ms\)", text):
        variant, phase = s[1] or s[2], phase_of.get(s[3])
        f.expect(phase is not None, s[0], f"{s[3]!r} is a load phase in words")
        leaves = run[variant][[p for p in run[variant].index if p in LEAF_PHASES]]
        f.expect(leaves.idxmax() == phase, s[0], f"the largest phase is {leaves.idxmax()} ({LABELS[leaves.idxmax()]})")
        if phase not in leaves:
            continue
        f.expect(agrees(s[5], leaves[phase], 1e-3) and agrees(s[4], 100 * leaves[phase] / run[variant]["total"]), s[0],
                 "the phase's seconds and share")
    # The phase the fix does not touch (the PR's pair changes buffer discovery only) whose median runs differ most.
    b, o = run["baseline"], run["optimized"]
    untouched = [p for p in LEAF_PHASES if p in b.index and p in o.index and p != "buffer_discovery"]
    for s in re.finditer(rf"Of the phases the loader change does not touch, (.+?) differs most between the two median "
                         rf"runs: {DURATION} \(baseline\) against {DURATION} \(optimized\), {DURATION} (more|less) in "
                         rf"the optimized run(?:, (more|less) than Buffer discovery's (saving|difference) of {DURATION})?",
                         text):
        phase = phase_of.get(s[1])
        most = max(untouched, key=lambda p: abs(o[p] - b[p]))
        f.expect(phase == most, s[0], f"the untouched phase whose medians differ most is {most}")
        if phase != most:
            continue
        gap, saving = o[phase] - b[phase], b["buffer_discovery"] - o["buffer_discovery"]
        f.expect(agrees_duration(s[2], s[3], b[phase]) and agrees_duration(s[4], s[5], o[phase])
                 and agrees_duration(s[6], s[7], abs(gap)) and s[8] == ("more" if gap > 0 else "less"), s[0],
                 "the phase's two median runs and their difference")
        f.expect(s[9] is not None and s[9] == ("more" if abs(gap) > abs(saving) else "less")
                 and agrees_duration(s[11], s[12], abs(saving)), s[0], "against buffer discovery's saving")
    # Under torch.profiler: each variant's phase:: ranges (trace.json) and operators' self times (torch_ops.csv).
    for s in re.finditer(rf"Under torch.profiler the (\w+) load was the slower one: {DURATION} against the (\w+) "
                         rf"load's {DURATION}, most of the gap in (.+?) \({DURATION} against {DURATION}\), and of the "
                         rf"operators `(.+?)`'s self (?:CPU|GPU) time differed most that way \({DURATION} against "
                         rf"{DURATION}\)", text):
        ranges, ops = {}, {}
        for v in (s[1], s[4]):
            events = json.loads((results / v / "trace.json").read_text())
            events = events.get("traceEvents", []) if isinstance(events, dict) else events
            spans = [(e["name"][len("phase::"):], e["dur"] / 1e6) for e in events
                     if str(e.get("name", "")).startswith("phase::") and e.get("ph") == "X"
                     and e.get("cat") == "user_annotation"]
            ranges[v] = pd.DataFrame(spans, columns=["phase", "s"]).groupby("phase")["s"].sum()
            frame = pd.read_csv(results / v / "torch_ops.csv")
            column = "self_gpu_ms" if "self_gpu_ms" in frame else "self_cpu_ms"
            ops[v] = frame[~frame["name"].astype(str).str.startswith("phase::")].groupby("name")[column].sum() / 1e3
        slow, fast, phase, op = s[1], s[4], phase_of.get(s[7]), s[12]
        f.expect(ranges[slow]["total"] >= ranges[fast]["total"], s[0], "the slower load's whole range")
        f.expect(agrees_duration(s[2], s[3], ranges[slow]["total"]) and agrees_duration(s[5], s[6], ranges[fast]["total"]),
                 s[0], "the two whole-load ranges")
        both = [p for p in LEAF_PHASES if p in ranges[slow] and p in ranges[fast]]
        f.expect(phase == max(both, key=lambda p: ranges[slow][p] - ranges[fast][p]), s[0], "the phase of the gap")
        f.expect(phase in both and agrees_duration(s[8], s[9], ranges[slow][phase])
                 and agrees_duration(s[10], s[11], ranges[fast][phase]), s[0], "the phase's two ranges")
        common = ops[slow].index.intersection(ops[fast].index)
        f.expect(op == max(common, key=lambda n: ops[slow][n] - ops[fast][n]), s[0], "the operator of the gap")
        f.expect(op in common and agrees_duration(s[13], s[14], ops[slow][op])
                 and agrees_duration(s[15], s[16], ops[fast][op]), s[0], "the operator's two self times")


def _fit_sentences(f: Findings, text: str, fits: list[pd.DataFrame]) -> None:
    """``slope S ± E`` (and ``R² R``) as a fitted line of one of ``fits`` holds it."""
    rows = pd.concat(fits, ignore_index=True) if fits else pd.DataFrame(columns=["slope", "stderr", "r2"])
    for s in re.finditer(rf"slope +({NUM}) ± ({NUM})(?:,? +R² ({NUM}))?", text):
        match = [r for r in rows.itertuples() if agrees(s[1], r.slope) and agrees(s[2], r.stderr)
                 and (s[3] is None or agrees(s[3], r.r2))]
        f.expect(bool(match), s[0], "no fitted line has this slope, standard error and R²")


def _notebook_03(f: Findings, text: str, results: Path) -> None:
    _fit_sentences(f, text, [pd.read_csv(results / "fits.csv")])
    for s in re.finditer(rf"B = ({NUM}) named buffers, N = ({NUM}) modules: the baseline builds ({NUM}) state dicts, "
                         rf"({NUM}) module visits \(B·N\); the optimized rule makes ({NUM}) \(N \+ B\)", text):
        b, n = shown_value(s[1])[0], shown_value(s[2])[0]
        f.expect(shown_value(s[3])[0] == b and shown_value(s[4])[0] == b * n and shown_value(s[5])[0] == n + b,
                 s[0], "B·N and N + B")
    rows = pd.read_csv(results / "traversal.csv")
    real = rows[rows["source"].str.startswith("token2wav")].groupby("experiment")["seconds"].median()
    for s in re.finditer(rf"the rules alone on the real model: {DURATION} / {DURATION} = ({NUM})×", text):
        f.expect(agrees_duration(s[1], s[2], real["baseline"]) and agrees_duration(s[3], s[4], real["optimized"])
                 and agrees(s[5], real["baseline"] / real["optimized"]), s[0], "the real model's medians")


def _notebook_04(f: Findings, text: str, results: Path) -> None:
    for s in re.finditer(rf"Total: ({NUM}) MiB \(({NUM}) bytes\) in ({NUM}) tensors", text):
        f.expect(agrees(s[1], shown_value(s[2])[0], 2**20), s[0], "MiB against bytes")
        f.expect(f"{s[1]} MiB of parameters" in text and f"{s[3]} parameter tensors" in text, s[0],
                 "the summary line's size and count")
    with wave.open(str(results / "token2wav.wav")) as clip:
        frames, rate = clip.getnframes(), clip.getframerate()
    for s in re.finditer(rf"({NUM}) samples = {DURATION} at ({NUM}) Hz", text):
        f.expect(shown_value(s[1])[0] == frames and shown_value(s[4])[0] == rate
                 and agrees_duration(s[2], s[3], frames / rate), s[0], f"the saved clip ({frames} at {rate} Hz)")

    def seconds(s: re.Match, i: int) -> tuple[float, float]:  # group i's duration and half its last digit, in s
        value, half = shown_value(s[i])
        return value * SCALE[s[i + 1]], half * SCALE[s[i + 1]]

    for s in re.finditer(rf"forward pass {DURATION}: DiT {DURATION}, BigVGAN {DURATION}", text):
        (whole, dw), (dit, dd), (vocoder, dv) = seconds(s, 1), seconds(s, 3), seconds(s, 5)
        f.expect(abs(dit + vocoder - whole) <= dw + dd + dv, s[0], "the DiT's and BigVGAN's parts add up to the whole")
        f.expect(s[2] != "s" or s[4] == s[6] == "s", s[0], "the parts in the whole's unit (seconds)")
    joined = rf"({NUM})[ \u00a0](ns|µs|ms|s)\b"  # the note's prose joins a number and its unit with a no-break space
    for s in re.finditer(rf"took {joined} in bfloat16 against {joined} in float32, ({NUM})× as long", text):
        (half, dh), (single, ds), (ratio, dr) = seconds(s, 1), seconds(s, 3), shown_value(s[5])
        f.expect((half - dh) / (single + ds) <= ratio + dr and ratio - dr <= (half + dh) / (single - ds), s[0],
                 "the probe's ratio against its two times")
        f.expect(" " not in s[0].split(" in bfloat16")[0].removeprefix("took "), s[0],
                 "the probe's time held together: its number and unit joined by a no-break space")


def _notebook_05(f: Findings, text: str, results: Path) -> None:
    from omni_loader.names import LEAF_PHASES
    from omni_loader.reporting.measurements import LABELS

    fits = [pd.read_csv(p) for p in sorted(results.parent.parent.glob("*/results/**/fits.csv"))]
    _fit_sentences(f, text, fits)
    own = pd.read_csv(results / "traversal" / "fits.csv").query("clock == 'wall' and experiment == 'baseline'").iloc[0]
    for s in re.finditer(rf"The sweep saved in (\S+) \([^)]*\) fits ({NUM}) ± ({NUM}) \(({NUM}) points, \S+ "
                         rf"({NUM})\u00a0…\u00a0({NUM}), ({NUM}) repeats?\): the slopes differ by ({NUM})", text):
        record = json.loads((Path(s[1]) / "fits.json").read_text())
        saved = record["fits"]["baseline"]
        f.expect(agrees(s[2], saved["slope"]) and agrees(s[3], saved["stderr"])
                 and [shown_value(s[i])[0] for i in (4, 5, 6, 7)]
                 == [saved["n_points"], saved["x_min"], saved["x_max"], record["config"]["repeats"]],
                 s[0], f"the fit saved in {s[1]}")
        f.expect(agrees(s[8], abs(own.slope - saved["slope"])), s[0], "this sweep's slope less the saved one")
        point = next((p for p in record.get("placement", []) if p["experiment"] == "baseline"), None)
        for t in [] if point is None else re.finditer(rf"\(B·N = ([\d,]+)\) this sweep's line predicts {DURATION} \(its \d+ repeats?' median: "
                             rf"{DURATION}\), the saved one's {DURATION} \({DURATION}, \d+ repeats?\): ({NUM}) times", text):
            x, ours = int(t[1].replace(",", "")), 10 ** own.intercept * int(t[1].replace(",", "")) ** own.slope
            f.expect(x == point["x"] and agrees_duration(t[2], t[3], ours)
                     and agrees_duration(t[6], t[7], point["predicted_seconds"])
                     and agrees_duration(t[8], t[9], point["median_seconds"])
                     and agrees(t[10], ours / point["predicted_seconds"]), t[0], "the lines' levels at Token2Wav")
    def line(x: float) -> float:  # this sweep's baseline power law at x = B·N, in seconds
        return 10 ** own.intercept * x ** own.slope

    audit = pd.read_csv(results / "audit.csv").set_index("arch")
    ratio = {a: r.baseline_seconds / line(r.named_buffers * r.modules) for a, r in audit.iterrows()}
    for s in re.finditer(r"Within a factor of 2 of the line \(baseline ÷ predicted 0.5\u00a0…\u00a02\): ([^.]*(?:\.\d+[^.]*)*)\.",
                         text):
        for m in re.finditer(rf"([\w-]+) \(({NUM})\)", s[1]):
            if m[1] in ratio:
                f.expect(agrees(m[2], ratio[m[1]]) and 0.5 <= ratio[m[1]] <= 2, s[0], f"{m[1]}'s place on the line")
    for s in re.finditer(rf"Outside it: ([\w-]+) \(({NUM})\)", text):
        if s[1] in ratio:
            f.expect(agrees(s[2], ratio[s[1]]) and not 0.5 <= ratio[s[1]] <= 2, s[0], f"{s[1]}'s place off the line")
    for s in re.finditer(rf"The finding's ≈ {DURATION} is ({NUM}) module visits × {DURATION} .*? The sweep's B·N line "
                         rf"predicts {DURATION} at the same B·N: a power law of slope ({NUM})(?:, extended ({NUM})× past "
                         rf"the ({NUM}) its fit ends at)?", text):
        visits, (total, half), (per, per_half) = shown_value(s[3])[0], shown_value(s[1]), shown_value(s[4])
        total, half, per, per_half = total * SCALE[s[2]], half * SCALE[s[2]], per * SCALE[s[5]], per_half * SCALE[s[5]]
        f.expect(abs(total - visits * per) <= half + visits * per_half, s[0], "the finding's price: visits × cost")
        f.expect(agrees_duration(s[6], s[7], line(visits)) and agrees(s[8], own.slope), s[0], "the line at those visits")
        f.expect(s[9] is None or (agrees(s[9], visits / own.x_max) and shown_value(s[10])[0] == own.x_max), s[0],
                 "how far past its fitted range the line is extended")
    frame = measured(results / "variants" / "runs.csv")
    for s in re.finditer(r"In this run the `(\w+)` load's largest phases are (.*?), of a median whole load of "
                         rf"{DURATION}\.", text):
        runs = frame[frame["variant"] == s[1]]
        by_phase = runs.groupby("phase")["seconds"].median()
        total = by_phase["total"]
        leaves = by_phase[[p for p in by_phase.index if p in LEAF_PHASES]].sort_values(ascending=False)
        words = {text: phase for phase, text in LABELS.items()}  # a phase is named in words, the parts split by "; "
        named = [(words.get(m[1], m[1]), *m.groups()[1:]) for part in s[2].split("; ")
                 if (m := re.fullmatch(rf"(.+) {DURATION} \(({NUM})%\)", part))]
        f.expect(len(named) == len(s[2].split("; ")) and [p for p, *_ in named] == list(leaves.index[:len(named)]),
                 s[0], f"largest phases {list(leaves.index)}")
        f.expect(all(agrees_duration(n, u, by_phase[p]) and agrees(pc, 100 * by_phase[p] / total)
                     for p, n, u, pc in named) and agrees_duration(s[3], s[4], total), s[0], "phase medians and shares")


def _notebook_06(f: Findings, text: str, results: Path) -> None:
    frame = measured(results / "runs.csv")
    m = medians(frame, "startup_to_health")
    for variant in ("baseline", "optimized"):
        for s in re.finditer(rf"\| {variant} \| ([^|]+) \| ({NUM}) \|", text):  # seconds, said in the header
            runs = frame[(frame["variant"] == variant) & (frame["phase"] == "startup_to_health")]["seconds"]
            shown = re.findall(NUM, s[1])
            f.expect(len(shown) == len(runs) and all(agrees(n, v) for n, v in zip(shown, runs)),
                     s[0], f"{variant}'s starts")
            f.expect(agrees(s[2], m[variant]), s[0], f"{variant}'s median start")
    starts = frame[frame["phase"] == "startup_to_health"]
    arms = [starts[starts["variant"] == v]["seconds"] for v in ("baseline", "optimized")]
    pooled = math.sqrt(sum(((a - a.mean()) ** 2).sum() for a in arms) / (sum(map(len, arms)) - 2))
    pr = {m["measurement"]: m for m in json.loads(REFERENCE.read_text())["measurements"]}["weight_loading"]
    saving = pr["baseline"] - pr["optimized"]
    from scipy import integrate, optimize

    def called(shift: float, n: int) -> float:
        """The chance that all n optimized starts (``shift`` SDs faster) beat all n baseline ones: the density of the
        fastest baseline start times the chance every optimized one is under it; 0 where n + n cannot reach p < 0.05."""
        if 2 / math.comb(2 * n, n) >= 0.05:
            return 0.0
        return integrate.quad(lambda y: n * scipy.stats.norm.pdf(y) * scipy.stats.norm.sf(y) ** (n - 1)
                                    * scipy.stats.norm.cdf(y + shift) ** n, -12, 12, limit=200)[0]

    def smallest(n: int) -> float:  # the difference of medians called 80% of the time, in seconds
        return pooled * optimize.brentq(lambda d: called(d, n) - 0.8, 1e-6, 60, xtol=1e-10)

    for s in re.finditer(rf"At this spread \(SD ({NUM}) s of one run\), (.*)", text):
        f.expect(agrees(s[1], pooled), s[0], "the starts' pooled spread")
        said = s[2]
        if (none := re.search(r"(\d+) \+ (\d+) runs call (?:none|no difference)", said)):
            f.expect((int(none[1]), int(none[2])) == tuple(map(len, arms)) and called(1e3, int(none[1])) == 0.0,
                     s[0], "that these runs call no difference")
        for t in re.finditer(rf"(?:the PR's )?(\d+) \+ (\d+) runs (?:would )?call a difference of medians of ({NUM}) s "
                             rf"or more 80% of the time under (?:the PR's|its) separate-ranges rule, ({NUM}) times the (?:PR's )?"
                             rf"({NUM}) s saving", said):
            n = int(t[1])
            f.expect(t[0].startswith("the PR's") or (n, int(t[2])) == tuple(map(len, arms)), s[0], "the runs counted")
            true = smallest(n)
            f.expect(agrees(t[3], true) and agrees(t[4], true / saving) and agrees(t[5], saving), s[0],
                     "the smallest difference called and its multiple of the PR's saving")
    chances = {n: called(saving / pooled, n) for n in range(2, 201)}
    z = scipy.stats.norm.isf(0.025) + scipy.stats.norm.isf(0.2)  # two-sided, 80% power
    # times pi/3: the test's efficiency; never under 4 a side, the fewest at which an exact two-sided p < 0.05 exists
    by_test = max(4, math.ceil(2 * (z * pooled / saving) ** 2 * math.pi / 3))
    enough = [n for n, p in chances.items() if p >= 0.8]
    for s in re.finditer(rf"A ({NUM}) s saving would need (\d+) runs a side under that rule; a Mann-Whitney test alone "
                         rf"would need (\d+) runs a side", text):
        f.expect(agrees(s[1], saving) and int(s[3]) == by_test, s[0], "the PR's saving and the runs a test needs")
        f.expect(enough and int(s[2]) == enough[0], s[0], "the runs a side the saving needs under the rule")
    for s in re.finditer(rf"No number of runs calls a ({NUM}) s saving 80% of the time under that rule \(its best "
                         rf"chance is ({NUM})%, at (\d+) runs a side[^)]*\); a Mann-Whitney test alone would need "
                         rf"(\d+) runs a side", text):
        best = max(chances.values())
        f.expect(agrees(s[1], saving) and int(s[4]) == by_test, s[0], "the PR's saving and the runs a test needs")
        f.expect(not enough and agrees(s[2], 100 * chances[int(s[3])]) and chances[int(s[3])] >= best - 1e-6,
                 s[0], "that the rule never calls the saving, and its best chance")
    for s in re.finditer(rf"Here the optimized starts' median is {DURATION} (faster|slower)", text):
        diff = round(m["baseline"], 2) - round(m["optimized"], 2)  # the medians as the table above shows them
        f.expect(agrees_duration(s[1], s[2], abs(diff)) and s[3] == ("faster" if diff > 0 else "slower"), s[0],
                 "the difference of the median starts")
    for s in re.finditer(r"Here the two medians are the same to a hundredth of a second", text):
        f.expect(round(round(m["baseline"], 2) - round(m["optimized"], 2), 2) == 0, s[0],
                 "that the median starts are the same")


CHECKS: dict[str, Callable[[Findings, str, Path], None]] = {
    "01_reproduce_pr_tables": _notebook_01,
    "02_profiles": _notebook_02,
    "03_module_traversal_costs": _notebook_03,
    "04_explore_token2wav": _notebook_04,
    "05_beyond_the_pr": _notebook_05,
    "06_where_startup_goes": _notebook_06,
}


def check(stem: str, executed: Path, results: Path) -> Findings:
    """The number-carrying sentences of notebook ``stem``'s executed copy, against its saved ``results``."""
    findings = Findings(stem)
    CHECKS[stem](findings, shown_text(nbformat.read(executed, as_version=4)), results)
    return findings
