"""Cold and warm loads in report.md: the checkpoint's page-cache residency as a control, and what the fix is worth.

A measured run that did not load under its benchmark's ``--cache`` condition (runs.csv ``checkpoint_resident``)
is named, and the headline rows that read the checkpoint are marked. The saving is fixed work while a cold load
adds the storage's reads: :func:`fix_worth` and :func:`cold_and_warm` say what it is worth. Nothing here imports
torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..host.checkpoint_cache import CACHE_KEY, COLD_RESIDENT, WARM_RESIDENT, as_condition
from ..formatting import duration, markdown_table, mib, percent, span
from ..names import PHASE_TREE, READ_PHASES
from ..results.integrity import Results
from ..results.rows import RESIDENCY_COLUMN
from .measurements import PR_PAIR, label
from ..results.suite import Suite
from .stats import measured, phase_summary

TOUCHED_ROWS = PHASE_TREE.reading_rows  # the headline rows enclosing a phase that reads the checkpoint's files
TRAVERSAL_ROW = "buffer_discovery"  # the step the fix changes: the traversal, the same work warm or cold
SAVING_ROW = "weight_loading"  # the PR's row whose saving the fix is


@dataclass(frozen=True)
class CacheCheck:
    """One directory's page-cache condition: asked for, found by each measured run, and missed by which."""

    condition: str  # warm | cold
    runs: list[tuple[int, str, float | None]] = field(default_factory=list)  # (run id, variant, resident)
    storage: dict[str, Any] = field(default_factory=dict)
    bytes_read: int | None = None  # the bytes a load reads of the checkpoint's files

    @property
    def recorded(self) -> bool:
        return any(r is not None for _, _, r in self.runs)

    @property
    def off(self) -> list[tuple[int, str, float | None]]:
        """The measured runs that did not load under :attr:`condition`."""
        return [run for run in self.runs if as_condition(self.condition, run[2]) is False]

    def off_text(self) -> str:
        """'run 7 (optimized) found 62.0% resident; run 9 ...', the runs of :attr:`off`."""
        return "; ".join(f"run {i} ({v}) found {percent(r)} of the checkpoint resident" for i, v, r in self.off)


def cache_check(frame, suite: Suite) -> CacheCheck:
    """The :class:`CacheCheck` of a results directory's rows (``check_results(...).frame``) and metadata.json."""
    record = suite.described
    saved = record.get(CACHE_KEY) if isinstance(record.get(CACHE_KEY), dict) else {}
    condition = str(suite.spec.get("cache") or saved.get("condition") or "warm")
    runs = []
    if RESIDENCY_COLUMN in frame and len(frame):
        ok = measured(frame)
        ok = ok[ok["source"] == "load"].drop_duplicates("run_id").sort_values("run_id")
        runs = [(int(i), str(v), None if r is None or str(r) in ("", "nan") else float(r))
                for i, v, r in zip(ok["run_id"], ok["variant"], ok[RESIDENCY_COLUMN])]
    sizes = saved.get("bytes") if isinstance(saved.get("bytes"), dict) else {}
    storage = saved.get("storage") if isinstance(saved.get("storage"), dict) else {}
    return CacheCheck(condition, runs, storage, sum(int(b) for b in sizes.values()) if sizes else None)


def cache_marks(check: CacheCheck) -> dict[str, str]:
    """Per headline row that encloses a reading phase, the mark it carries when a run was not under the condition."""
    if not check.off:
        return {}
    ids = ", ".join(str(i) for i, _, _ in check.off)
    mark = f"; **not {check.condition}**: run{'s' if len(check.off) > 1 else ''} {ids} (see Page cache)"
    return dict.fromkeys(TOUCHED_ROWS, mark)


def cache_headline(check: CacheCheck) -> list[str]:
    """The headline's bullet on the page cache (nothing for a directory that recorded no residency)."""
    if not check.recorded:
        return []
    known = sorted(r for _, _, r in check.runs if r is not None)
    found = span(percent(known[0]), percent(known[-1]))
    if check.off:
        return [f"- **Page cache**: {check.condition} condition, but {check.off_text()}, so the rows enclosing the "
                f"phases that read it ({', '.join(label(p) for p in TOUCHED_ROWS)}) are marked not {check.condition}."]
    return [f"- **Page cache**: {check.condition}; every measured run found {found} of the checkpoint's bytes in the "
            "page cache before its load."]


def fix_worth(frame, condition: str) -> str:
    """The PR's saving beside the whole load in this directory's ``condition``: one sentence, from the medians."""
    saving = _saving(frame)
    whole = phase_summary(frame, PR_PAIR[0], "total")
    if saving is None or not whole.n:
        return ""
    return (f"In this {condition} condition the fix saves {duration(saving)} of {label(SAVING_ROW)} (median "
            f"{PR_PAIR[0]} − median {PR_PAIR[1]}), {percent(saving / whole.median)} of the whole {PR_PAIR[0]} load "
            f"({duration(whole.median)}).")


def _saving(frame, phase: str = SAVING_ROW) -> float | None:
    a, b = (phase_summary(frame, v, phase) for v in PR_PAIR)
    return a.median - b.median if a.n and b.n else None


def cache_section(frame, suite: Suite) -> list[str]:
    """``## Page cache``: condition, residency, reading phases, storage and worth; nothing if unrecorded."""
    check = cache_check(frame, suite)
    if not check.recorded:
        return []
    limit = (f"at least {percent(WARM_RESIDENT, 0)} resident" if check.condition == "warm"
             else f"at most {percent(COLD_RESIDENT, 0)} resident after its eviction")
    read = f" of the {mib(check.bytes_read)} a load reads" if check.bytes_read else ""
    lines = ["## Page cache", "",
             f"Condition: **{check.condition}** (`--cache {check.condition}`). Before each load, outside its phases, "
             f"the worker measured the share{read} in the page cache (`mincore` on each shard's header and "
             f"`token2wav.` tensors, and on `spk_dict.pt`){' after evicting them' if check.condition == 'cold' else ''}; "
             f"a run is {check.condition} with {limit}.", ""]
    if check.off:
        lines += [f"**Not {check.condition}**: {check.off_text()}. The rows enclosing the phases that read the "
                  f"checkpoint ({', '.join(label(p) for p in TOUCHED_ROWS)}) are marked: their times hold "
                  "storage reads the condition does not name.", ""]
    ok = measured(frame)
    ok = ok[(ok["phase"] == "total") & (ok["source"] == "load")]
    total = {int(i): float(s) for i, s in zip(ok["run_id"], ok["seconds"])}
    rows = [[str(i), v, "—" if r is None else percent(r), duration(total.get(i)) if i in total else "—",
             check.condition if as_condition(check.condition, r) is not False else f"**not {check.condition}**"]
            for i, v, r in check.runs]
    lines += [markdown_table(rows, ["Run", "Variant", "Resident before the load", "Whole load", "Condition"]), ""]
    lines += _reading_phases(frame)
    return lines + [line for s in (_storage_sentence(check), fix_worth(frame, check.condition)) if s for line in (s, "")]


def _reading_phases(frame) -> list[str]:
    """The phases that read: medians, and per run the major faults and the bytes fetched from storage."""
    ok = measured(frame)
    ok = ok[ok["source"] == "load"]
    rows = []
    for phase in READ_PHASES:
        mine = ok[ok["phase"] == phase]
        if not len(mine):
            continue
        medians = [phase_summary(frame, v, phase) for v in PR_PAIR]
        faults = mine["major_faults"].dropna() if "major_faults" in mine else []
        nbytes = mine["read_bytes"].dropna() if "read_bytes" in mine else []
        rows.append([label(phase), *(duration(s.median) if s.n else "—" for s in medians),
                     f"{faults.median():,.0f}" if len(faults) else "—", mib(nbytes.median()) if len(nbytes) else "—"])
    if not rows:
        return []
    return ["The phases that read the checkpoint (major faults: pages read from storage on first touch of a "
            "mapping; read from storage: `read_bytes` of `/proc/self/io`; both medians per run, both variants):", "",
            markdown_table(rows, ["Phase", f"{PR_PAIR[0]} median", f"{PR_PAIR[1]} median", "Major faults",
                                  "Read from storage"]), ""]


def _storage_sentence(check: CacheCheck) -> str:
    s = check.storage
    if not s:
        return ""
    if s.get("error"):
        return f"The storage's read throughput could not be measured ({s['file']}: {s['error']})."
    before = s.get("resident_before")
    if before is not None and before > COLD_RESIDENT:
        return (f"Reading {s['file']} once after evicting it kept {percent(before)} of it resident (tmpfs, or mapped "
                f"elsewhere): the {_rate(s)} it read at is the page cache's, not the storage's.")
    at = (f"; at that rate the {mib(check.bytes_read)} a load reads take {duration(check.bytes_read / s['bytes_per_second'])}"
          if check.bytes_read and s.get("bytes_per_second") else "")
    return f"Storage: {s['file']} ({mib(s['bytes'])}) read once, whole, after its eviction: {_rate(s)}{at}."


def _rate(storage: dict[str, Any]) -> str:
    rate = storage.get("bytes_per_second")
    return f"{rate / (1 << 20):,.0f} MiB/s" if rate else "an unknown rate"


def cold_and_warm(warm: str | os.PathLike[str] | Results, cold: str | os.PathLike[str] | Results) -> str:
    """A Markdown paragraph on what the PR's fix is worth warm and cold, from a warm and a cold results directory:
    each directory's whole load and saving, the saving's share of each, and what each run found resident; then
    the two side by side, in numbers (the savings need not be equal: the cold one also reads from storage)."""
    parts, figures = [], {}
    checks = [Results.read(directory) for directory in (warm, cold)]
    caches = [cache_check(check.frame, check.suite) for check in checks]
    alike = caches[0].condition == caches[1].condition  # then the directory's name tells the two apart
    for check, cache in zip(checks, caches):
        directory = check.directory
        whole, saving = phase_summary(check.frame, PR_PAIR[0], "total"), _saving(check.frame)
        if not whole.n or saving is None:
            parts.append(f"{Path(directory).name} ({cache.condition}) holds no measured runs of both variants.")
            continue
        figures[cache.condition] = (whole.median, saving, _saving(check.frame, TRAVERSAL_ROW))
        known = [r for _, _, r in cache.runs if r is not None]
        low, high = (percent(min(known)), percent(max(known))) if known else ("", "")
        found = f"; checkpoint resident before each run {span(low, high)}" if known else ""
        off = f"; **not {cache.condition}**: {cache.off_text()}" if cache.off else ""
        name = f" ({Path(directory).name})" if alike else ""
        parts.append(f"**{cache.condition.capitalize()}**{name}: the fix saves {duration(saving)} of "
                     f"{label(SAVING_ROW)}, {percent(saving / whole.median)} of a {duration(whole.median)} "
                     f"whole {PR_PAIR[0]} load{found}{off}.")
    if {"warm", "cold"} <= set(figures):
        (warm_whole, warm_saving, warm_walk), (cold_whole, cold_saving, cold_walk) = figures["warm"], figures["cold"]
        more = "more" if cold_saving > warm_saving else "less"
        longer = "longer" if cold_whole > warm_whole else "shorter"  # a tiny model's cold load can be the shorter
        parts.append(f"A cold load takes {cold_whole / warm_whole:.2f}× the warm one ({duration(abs(cold_whole - warm_whole))} "
                     f"{longer}); the fix saves {duration(abs(cold_saving - warm_saving))} {more} cold than warm, "
                     f"{percent(cold_saving / cold_whole)} of the cold load against {percent(warm_saving / warm_whole)} "
                     "of the warm one.")
        if warm_walk is not None and cold_walk is not None:  # the traversal alone, which storage does not touch
            walk, rest = cold_walk - warm_walk, (cold_saving - warm_saving) - (cold_walk - warm_walk)
            parts.append(f"{label(TRAVERSAL_ROW)} alone, the traversal the fix removes, saves {duration(warm_walk)} "
                         f"warm and {duration(cold_walk)} cold: between the two conditions the traversal's saving "
                         f"differs by {duration(abs(walk))}, the rest of {label(SAVING_ROW)}'s by {duration(abs(rest))} "
                         "(phases the fix does not change, in different runs).")
    return " ".join(parts)
