"""A saved benchmark, section by section, as a notebook shows it: ``r = kit.results(out)``, then ``r.controls()``.

:class:`SavedResults` holds the directory read once and its comparisons made once; each method is one section of
``report.md``, one cell's call, so a move inside the kit's folders does not break a notebook. Each returns Markdown
text (or a styled table, or paths); displaying is the notebook's.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path
from typing import Any

from ..results.integrity import Results
from ..errors import ResultsError
from ..results.suite import Record, Suite

PLOTS = ("phases", "where_time_goes", "ratios_vs_pr", "drift")


def lower_headers(markdown: str) -> str:
    """report.md's table headers lower-cased as the notebook writes them; a word in capitals keeps them."""
    lines = markdown.split("\n")
    for i in range(1, len(lines)):
        if lines[i].startswith("| ---") and lines[i - 1].startswith("|"):
            cells = lines[i - 1].strip("|").split("|")
            lines[i - 1] = "|" + "|".join(
                f" {c.strip()[0].lower()}{c.strip()[1:]} " if len(c.strip()) > 1 and c.strip()[1].islower()
                else f" {c.strip()} " for c in cells) + "|"
    return "\n".join(lines)


def results(out: str | os.PathLike[str] | Results | None = None, *,
            root: str | os.PathLike[str] | None = None) -> SavedResults | None:
    """A saved benchmark read and checked once: ``out``'s, else the newest complete one (:func:`saved_runs`)."""
    if out is None:
        out = next(iter(saved_runs(root)), None)
        if out is None:
            return None
    return SavedResults(Results.read(out))


def reproduce(spec: Any, out: str | os.PathLike[str], *, snapshot: Any = None, resume: bool = False) -> SavedResults:
    """The main job (:func:`omni_loader.job.reproduce`), its results returned as sections."""
    from ..job import reproduce as job

    return SavedResults(job(spec, out, snapshot=snapshot, resume=resume))


class SavedResults:
    """One results directory of ``reproduce``, its sections as methods; it goes wherever a path does."""

    def __init__(self, checked: Results) -> None:
        self.checked = checked

    @property
    def directory(self) -> Path:
        return self.checked.directory

    def __fspath__(self) -> str:
        return str(self.directory)

    def __truediv__(self, other: str) -> Path:
        return self.directory / other

    def __repr__(self) -> str:
        return f"SavedResults({str(self.directory)!r})"

    @cached_property
    def alpha(self) -> float:
        """The error rate the report reads the verdicts at (a sequential design's look)."""
        from ..reporting.sequential import design_alpha

        return design_alpha(self.checked.suite)

    @cached_property
    def comparisons(self) -> list[Any]:
        """Every phase compared, baseline against optimized, at :attr:`alpha`."""
        from ..reporting.measurements import comparisons

        return comparisons(self.checked.frame, self.alpha)

    @cached_property
    def floors(self) -> dict[str, Any]:
        """Each phase's A/A noise floor (empty without an A/A benchmark)."""
        from ..reporting.measurements import noise_floors

        return noise_floors(self.checked.frame)

    def headline(self) -> list[Any]:
        """The answer, for a notebook's first screen: which run, the PR's rows, where the time goes."""
        from .ab_tables import pr_rows

        record = self.checked.load
        disc = next((c for c in self.comparisons if c.phase == "buffer_discovery"), None)
        runs = f"{disc.baseline.n} + {disc.optimized.n} runs" if disc else "its runs"
        when = (record.get("started_at") or "")[:16].replace("T", " ")
        said = f"**The answer** (`{self.directory.name}`: {model_words(record)}, {runs}, {when} UTC):"
        return [said, *pr_rows(self.comparisons, self.floors, self.alpha), *self.plots("where_time_goes")]

    def opening(self) -> str:
        """``report.md``'s opening, rendered afresh, and its spread warnings in one paragraph."""
        from ..reporting.report import render_report
        from .ab_tables import spread_line

        opening = render_report(self.checked).split("\n## Environment", 1)[0].split("\n", 2)[2]
        spread = spread_line(self.comparisons)  # the comparisons report.md's warnings come from
        return opening.rstrip("\n") + ("\n\n" + spread if spread else "") + "\n"

    def environment(self) -> str:
        """The report's environment table: the machine, the software, every load option, the command."""
        from ..reporting.report_environment import environment_table

        return lower_headers(environment_table(self.checked.suite))

    def tables(self) -> list[Any]:
        """The report's measurement section as tables: the PR's rows, every phase, the per-phase summary."""
        from ..reporting.report_tables import styled_summary_table
        from .ab_tables import pr_rows

        return ["**The PR's rows**", *pr_rows(self.comparisons, self.floors, self.alpha),
                "**Every phase**, with its spread, test and interval", phase_table(self.comparisons, self.floors),
                styled_summary_table(self.checked.frame)]

    def controls(self) -> list[Any]:
        """The controls section as tables, for each A/B pair (:func:`~.ab_tables.control_tables`)."""
        from .ab_tables import control_tables

        return control_tables(self.checked.frame, self.checked.suite)

    def pr_reference(self) -> str:
        """This run's headline rows beside the PR's figures (MI300X)."""
        from ..reporting.measurements import comparisons, load_reference
        from ..reporting.report_tables import reference_table

        return lower_headers(reference_table(comparisons(self.checked.frame), load_reference()))

    def plots(self, *names: str) -> list[Path]:
        """The PNG plots the report drew into ``plots/`` (``names``, default all of them), in the report's order."""
        return self.checked.plots(names or PLOTS)

    def equivalence_and_memory(self) -> list[Any]:
        """Whether both variants loaded identical tensors, and each one's peak memory with its verdict."""
        import pandas as pd

        from ..formatting import span, table
        from ..reporting.stats import equivalence, memory_verdict, run_summary

        def in_mib(nbytes: float) -> str:
            return f"{nbytes / 2**20:,.0f}"

        frame = self.checked.frame
        rows = []
        for column, name in (("rss_peak_bytes", "peak process RSS"), ("device_peak_bytes", "peak device memory")):
            arms = {v: run_summary(frame, v, column) for v in ("baseline", "optimized")}
            if all(s.n for s in arms.values()):
                row: dict[str, Any] = {"memory": name}
                for v, s in arms.items():
                    row[f"{v} median (MiB)"] = s.median / 2**20
                    row[f"{v} min–max (MiB)"] = span(in_mib(s.min), in_mib(s.max))
                rows.append({**row, "verdict": memory_verdict(arms["baseline"], arms["optimized"])})
        statement = equivalence(frame)["statement"]
        if not rows:
            return [statement, "Memory: not measured."]
        return [statement, table(pd.DataFrame(rows), decimals={"baseline median (MiB)": 0, "optimized median (MiB)": 0})]

    def beyond_the_pr(self, first: str, second: str) -> list[Any]:
        """A benchmark of more than two variants, as tables, ``second`` against ``first`` among them."""
        from ..reporting.measurements import PR_PAIR, comparisons, noise_floors, planned_arms
        from ..reporting.stats import equivalence
        from ..token2wav.variants import variant_from
        from .ab_tables import pair_tables, pr_rows, verdict_legend

        checked = self.checked
        frame, suite = checked.frame, checked.suite
        spec = suite.spec
        arms = list(spec.get("variants") or PR_PAIR)
        custom = {v["name"]: v for v in spec.get("custom_variants") or [] if isinstance(v, dict)}
        pair = frame[frame["variant"].isin(PR_PAIR)]
        shown: list[Any] = [f"Integrity: {checked.summary or 'the checks found nothing wrong'}",
                            "**The PR's rows** (`baseline` against `optimized`)",
                            *pr_rows(comparisons(pair, self.alpha), noise_floors(pair), self.alpha)]
        for other in [v for v in arms[1:] if {arms[0], v} != set(PR_PAIR)]:
            variant = variant_from(custom.get(other, other))
            shown += [f"### `{other}` against `{arms[0]}`, the benchmark's first variant\n\n`{other}`: discovery "
                      f"`{variant.discovery}`, parameters `{variant.parameters}`; memory: "
                      f"{variant.memory or 'no change to where parameters live'}.", *pair_tables(frame, suite, arms[0], other)]
        shown += [f"### `{second}` against `{first}`", *pair_tables(frame, suite, first, second),
                  verdict_legend(first, second, self.alpha), equivalence(frame, planned_arms(suite))["statement"]]
        return shown

    def earlier(self) -> list[Path]:
        """Results directories and packed archives under the results root, other than this one."""
        from .files import results_root

        here = self.directory.resolve()
        return [p for p in sorted(results_root().glob("*")) if p.resolve() != here
                and ((p / "metadata.json").is_file() or p.name.endswith((".tar.gz", ".zip")))]

    def side_by_side(self, others: list[str | os.PathLike[str]] = ()) -> list[Any]:
        """This run beside earlier reproductions (``compare``, also written to ``compare/`` here)."""
        import pandas as pd

        from ..compare.compare_render import check_lines, table_rows, write_compare
        from ..compare.reproductions import compare_results
        from ..formatting import table
        from .ab_tables import whole_quantities
        from .files import results_root

        given = [Path(p).expanduser() for p in others]  # as given when absolute or there, else under the results root
        side = compare_results([self.checked, *(p if p.is_absolute() or p.exists() else results_root() / p
                                                  for p in given)])
        write_compare(side, self / "compare")
        header, rows = table_rows(side)
        frame = pd.DataFrame(rows, columns=header).set_index("Results").T.map(whole_quantities)
        plot = self / "compare" / "plots" / "compare_ratios.png"
        return [table(frame, index=True), "\n".join(check_lines(side)), *([plot] if plot.is_file() else [])]

    def largest_phases(self, variant: str = "optimized", n: int = 3) -> str:
        """One sentence: ``variant``'s largest leaf phases, each with its median and share of the whole load."""
        from ..formatting import short_duration
        from ..names import LEAF_PHASES
        from ..reporting.measurements import label

        frame = self.checked.frame
        runs = frame[(frame["variant"] == variant) & ~frame["warmup"].astype(bool) & (frame["status"] == "ok")]
        medians = runs.groupby("phase")["seconds"].median()
        total = medians.get("total")
        leaves = medians[[p for p in medians.index if p in LEAF_PHASES]].sort_values(ascending=False).head(n)
        parts = [f"{label(p)} {short_duration(s)}" + (f" ({100 * s / total:.1f}%)" if total else "")
                 for p, s in leaves.items()]
        return (f"In this run the `{variant}` load's largest phases are " + "; ".join(parts)
                + (f", of a median whole load of {short_duration(total)}." if total else "."))

    def weight_loading_parts(self) -> str:
        """Weight loading split into buffer discovery and the rest, for this run and the PR."""
        from ..formatting import short_duration
        from ..reporting.measurements import load_reference

        here = {c.phase: (c.baseline.median, c.optimized.median) for c in self.comparisons}  # medians: any alpha's
        pr = {m["measurement"]: (m["baseline"], m["optimized"]) for m in load_reference()["measurements"]}
        lines = []
        for who, medians in (("This run", here), ("The PR (MI300X)", pr)):
            if "buffer_discovery" not in medians or "weight_loading" not in medians:
                continue
            (d_b, d_o), (w_b, w_o) = medians["buffer_discovery"], medians["weight_loading"]
            lines.append(f"{who}: weight loading {short_duration(w_b)} → {short_duration(w_o)} ({w_b / w_o:.2f}×), "
                         f"of which buffer discovery {short_duration(d_b)} → {short_duration(d_o)} and the rest "
                         f"{short_duration(w_b - d_b)} → {short_duration(w_o - d_o)}.")
        return "\n\n".join(lines)

    def shared_phases(self) -> str:
        """Under the where-the-time-goes picture: whether the controls differ here (the machine's doing)."""
        from ..formatting import short_duration
        from ..reporting.controls import MATERIAL, pair_reports
        from ..reporting.measurements import PR_PAIR, label, noise_floors
        from ..reporting.stats import smallest_p

        frame = self.checked.frame
        report = next((r for r in pair_reports(frame, self.checked.suite, noise_floors(frame), self.alpha)
                       if (r.first, r.second) == PR_PAIR), None)
        if report is None:
            return ""
        changed = ", ".join(label(p) for p in report.changed) or "no step"
        differing = [c for c in report.controls if c.differs]
        runs = [(c.comparison.baseline.n, c.comparison.optimized.n) for c in report.controls]
        if not differing and runs and all(smallest_p(a, b) >= report.controls[0].comparison.alpha for a, b in runs):
            a, b = runs[0]
            return (f"Only {changed} differs in code between the variants; whether the phases both run unchanged "
                    f"differ here cannot be told from {a} + {b} runs (no test can claim a difference), so read the "
                    "bars' other segments as unsettled.")
        if not differing:
            widest = max(report.controls, key=lambda c: abs(c.comparison.difference)).comparison
            gap = (f"; the widest gap between their shared segments, {label(widest.phase)} "
                   f"{short_duration(widest.baseline.median)} → {short_duration(widest.optimized.median)}, is within "
                   "its runs' spread" if report.controls else "")
            return (f"Here no phase but {changed} differs between the variants by the kit's test (each is tested like "
                    f"a headline row){gap}: the rest of each bar is what both variants pay.")
        named = "; ".join(f"{label(c.phase)} {short_duration(c.comparison.baseline.median)} → "
                          f"{short_duration(c.comparison.optimized.median)}" for c in differing)
        if not report.confounders:
            return (f"Only {changed} differs in code; here {len(differing)} of the {len(report.controls)} phases both "
                    f"variants run unchanged differ{'s' if len(differing) == 1 else ''} too by the kit's test ({named}), "
                    f"each by less than {100 * MATERIAL:g}% of a headline row it sits in: the machine moved "
                    f"{'it' if len(differing) == 1 else 'them'}, too little to change what the bars say (the Controls "
                    "below take each row apart).")
        return (f"Only {changed} differs in code, yet here {len(differing)} of the {len(report.controls)} phases both "
                f"variants run unchanged differ{'s' if len(differing) == 1 else ''} too: {named}. The same code cannot "
                "have changed speed, so the machine did it (see the Controls below); the bars differ by more than the fix.")

    def cold_and_warm(self, cold: str | os.PathLike[str] | SavedResults) -> str:
        """What the PR's fix is worth warm (this run) and cold (``cold``'s), in one paragraph."""
        from ..reporting.cache_report import cold_and_warm

        return cold_and_warm(self.checked, cold.checked if isinstance(cold, SavedResults) else cold)

    def discovery_ratios(self, *others: Any, names: tuple[str, ...] = ()) -> list[Any]:
        """This run's buffer-discovery ratio beside ``others``' and the PR's (:func:`discovery_ratios`)."""
        return discovery_ratios(self, *others, names=names)


def phase_table(comps: list[Any], floors: dict[str, Any] | None = None):  # -> Styler
    """Every timed phase on one line, in ms to two decimals, with its verdict in a word."""
    import pandas as pd

    from ..formatting import table
    from ..reporting.measurements import label
    from .ab_tables import TO, ratio_cells, verdict_word, words_only

    # Two decimals: three made the table wider than a Lab output area. A range never wraps.
    def ms(*values: float | None) -> str:
        return TO.join("" if v is None else f"{v * 1e3:,.2f}".replace("-", "−") for v in values)

    rows = []
    for c in comps:
        if c.unit != "s":
            continue
        rows.append({"phase": label(c.phase), "baseline (ms)": c.baseline.median * 1e3,
                     "optimized (ms)": c.optimized.median * 1e3, "baseline ÷ optimized": c.ratio,
                     "baseline min–max (ms)": ms(c.baseline.min, c.baseline.max),
                     "optimized min–max (ms)": ms(c.optimized.min, c.optimized.max),
                     # Δ median's interval negated: a faster phase reads positive, as in the controls' tables
                     f"{c.level} CI of the saving (ms)": ms(*(None if v is None else -v for v in (c.ci_high, c.ci_low))),
                     "Mann-Whitney p": c.p_value,
                     "verdict": verdict_word(c, (floors or {}).get(c.phase))})
    styler = ratio_cells(table(pd.DataFrame(rows), decimals={"baseline (ms)": 2, "optimized (ms)": 2,
                                                             "Mann-Whitney p": 4}), ["baseline ÷ optimized"])
    # a phase's name breaks between words only, not at "_" or "("
    return words_only(styler, ["phase"]) if rows else styler


# One discovery ratio, several figures: each is shown with its model, snapshot, runs and condition, since without
# them figures that differ read as a contradiction.


def saved_runs(root: str | os.PathLike[str] | None = None) -> list[Path]:
    """The complete ``reproduce`` directories under the results root (or ``root``), newest first."""
    from .files import results_root

    found = []
    for meta in (Path(root) if root else results_root()).glob("*/metadata.json"):
        try:
            record = Suite.read(meta.parent).benchmark("load") or Record()
        except (OSError, ResultsError):  # not one to show: a damaged or foreign directory
            continue
        variants = {str(v) for v in record.settings.get("variants") or ("baseline", "optimized")}
        if (record.get("kind") == "reproduce" and record.get("status") == "complete"
                and {"baseline", "optimized"} <= variants):
            found.append((record.get("started_at") or "", meta.parent))
    return [p for _, p in sorted(found, reverse=True)]


def model_words(record: Record) -> str:
    """What a benchmark loaded, in words (:func:`~omni_loader.token2wav.checkpoint.model_words` of its checkpoint)."""
    from ..token2wav.checkpoint import model_words as words

    checkpoint = record.get("checkpoint")
    return words(checkpoint if isinstance(checkpoint, dict) else {})


def _run_row(saved: SavedResults, figure: str) -> dict[str, Any] | None:
    from .files import results_root

    record, path = saved.checked.load, saved.directory
    if not record:
        return None
    comps = {c.phase: c for c in saved.comparisons}  # medians and counts: any alpha's
    disc, calls = comps.get("buffer_discovery"), comps.get("state_dict_calls")
    if disc is None:
        return None
    spec, load = record.get("spec") or {}, (record.get("spec") or {}).get("load") or {}
    checkpoint = Path((record.get("checkpoint") or {}).get("checkpoint_dir") or spec.get("checkpoint") or "")
    fresh = spec.get("workers") != "in-process"
    b = int(calls.baseline.median) if calls is not None else None
    warmup = spec.get("warmup", record.get("warmup", 0))
    try:  # named under the results root ("notebook02-…/reference"), else its own name
        where = path.resolve().relative_to(results_root().resolve()).as_posix()
    except ValueError:
        where = path.name
    return {
        "figure": figure, "model": model_words(record), "snapshot": f"{checkpoint.name or '—'}; results in {where}",
        "runs": f"{disc.baseline.n} + {disc.optimized.n}" + (f", order {spec['order']}" if spec.get("order") else "")
                + (f", after {warmup} warm-up{'s' if warmup != 1 else ''} each" if warmup else ", no warm-up"),
        "condition": (f"inside a whole load, {'a fresh process per run' if fresh else 'one process for all runs'}, "
                      f"{load.get('cache', 'warm')} page cache, {load.get('device', '?')} "
                      f"({(record.get('environment') or {}).get('cpu_count', '?')}-core machine)"),
        "baseline": disc.baseline.median, "optimized": disc.optimized.median, "B": b,
    }


def _sweep_row(result: Any, figure: str) -> dict[str, Any] | None:
    from ..formatting import count
    from ..sweep.fits import source_words

    placement = getattr(result, "placement", None)
    if placement is None or placement.empty:
        return None
    rows = placement.set_index("experiment")
    if not {"baseline", "optimized"} <= set(rows.index):
        return None
    config = result.config
    return {
        "figure": figure, "model": source_words(str(rows.loc["baseline", "source"])) + " (synthetic weights)",
        "snapshot": "none: built in this process", "runs": f"median of {count(config.repeats, 'repeat')}",
        "condition": "the two rules alone on a warm tree, in this kernel (wall clock)",
        "baseline": float(rows.loc["baseline", "median_seconds"]), "optimized": float(rows.loc["optimized", "median_seconds"]),
        "B": int(rows.loc["baseline", "B"]),
    }


def _pr_row() -> dict[str, Any]:
    from ..reporting.measurements import load_reference

    ref = load_reference()
    by = {m["measurement"]: m for m in ref["measurements"]}
    env = ref.get("environment") or {}
    # the PR's design in the table's words, from its environment ("5 per version, alternating", "1 per version")
    repeats, _, how = str(env.get("Repeats", "?")).partition(",")
    n, warm = repeats.split()[0], str(env.get("Warm-ups", "?")).split()[0]
    return {
        "figure": "the PR (its table)", "model": f"{env.get('Model', 'Qwen/Qwen2.5-Omni-3B')} (released weights)",
        "snapshot": "the released checkpoint",
        "runs": f"{n} + {n}{',' + how if how else ''}, after {warm} warm-up{'s' if warm != '1' else ''} each",
        "condition": f"inside vLLM's load, {env.get('GPU', 'a GPU')}, {env.get('Model files', 'cached')} model files",
        "baseline": by["buffer_discovery"]["baseline"], "optimized": by["buffer_discovery"]["optimized"],
        "B": int(by["state_dict_calls"]["baseline"]),
    }


def discovery_ratios(*measured: Any, names: tuple[str, ...] = ()) -> list[Any]:
    """Buffer discovery's ratio from each of ``measured`` (None skipped) and the PR's, and what sets them apart."""
    import pandas as pd

    from ..formatting import short_duration, table, times
    from .ab_tables import words_only

    rows, missing = [], []
    for i, item in enumerate(measured):
        figure = names[i] if i < len(names) else f"figure {i + 1}"
        if item is None:
            missing.append(figure)
            continue
        row = _sweep_row(item, figure) if hasattr(item, "placement") else _run_row(
            item if isinstance(item, SavedResults) else SavedResults(Results.read(item)), figure)
        if row is not None:
            rows.append(row)
    rows.append(_pr_row())
    for r in rows:
        r["ratio"] = r["baseline"] / r["optimized"] if r["optimized"] else float("nan")
        r["one state dict"] = r["baseline"] / r["B"] if r["B"] else float("nan")
    shown = pd.DataFrame([{
        "figure": r["figure"], "model": r["model"], "snapshot": r["snapshot"], "runs (baseline + optimized)": r["runs"],
        "condition": r["condition"], "baseline (median)": short_duration(r["baseline"]),
        "optimized (median)": short_duration(r["optimized"]), "baseline ÷ optimized": times(r["ratio"]),
        "B (state dicts)": r["B"], "one state dict (baseline ÷ B)": short_duration(r["one state dict"]),
    } for r in rows])
    first = rows[0]
    possessive = first["figure"] + ("'" if first["figure"].endswith("s") else "'s")  # "this run's", "02's runs'"
    lines, factors = [], []
    for r in rows[1:]:
        b, sd, opt = (r["B"] / first["B"], r["one state dict"] / first["one state dict"], r["optimized"] / first["optimized"])
        factors.append((b, sd, opt))
        lines.append(
            f"**{r['figure']}**: {times(r['ratio'])} against {possessive} {times(first['ratio'])}, "
            f"{r['ratio'] / first['ratio']:,.2f} times it. The ratio is B × one state dict ÷ the optimized rule, so "
            f"the factor is {b:,.2f} (B: {r['B']} against {first['B']}"
            + (", another model size" if r["B"] != first["B"] else ", the same model tree") + ") × "
            f"{sd:,.2f} (one state dict: {short_duration(r['one state dict'])} against "
            f"{short_duration(first['one state dict'])}) ÷ {opt:,.2f} (the optimized rule: "
            f"{short_duration(r['optimized'])} against {short_duration(first['optimized'])}).")
    if factors:
        lines.append(_largest_factor(factors))
    if missing:
        from .files import results_root

        lines.append(f"No row for {', '.join(missing)}: none saved under {results_root()} yet (notebook 01 or "
                     "`omni-loader reproduce` saves one there, and this table shows it the next time it runs).")
    caption = ("Buffer discovery's ratio, figure by figure: what each was measured on and how. "
               "The count does not move (the baseline builds B state dicts); the prices do.")
    words = ["figure", "model", "runs (baseline + optimized)", "condition"]  # between words only (a path may break)
    return [words_only(table(shown, caption=caption), words), "\n\n".join(lines)]


def _largest_factor(factors: list[tuple[float, float, float]]) -> str:
    """Which of the three factors (B, one state dict, the optimized rule; each row's over the first row's) moves the
    figures most apart, a factor and its inverse alike."""
    import math

    spread = {"the model's size (B)": 0.0, "the price of one state dict": 0.0, "the optimized rule's time": 0.0}
    for triple in factors:
        for name, value in zip(spread, triple):
            if value > 0 and math.isfinite(value):
                spread[name] = max(spread[name], abs(math.log(value)))
    name = max(spread, key=spread.get)
    return (f"Of the three factors, {name} moves these figures furthest apart (up to "
            f"{math.exp(spread[name]):,.2f} times either way).")
