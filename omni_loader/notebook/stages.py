"""A startup A/B of stage groups and one start's timeline, as notebook 06 shows them.

Two nouns, the starts (:class:`Starts`) and one start's timeline (:class:`StartTimeline`, from any startup log), each
method returning what a cell displays, so the startup folder can change underneath the notebook.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import fields
from functools import cached_property
from pathlib import Path
from typing import Any

from ..startup.timeline import Timeline

VARIANTS = ("baseline", "optimized")
SHARE_FLOOR_S = 0.005  # a baseline median under 5 ms gets no saving (%): a share of so little is timer and scheduler noise


def start_stage_groups(out: str | os.PathLike[str], *, size: str = "tiny", stages: int = 3, token2wav_stage: int = 2,
                       simulate_seconds: Sequence[float] = (2.0, 3.0), warmup: int = 1, runs: int = 3,
                       device: str = "cpu", timeout: float = 600.0) -> Starts:
    """Start two stage groups in turn (``warmup`` + ``runs`` each, timed to ``/health``); the :class:`Starts`."""
    from ..startup.serve_ab import serve_ab
    from ..startup.stage_group import stage_group_commands
    from ..token2wav.checkpoint import resolve_snapshot
    from ..token2wav.options import LoadOptions

    snapshot = resolve_snapshot(size=size)
    base, opt, url = stage_group_commands(snapshot.root, stages=stages, token2wav_stage=token2wav_stage,
                                          simulate_seconds=tuple(simulate_seconds), options=LoadOptions(device=device))
    return Starts(serve_ab(base, opt, url, out, warmup=warmup, runs=runs, timeout=timeout, progress=True,
                           device=device))


def timeline(log: str | os.PathLike[str] | Timeline) -> StartTimeline:
    """The timeline of one start's log (a stage group's, a ``vllm serve`` log of your own, or one read already)."""
    from ..startup.timeline import read_timeline

    read = log if isinstance(log, Timeline) else read_timeline(log)
    return StartTimeline(**{f.name: getattr(read, f.name) for f in fields(read) if f.init})


class StartTimeline(Timeline):
    """One start's timeline (a lane per stage) as notebook 06 shows it: a sentence, a table, a chart."""

    model: str | None = None  # what its Token2Wav stage loads, in words (:meth:`Starts.model`); None: not known

    def loads(self) -> str:
        """Which model the times are of, for a caption: ", stage-2 loading the tiny Token2Wav (synthetic weights)"."""
        lanes = self.token2wav_lanes()
        return f", {_listed(lanes) if lanes else 'its Token2Wav stage'} loading the {self.model}" if self.model else ""

    def inferred(self, lane: str, phase: str) -> bool:
        """Whether ``lane``'s ``phase`` (a repeat's ``phase#2`` too) is inferred from timestamps to the second, where
        0 s is two lines in the same second, no length."""
        return any(r.source == "inferred" for r in self.find(phase.partition("#")[0], lane))

    def sentence(self) -> str:
        """One sentence on the start: its log's lines, its lanes and which stage gated readiness."""
        from ..startup.timeline_plot import path_words

        path = self.critical_path()
        return (f"**{self.log}**: {self.lines} lines, lanes {', '.join(self.lane_names())}. "
                + (f"Critical path: {path_words(path)}" if path else "No stage reported ready."))

    def table(self):  # -> Styler
        """The start's phases, a row each, lane by lane and in the order they started, with their extents' source."""
        # A phase reported to start under a second before the first line is shown from 0, as the chart draws it.
        import pandas as pd

        from ..formatting import table, time_unit
        from ..startup.timeline_plot import phase_words
        from ..startup.timeline_scan import RESOLUTION

        lanes = {name: i for i, name in enumerate(self.lane_names())}
        phases = sorted(self.phases(), key=lambda r: (lanes.get(r.lane, len(lanes)), r.start, -r.end, r.line))
        empty = [r for r in phases if r.seconds == 0 and self.inferred(r.lane, r.phase)]
        phases = [r for r in phases if r not in empty]
        clamped = [r for r in phases if -RESOLUTION <= r.start < -0.05]  # what prints as 0.0 is no clamp to mention
        rows = pd.DataFrame([{
            "lane": r.lane, "phase": phase_words(r.phase),
            "start (s)": max(r.start, 0.0) if r.start >= -RESOLUTION else r.start, "end (s)": r.end,
            "seconds": r.seconds, "source": r.source, "log line": r.line} for r in phases],
            columns=["lane", "phase", "start (s)", "end (s)", "seconds", "source", "log line"])
        notes = ["In the order they started; start and end are seconds from the log's first line."]
        if clamped:
            notes.append(f"{_listed(f'{r.lane} {phase_words(r.phase)}' for r in clamped)} reported a length that "
                         "puts its start up to a second before the log's first line, whose clock is to the second: "
                         "shown from 0.")
        if empty:
            notes.append(f"{_listed(f'{r.lane} {phase_words(r.phase)}' for r in empty)} "
                         f"{'has' if len(empty) == 1 else 'have'} no row: inferred from timestamps to the second, its "
                         "line fell in the same second as the one it is inferred from (0 ms).")
        caption = captioned(f"Phases of this start{self.loads()}", notes)
        unit = time_unit([r.seconds for r in phases])
        styled = table(rows, seconds=["seconds"], unit=unit, decimals={"start (s)": 1, "end (s)": 1}, caption=caption)
        return whole_ms_rows(styled, [[r.seconds] for r in phases], ["time (ms)"]) if unit == "ms" else styled

    def gantt(self, **options: Any):  # -> ShownFigure
        """The start's chart, a lane per stage, the Token2Wav stage and the critical path marked (``title=`` ...)."""
        from ..startup.timeline_plot import gantt

        return gantt(self, **options)


class Starts:
    """The starts of a startup A/B of stage groups (``serve-ab``'s directory ``out``), as notebook 06 shows them."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        self.out = Path(out)

    @cached_property
    def _frame(self):  # -> DataFrame
        """The directory's trusted rows, read once (the timeline, the sentences and the startup row all read them)."""
        from ..results.integrity import check_results

        return check_results(self.out).frame

    def measured(self):  # -> DataFrame
        """Each measured start's time to ``/health`` (warm-ups and failed starts left out)."""
        from ..startup.one_run import PHASE

        frame = self._frame
        return frame[(frame["phase"] == PHASE) & ~frame["warmup"].astype(bool) & (frame["status"] == "ok")]

    @cached_property
    def model(self) -> str | None:
        """What the Token2Wav stage loaded, in words, from the baseline command's ``--checkpoint``; or None (read
        once: every table and caption of the starts names it)."""
        import shlex

        from ..errors import OmniLoaderError
        from ..startup.serve_ab import saved_serve_ab
        from ..token2wav.checkpoint import model_words, open_snapshot

        try:
            words = shlex.split(saved_serve_ab(self.out)["spec"]["baseline_cmd"])
            return model_words(open_snapshot(words[words.index("--checkpoint") + 1]).describe())
        except (OSError, ValueError, KeyError, IndexError, TypeError, OmniLoaderError):
            return None

    def timeline(self) -> StartTimeline:
        """The timeline of the first measured baseline start's log, which knows the model its stage loaded."""
        starts = self.measured()
        first = starts[starts["variant"] == VARIANTS[0]].iloc[0]
        read = timeline(self.out / "logs" / f"{int(first['run_id'])}-{VARIANTS[0]}.log")
        read.model = self.model
        return read

    def compared_phases(self) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, Any]], Any]:
        """``(shown, empty, first)``: the ``(lane, phase, Comparison)`` both variants have, and those of no length."""
        # In the order the first measured start (``first``) ran them; ``empty``: 0 s in every start, or inferred (to
        # the log's second) with medians of 0 s in both variants.
        from ..errors import OmniLoaderError
        from ..startup.serve_ab import stage_phase_comparisons

        try:
            first = self.timeline()
        except (OSError, OmniLoaderError, IndexError, KeyError):
            first = None
        order: dict[tuple[str, str], tuple[float, float]] = {}
        for r in first.phases() if first is not None else ():
            order.setdefault((r.lane, r.phase), (r.start, -r.end))
        comps = sorted(stage_phase_comparisons(self.out),
                       key=lambda t: (_lane_rank(t[0]), order.get((t[0], t[1].partition("#")[0]), (math.inf, 0.0))))
        empty = [(lane, phase, c) for lane, phase, c in comps if not any((*c.baseline.samples, *c.optimized.samples))
                 or (first is not None and first.inferred(lane, phase) and c.baseline.median == 0 == c.optimized.median)]
        return [t for t in comps if t not in empty], empty, first

    def comparison_table(self):  # -> Styler
        """Every (stage, phase) both variants have: medians, the saving and its share, and the kit's verdict."""
        # A reason no row can be a claim is said once in the caption, as are the phases of 0 ms.
        import pandas as pd

        from ..formatting import table
        from ..startup.timeline_plot import phase_words
        from .ab_tables import verdict_word

        def shown(value: float, last: float) -> float:  # what rounds to zero at the decimals shown is 0, never "-0.000"
            return 0.0 if abs(value) < last / 2 else value

        def share(c: Any) -> str:
            if c.baseline.median < SHARE_FLOOR_S:
                return "—"
            return f"{shown(-100 * c.difference / c.baseline.median, 0.1):,.1f}"

        comps, empty, first = self.compared_phases()
        frame = pd.DataFrame([{
            "stage": lane, "phase": phase_words(phase), "baseline median": c.baseline.median,
            "optimized median": c.optimized.median, "saving": shown(-c.difference, 1e-6), "saving (%)": share(c),
            "verdict": verdict_word(c)} for lane, phase, c in comps])
        reasons = {c.verdict().split(": ", 1)[-1] for _, _, c in comps}
        notes = ["Each stage's phases are in the order they started."]
        if len(reasons) == 1 and "cannot reach" in next(iter(reasons)):
            notes.append(f"No row can be a claim: {next(iter(reasons))}.")
        if any(c.baseline.median < SHARE_FLOOR_S for _, _, c in comps):
            notes.append(f"The column saving (%) shows — where the baseline median is under {SHARE_FLOOR_S * 1e3:g} ms: "
                         "a share of so little time is the timer's and the scheduler's noise.")
        if empty:
            names = [f"{lane} {phase_words(phase)}" for lane, phase, _ in empty]
            notes.append(f"{_listed(names)} {'has' if len(names) == 1 else 'have'} no row: a median of 0 ms in both "
                         "variants"
                         + (" (inferred from timestamps to the second): one start whose two lines straddled a second's "
                            "turn gives it a whole second, as the timeline table above may show, while the median of "
                            "the starts is 0 ms."
                            if first is not None and all(first.inferred(lane, phase) for lane, phase, _ in empty)
                            else "."))
        caption = captioned(f"Medians per stage and phase{first.loads() if first else ''}, and the kit's verdict", notes)
        if frame.empty:
            return table(frame, caption=caption)
        columns = ["baseline median", "optimized median", "saving"]
        styled = table(frame, seconds=columns, unit="ms", caption=caption)
        styled = whole_ms_rows(styled, [[c.baseline.median, c.optimized.median] for _, _, c in comps],
                               [f"{name} (ms)" for name in columns])
        styled = styled.set_properties(subset=["saving (%)"], **{"text-align": "right", "white-space": "nowrap",
                                                                  "font-variant-numeric": "tabular-nums"})
        return styled.set_properties(subset=["stage"], **{"white-space": "nowrap"})  # "stage-0", never "stage-" "0"

    def detectable_sentences(self, pr_runs: int = 5) -> str:
        """What these starts could detect at their own spread, and the runs a side the PR's saving would need."""
        # where this design can call no difference, the PR's ``pr_runs`` a side at the same spread
        from ..startup.detectable import PR_SAVING_S, detectability

        starts = self.measured()
        samples = [list(starts[starts["variant"] == v]["seconds"]) for v in VARIANTS]
        if min(len(x) for x in samples) < 2:
            fewest = min(len(x) for x in samples)
            return f"{fewest} measured {'start' if fewest == 1 else 'starts'} a side: the spread needs two or more."
        here = detectability(*samples, saving=PR_SAVING_S)
        design = (detectability(spread=here.spread, n=pr_runs, saving=PR_SAVING_S) if math.isinf(here.detectable)
                  else None)
        return f"{here.calls(design)}\n\n{here.needs()}"

    def startup_row(self) -> str:
        """The PR's fourth row for this A/B beside the PR's: each variant's starts, their medians, which is faster."""
        from ..formatting import markdown_table
        from ..reporting.measurements import load_reference

        starts = self.measured().sort_values("run_id")
        rows, medians = [], {}
        for v in VARIANTS:
            seconds = starts[starts["variant"] == v]["seconds"]
            medians[v] = float(seconds.median()) if len(seconds) else None
            rows.append([v, ", ".join(f"{s:,.2f}" for s in seconds) or "none",
                         f"{medians[v]:,.2f}" if len(seconds) else ""])
        reference = load_reference()
        pr = next(m for m in reference["measurements"] if m["measurement"] == "startup_to_health")
        rows.append(["the PR (MI300X)", "— (5 a side, not published)",
                     f"{pr['baseline']:,.3f} → {pr['optimized']:,.3f}"])
        # One unit for every cell, said in the header: a start is seconds whatever its size (a list reading
        # "10.6 s, 7,397 ms" makes a person compare digits across units). The PR's verdict is a sentence, not a start.
        table = markdown_table(rows, ["variant", "starts to /health (s), in the order they ran", "median (s)"],
                               right=(2,))
        table += f"\n\nThe PR's verdict on its 5 + 5 starts: {pr.get('note', 'none published')}."
        if self.model is not None:  # the starts' model, beside the PR's released one
            released = reference["environment"].get("Model", "Qwen/Qwen2.5-Omni-3B")
            table = (f"Starts to `/health` with the {self.model} in the Token2Wav stage; the PR's, with {released} "
                     f"(released weights).\n\n{table}")
        b, o = medians["baseline"], medians["optimized"]
        if b is None or o is None:
            return table
        # the difference of the medians as the table shows them (6.60 − 6.34 = 0.26, never a rounded 0.254 that
        # reads "0.25" beside them)
        shown = round(round(o, 2) - round(b, 2), 2)
        said = (f"Here the optimized starts' median is {abs(shown):,.2f} s {'faster' if shown < 0 else 'slower'} than "
                "the baseline's." if shown else "Here the two medians are the same to a hundredth of a second.")
        return f"{table} {said} {self.largest_difference()}"

    def largest_difference(self) -> str:
        """The (stage, phase) whose medians differ most, both medians, and whether the loader change runs in it."""
        # A difference outside the change is the machine's; inside it, the change's or the spread's.
        from ..startup.timeline_plot import ENCLOSED, changed_load_phases, holds_change, phase_words

        try:
            comps, empty, first = self.compared_phases()
        except OSError:
            comps, empty, first = [], [], None
        if not comps:
            return "Whether that is the change or the spread is the next section's question."
        lane, phase, c = max(comps, key=lambda t: abs(t[2].difference))
        changed = changed_load_phases()
        token2wav = set(first.token2wav_lanes() if first is not None else ()) | {
            ln for ln, ph, _ in comps + empty if ph.partition("#")[0] == "token2wav_weight_loading"}
        change = _listed([phase_words(p).lower() for p in changed])
        head = (f"The stage table's largest difference of medians is {lane}'s {phase_words(phase)}: "
                f"{ms_text(c.baseline.median)} ms in the baseline starts, {ms_text(c.optimized.median)} ms in the "
                f"optimized ({ms_text(abs(c.difference))} ms {'faster' if c.difference < 0 else 'slower'}), ")
        if holds_change(lane, phase, token2wav, changed):
            return head + (f"a phase that holds the loader change ({change}): whether the starts' difference is the "
                           "change or the spread is the next section's question.")
        holding = sorted((len(ENCLOSED[ph.partition("#")[0]]), ln, ph) for ln, ph, _ in comps
                         if holds_change(ln, ph, token2wav, changed))  # the innermost first
        where = f", inside {holding[0][1]}'s {phase_words(holding[0][2])}" if holding else ""
        return head + (f"a phase the loader change does not touch (it changes {change} only{where}): a difference "
                       "there is the machine's, not the change's. How large a difference such spread hides is the "
                       "next section's question.")


def whole_ms(seconds: float) -> bool:
    """Whether ``seconds`` is a whole number of milliseconds (what a line that says ``5604 ms`` gives)."""
    return math.isfinite(seconds) and abs(seconds * 1e3 - round(seconds * 1e3)) < 1e-6


def ms_text(seconds: float) -> str:
    """Milliseconds to the precision a log gives: ``5,604``, ``5,300.5`` (a median of two), or ``63.406``."""
    return f"{seconds * 1e3 + 0.0:,.{0 if whole_ms(seconds) else 1 if whole_ms(2 * seconds) else 3}f}"


def whole_ms_rows(styled: Any, values: Sequence[Sequence[float]], columns: Sequence[str]) -> Any:
    """``styled`` with a log's whole-millisecond rows shown to :func:`ms_text`'s precision, aligned."""
    import pandas as pd

    from ..formatting import with_minus

    classes = pd.DataFrame("", index=styled.data.index, columns=styled.data.columns)
    for decimals in (0, 1):
        rows = [i for i, row in enumerate(values)
                if row and all(whole_ms(v * 2) for v in row) and decimals == (not all(whole_ms(v) for v in row))]
        if rows:
            styled = styled.format(lambda ms, d=decimals: with_minus(f"{ms + 0.0:,.{d}f}"),
                                   subset=pd.IndexSlice[rows, list(columns)])
            classes.iloc[rows, [classes.columns.get_loc(c) for c in columns]] = f"short-ms{decimals}"
    hidden = [{"selector": f"td.short-ms{d}::after", "props": [("content", f'"{pad}"'), ("visibility", "hidden")]}
              for d, pad in ((0, ".000"), (1, "00"))]
    return styled.set_td_classes(classes).set_table_styles(hidden, overwrite=False)


def captioned(head: str, notes: Sequence[str]) -> str:
    """A table's caption: one bold line saying what it is of, then ``notes`` in plain text."""
    return f'{head}<br><span style="font-weight: normal">{" ".join(notes)}</span>'


def _listed(items: Any) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _lane_rank(lane: str) -> tuple[int, str]:
    """stage-2 before stage-10, then other lanes by name."""
    head, _, number = lane.partition("/")[0].rpartition("-")
    return (int(number), lane) if head == "stage" and number.isdigit() else (1 << 30, lane)
