"""Reproductions side by side: several results directories (or packed archives of them) in one table.

One results directory answers "what happened on my machine"; :func:`compare_results` answers "does
it hold on other machines, other torch versions, the other layout, the next commit". It reads every
directory with :func:`omni_loader.results.check_results` (any schema this kit reads; a newer or
unknown one is refused in one line), takes each directory's own statistics for the PR's rows
(:func:`omni_loader.reporting.measurements.comparisons`: medians, spread, ratio, verdict, as its report.md
states them) and adds:

- the PR's own figures as a reference row (``data/reference/pr7061.json``);
- checks before anything is set side by side: the same model, tensor digest (the same checkpoint loads
  the same bytes on any device), counts and settings (each option declared ``compared``: ``--construct``...)
  as the first directory (or the ``against`` one). A mismatch is shown in the table and explained, never silently mixed; a
  directory of another layout or dtype loads another module tree, so its digest and counts are not
  compared, and the table says so;
- with ``against``: every other directory against that one, phase by phase and variant by variant,
  as pyperf's ``compare_to`` does: the ratio of medians and a Mann-Whitney verdict on the raw
  samples (e.g. one machine before and after a torch upgrade).

This module is the entry point and the names a notebook or script uses. The data lives in
:mod:`omni_loader.compare.side_by_side` (:class:`SideBySide`), the rendering in
:mod:`omni_loader.compare.compare_render` (:func:`render_markdown`, :func:`render_csv`, :func:`to_json`,
:func:`write_compare`), the plot in :func:`omni_loader.compare.ratio_plot.directories_ratio_figure`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import ResultsError
from ..reporting.measurements import load_reference
from .side_by_side import (SideBySide, against_rows, consistency_checks,
                           default_label, read_entry)

__all__ = ["compare_results", "unique_labels"]


def compare_results(paths: Sequence[str | os.PathLike[str]],
                    against: str | os.PathLike[str] | None = None) -> SideBySide:
    """Read every results directory or archive in ``paths`` (and ``against``), check them against
    each other, and compare each with ``against`` when given. The library entry of ``omni-loader compare``."""
    ordered = [Path(p) for p in paths]
    against_path = Path(against) if against is not None else None
    if against_path is not None:
        ordered = [against_path] + [p for p in ordered if not _same(p, against_path)]
    ordered = [p for i, p in enumerate(ordered) if not any(_same(p, q) for q in ordered[:i])]
    if not ordered:
        raise ResultsError("compare needs at least one results directory or archive")
    entries = tuple(read_entry(p, lab) for p, lab in zip(ordered, unique_labels(ordered)))
    anchor = entries[0]
    checks = tuple(consistency_checks(entries, anchor))
    result = SideBySide(entries, load_reference(), anchor.label, anchor.label if against_path else None, checks)
    if against_path is None:
        return result
    rows = tuple(row for e in entries[1:] for row in against_rows(anchor, e, result.checks_for(e.label)))
    return SideBySide(entries, result.reference, anchor.label, anchor.label, checks, rows)


def unique_labels(paths: Sequence[Path]) -> list[str]:
    """Each path's table label: its name, with its parent's where two names are alike, numbered if still alike."""
    names = [default_label(p) for p in paths]
    labels = [f"{Path(p).resolve().parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names)]
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} #{seen[lab]}")
    return out


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
