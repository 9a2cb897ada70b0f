"""The source audit in one call: read the sources, summarise their functions, return the findings.

Why a result object as well as a list: the command line needs more than the findings (how many
files and functions were read, how many findings an ignore comment silenced, which calls inside
loops could not be followed, how long it took) to say in one closing line what was and was not
checked; a notebook usually wants just :func:`audit_sources`'s list.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..formatting import count
from .calls import Index, Unresolved
from .findings import Finding
from .sources import read_sources


@dataclass(frozen=True)
class SourceAudit:
    """What an audit of some sources found, and what it read."""

    findings: tuple[Finding, ...]
    unresolved: tuple[Unresolved, ...]
    files: int
    functions: int
    suppressed: int
    seconds: float

    def summary(self) -> str:
        """One line: findings, files and functions read, silenced findings, unresolved calls, time."""
        parts = [f"{count(len(self.findings))} finding{'s' if len(self.findings) != 1 else ''} in "
                 f"{count(self.files)} files ({count(self.functions)} functions) in {self.seconds:.1f} s"]
        if self.suppressed:
            parts.append(f"{count(self.suppressed)} silenced by an ignore comment")
        if self.unresolved:
            parts.append(f"{count(len(self.unresolved))} calls inside loops not followed (receiver unknown; "
                         "--unresolved lists them)")
        return "; ".join(parts)


def scan_sources(paths: Iterable[str | Path], exclude: Sequence[str] = ()) -> SourceAudit:
    """Audit the Python files under ``paths`` (files or folders; nothing is imported or run), less the files
    an ``exclude`` glob matches (``*/testing/*``)."""
    start = time.perf_counter()
    files = read_sources(paths, exclude)
    index = Index(files)
    findings, unresolved = index.run()
    return SourceAudit(tuple(findings), tuple(unresolved), len(files),
                       sum(len(f.scan.scopes) - 1 for f in files), index.suppressed, time.perf_counter() - start)


def audit_sources(paths: Sequence[str | Path] | str | Path, *, modules: int | None = None,
                  items: int | None = None, like: str | None = None, seconds_per_visit: float | None = None,
                  results: str | Path | None = None, exclude: Sequence[str] = ()) -> list[Finding]:
    """The findings of the Python files under ``paths``, priced when a tree is given (``modules`` and
    ``items``, or ``like='token2wav'`` or a transformers model type); ``seconds_per_visit`` fixes the
    per-module-visit cost, else it comes from ``results`` (a saved sweep), the cache or a quick sweep."""
    from .price import VisitCost, price_findings, tree_size, visit_cost

    found = list(scan_sources([paths] if isinstance(paths, (str, Path)) else paths, exclude).findings)
    size = tree_size(modules, items, like)
    if size is None or not found:
        return found
    cost = VisitCost(seconds_per_visit, "given") if seconds_per_visit else visit_cost(results)
    return price_findings(found, size, cost)
