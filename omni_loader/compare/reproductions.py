"""Reproductions side by side: several results directories (or packed archives of them) in one table.

One results directory answers "what happened on my machine"; :func:`compare_results` answers "does it hold
on other machines, versions, layouts, commits". Each directory's rows are its own statistics, as its
report.md states them, beside the PR's published figures; checks (same model, tensor digest, counts and
compared settings as the anchor) flag what is not comparable instead of mixing it silently; with
``against``, every other directory against that one, phase by phase, as pyperf's ``compare_to`` does.
The data is :mod:`~.side_by_side`'s, the rendering :mod:`~.compare_render`'s, the plot :mod:`~.ratio_plot`'s."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import ResultsError
from ..reporting.measurements import load_reference
from ..results.integrity import Results
from .side_by_side import (SideBySide, against_rows, consistency_checks,
                           default_label, read_entry)

__all__ = ["compare_results", "unique_labels"]


def compare_results(paths: Sequence[str | os.PathLike[str]],
                    against: str | os.PathLike[str] | None = None) -> SideBySide:
    """Read every results directory or archive in ``paths`` (and ``against``), check them against
    each other, and compare each with ``against`` when given. The library entry of ``omni-loader compare``. A
    directory already read and checked (a :class:`~omni_loader.results.integrity.Results`) is not read again."""
    given = ([] if against is None else [against]) + list(paths)  # against first: the anchor
    checked = {Path(p): p for p in given if isinstance(p, Results)}
    ordered = [Path(p) for p in given]
    ordered = [p for i, p in enumerate(ordered) if not any(_same(p, q) for q in ordered[:i])]
    if not ordered:
        raise ResultsError("compare needs at least one results directory or archive")
    entries = tuple(read_entry(checked.get(p, p), lab) for p, lab in zip(ordered, unique_labels(ordered)))
    anchor = entries[0]
    checks = tuple(consistency_checks(entries, anchor))
    rows = () if against is None else tuple(
        row for e in entries[1:] for row in against_rows(anchor, e, [c for c in checks if c.entry == e.label]))
    return SideBySide(entries, load_reference(), anchor.label, anchor.label if against is not None else None, checks, rows)


def unique_labels(paths: Sequence[Path]) -> list[str]:
    """Each path's table label: its name, with its parent's where two names are alike, numbered if still alike."""
    names = [default_label(p) for p in paths]
    labels = [f"{Path(p).resolve().parent.name}/{n}" if names.count(n) > 1 else n for p, n in zip(paths, names)]
    return [f"{lab} #{k + 1}" if (k := labels[:i].count(lab)) else lab for i, lab in enumerate(labels)]


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
