"""report.md and its plots, rendered only from a saved results directory (runs.csv + metadata.json).

The same files always give the same tables. :func:`render_report` returns the text and writes nothing;
:func:`write_report` writes ``report.md`` and the plots it links to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from ..formatting import duration

from .measurements import PR_PAIR, comparisons, label, load_reference, noise_floors, planned_arms
from ..results.suite import REPORT_FILE, Record
from .report_environment import environment_table
from .timers import timer_lines
from .report_tables import (attribution_table, beyond_pr_section, controls_section, counters_table,
                            headline, measurement_table, memory_table, noise_floor_table, reference_table,
                            yardstick_lines)
from .controls import pair_reports
from .sequential import design_alpha, design_sentence
from .cache_report import cache_check, cache_headline, cache_marks, cache_section
from ..host.machine import machine_warnings
from ..results.integrity import Results
from .stats import ALPHA, Comparison, confidence_words, equivalence, run_summary

__all__ = ["PLOTS_DIR", "PLOTS_ENV", "plots_wanted", "render_report", "write_report"]

PLOTS_DIR = "plots"
PLOTS_ENV = "OMNI_LOADER_PLOTS"


def plots_wanted() -> bool:
    """Whether report.md is drawn with its plots: yes unless ``$OMNI_LOADER_PLOTS`` is ``off``.

    The plots are most of a report's time; ``omni-loader report DIR`` can draw them later from the same files.
    """
    value = os.environ.get(PLOTS_ENV, "").strip().lower()
    if value not in ("", "on", "off"):
        raise OmniLoaderError(f"${PLOTS_ENV}={value!r} is not on or off")
    return value != "off"


def render_report(results: str | Path | Results) -> str:
    """report.md's text for a results directory (or its :class:`Results`); writes nothing."""
    from .plots import report_figure_stems

    check = Results.read(results)
    comps = comparisons(check.frame, design_alpha(check.suite))
    stems = report_figure_stems(check.frame, comps, load_reference()) if plots_wanted() else None
    return _report_text(check, comps, stems)


def write_report(results: str | Path | Results) -> Path:
    """Write ``report.md`` and its plots into a results directory (or its :class:`Results`); its path."""
    from .figures import figure_files, warnings_said_on_success, write_figure
    from ..safe_files import refuse_links, write_text

    check = Results.read(results)
    directory = check.directory
    refuse_links(directory, (REPORT_FILE, PLOTS_DIR))  # before anything is written: links are never followed
    comps = comparisons(check.frame, design_alpha(check.suite))
    drawn = plots_wanted()
    with warnings_said_on_success():  # a drawing that runs out of memory ends in one line, not a glyph warning each
        figures = _figures(check, comps) if drawn else {}
        if (directory / PLOTS_DIR).is_dir():  # every plot checked before the first byte of any is written
            refuse_links(directory / PLOTS_DIR, [name for stem in figures for name in figure_files(stem)])
        for stem, fig in figures.items():
            write_figure(fig, directory / PLOTS_DIR, stem)
    return write_text(directory / REPORT_FILE, _report_text(check, comps, list(figures) if drawn else None))


def _figures(check: Results, comps: list[Comparison]) -> dict[str, Any]:
    """The report's figures by file stem (matplotlib is imported here, not with the command line)."""
    from .plots import report_figures

    return report_figures(check.frame, comps, load_reference())


def _report_text(check: Results, comps: list[Comparison], plots: list[str] | None) -> str:
    frame, suite = check.frame, check.suite
    floors = noise_floors(frame)
    equiv = equivalence(frame, planned_arms(suite))
    mem_table, mem_verdict = memory_table(frame)
    pairs = pair_reports(frame, suite, floors, design_alpha(suite))
    controls = next((r for r in pairs if (r.first, r.second) == PR_PAIR), None)
    cache = cache_check(frame, suite)
    parts = [
        *_intro(check),
        *_machine_lines(suite.described),
        *headline(comps, equiv, mem_verdict, floors, controls, cache_marks(cache)),
        *cache_headline(cache),
        "",
        "## Environment",
        "",
        environment_table(suite),
        "",
        *_measurements_section(comps, floors),
        *controls_section(pairs),
        *beyond_pr_section(frame, suite, pairs),
        *_verdicts_section(frame, comps, equiv, mem_verdict, floors),
        "## Memory",
        "",
        mem_table,
        "",
        *_against_pr_section(comps),
        *_where_time_goes_section(frame),
        *cache_section(frame, suite),
        *yardstick_lines(frame),
        *_plots_section(plots),
        *_profiles_section(check.directory),
    ]
    return "\n".join(part.rstrip("\n") for part in parts) + "\n"  # blocks one line apart, tables included


def _intro(check: Results) -> list[str]:
    """The opening sentence: the variants and their runs, the design, failures, status and integrity."""
    record = check.suite.described
    variants = [a for a in planned_arms(check.suite) if not a.startswith("aa-")]
    n = [run_summary(check.frame, v, "state_dict_calls").n for v in variants]
    failed = check.frame[check.frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    which = "both loader variants" if len(variants) == 2 else f"{len(variants)} loader variants"
    return [
        "# Token2Wav loading: baseline vs optimized buffer discovery",
        "",
        f"vLLM-Omni PR 7061 replaced one `state_dict()` per named buffer with one walk of the module tree. "
        f"This report measures {which} ({', '.join(variants)}): {' + '.join(str(k) for k in n)} measured runs "
        f"after {record.get('warmup')} warm-up{'' if record.get('warmup') == 1 else 's'} per variant, order "
        f"{record.get('order')}; "
        + (f"{len(failed)} run{'' if len(failed) == 1 else 's'} failed (see Verdicts); " if len(failed) else "")
        + f"status {record.get('status')}; {check.summary or 'integrity checks found nothing wrong'}."
        + took(record),
        "",
        *([f"Design: {design}.", ""] if (design := design_sentence(check.suite)) else []),
        *([*(f"- Integrity: {p}" for p in check.problems), ""] if check.problems else []),
    ]


def took(record: Record) -> str:
    """' The benchmark took 48 s.' from its record's start and finish stamps ('' while it has no finish)."""
    if (seconds := record.seconds) is None:
        return ""
    gaps = " from start to finish, its interruptions included" if record.get("resumed_at") else ""
    return f" The benchmark took {duration(seconds, 's', 0)}{gaps}."


def _machine_lines(record: Record) -> list[str]:
    """The machine's warnings, as pyperf warns of an unstable system: what was wrong and what to do."""
    warnings = machine_warnings(record.environment.get("machine"), record.get("activity"),
                                record.settings.get("construct"))
    return [*(f"- **Machine**: {w}" for w in warnings), ""] if warnings else []


def _measurements_section(comps: list[Comparison], floors: dict[str, Any]) -> list[str]:
    alpha = comps[0].alpha if comps else ALPHA  # one error rate for the whole benchmark (a sequential design's look)
    lines = [
        "## Measurements",
        "",
        "Medians of the measured runs; spread as min–max and interquartile range; Mann-Whitney U (two-sided) "
        f"and a {confidence_words(alpha)} percentile bootstrap interval for median(optimized) − median(baseline). "
        "The kit's verdict claims a "
        f"difference when that interval excludes 0 and the rank test agrees (p < {alpha:g}), and, with an A/A benchmark, "
        "when it is beyond the noise floor: medians and ranks, which one slow run cannot flip. The PR's own rule "
        "(no claim where the min–max ranges overlap, as it did for startup) is shown beside it, labelled.",
        "",
        measurement_table(comps, floors),
        "",
    ]
    if floors:
        lines += ["### A/A noise floor", "",
                  "The optimized variant in both arms, planned like the A/B runs: any difference between the arms is "
                  "noise, so an A/B difference smaller than the floor cannot be told apart from identical loads.", "",
                  noise_floor_table(floors), ""]
    return lines


def _verdicts_section(frame, comps: list[Comparison], equiv: dict[str, Any], mem_verdict: str,
                      floors: dict[str, Any]) -> list[str]:
    failed = frame[frame["status"] == "failed"].drop_duplicates(["run_id", "source"])
    warnings = [f"- {label(c.phase)}: {note}" for c in comps for note in c.notes]
    failures = "; ".join(f"run {r.run_id} {r.variant}: {r.error}" for r in failed.itertuples())
    return [
        "## Verdicts",
        "",
        *[f"- {label(c.phase)}: {c.verdict(floors.get(c.phase))}" for c in comps],
        f"- Equivalence: {equiv['statement']}",
        f"- Memory: {mem_verdict}",
        f"- Failed runs: {len(failed)} ({failures})" if len(failed) else "- Failed runs: none",
        "",
        *(["### Spread warnings", "", *warnings, ""] if warnings else []),
    ]


def _against_pr_section(comps: list[Comparison]) -> list[str]:
    return [
        "## Against the PR's figures",
        "",
        "The PR measured Qwen2.5-Omni-3B on one AMD MI300X (ROCm 7.2, PyTorch 2.12) inside vLLM-Omni; absolute "
        "times differ across machines, so compare the ratios.",
        "",
        reference_table(comps, load_reference()),
        "",
        "### Which timer each row is",
        "",
        *timer_lines(comps, load_reference()),
        "",
    ]


def _where_time_goes_section(frame) -> list[str]:
    return [
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
    ]


def _plots_section(stems: list[str] | None) -> list[str]:
    """Links to the plots drawn, or (``None``: not drawn) how to draw them."""
    links = [f"![{stem}]({PLOTS_DIR}/{stem}.png)" for stem in stems] if stems is not None else [
        f"Not drawn (${PLOTS_ENV}=off): `omni-loader report DIR` draws them from the same files."]
    return ["## Plots", "", *links, ""]


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
        lines.append(f"- {variant_dir.name}: {links or 'no profile files'}")
    return lines + [""]
