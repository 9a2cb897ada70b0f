"""The source audit in one call: read the sources, summarise their functions, return the findings.

Why a result object as well as a list: the command line needs more than the findings (how many
files and functions were read, which paths could not be audited, how many findings an ignore
comment silenced, which calls inside loops could not be followed, how many files came from the
cache, how long it took) to say what was and was not checked; a notebook usually wants just
:func:`audit_sources`'s list, which raises on a path it could not audit.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..formatting import count
from .calls import Index, Unresolved
from .findings import RULES, Finding, findings_markdown, ordered
from .limits import MAX_FILE_BYTES
from .sources import SourceError, gc_paused, read_sources


@dataclass(frozen=True)
class SourceAudit:
    """What an audit of some sources found, and what it read."""

    findings: tuple[Finding, ...]
    unresolved: tuple[Unresolved, ...]
    files: int
    functions: int
    suppressed: int
    seconds: float
    failures: tuple[str, ...] = ()  # one line per path that could not be audited
    cached: int = 0  # files whose scan came from the cache
    cache_problem: str = ""  # why the cache was not used ('' when it was, or was not asked for)

    def summary(self) -> str:
        """One line: findings, files and functions read, silenced findings, unresolved calls, time."""
        parts = [f"{count(len(self.findings))} finding{'s' if len(self.findings) != 1 else ''} in "
                 f"{count(self.files)} files ({count(self.functions)} functions) in {self.seconds:.1f} s"]
        if self.failures:
            parts.append(f"{count(len(self.failures))} path{'s' if len(self.failures) != 1 else ''} not audited")
        if self.cached:
            parts.append(f"{count(self.cached)} read from the cache")
        if self.cache_problem:
            parts.append(f"cache off: {self.cache_problem}")
        if self.suppressed:
            parts.append(f"{count(self.suppressed)} silenced by an ignore comment")
        if self.unresolved:
            parts.append(f"{count(len(self.unresolved))} calls inside loops not followed (receiver unknown; "
                         "--unresolved lists them)")
        return "; ".join(parts)


class Findings(tuple):
    """A source audit's findings (a tuple of :class:`Finding`, in order) and what a notebook shows of them."""

    def markdown(self, relative_to: str | Path | None = None) -> str:
        """One row per finding (:func:`findings_markdown`)."""
        return findings_markdown(self, relative_to)

    def price_beside(self, sweep: Any) -> str:
        """Why a finding's price is neither ``sweep``'s B·N line nor its measured real model
        (:func:`~omni_loader.lint.price.price_beside_sweep`)."""
        from .price import price_beside_sweep

        return price_beside_sweep(self, sweep)


def scan_sources(paths: Iterable[str | Path], exclude: Sequence[str] = (), *, rules: Iterable[str] = tuple(RULES),
                 once: bool = False, max_bytes: int = MAX_FILE_BYTES, workers: int | None = None,
                 cache: bool = True) -> SourceAudit:
    """Audit the Python files under ``paths`` (files or folders; nothing is imported or run), less the files
    an ``exclude`` glob matches (``*/testing/*``). ``rules``: the ids to report (every rule unless told; the
    command reports OL002 only when selected); ``once``: also the walks that run at most once per call, as
    notes; ``max_bytes``: the size cap per file (0: none); ``workers``: processes to parse in (default: every
    CPU); ``cache``: reuse (and keep) earlier scans of the same bytes. Paths that cannot be audited are in
    ``failures``, the rest audited."""
    from .cache import Cache

    start = time.perf_counter()
    store = Cache() if cache else None
    with gc_paused():
        files, failures = read_sources(paths, exclude, max_bytes, workers, store)
        index = Index(files, frozenset(rules), once)
        findings, unresolved = index.run()
    return SourceAudit(tuple(ordered(findings)), tuple(unresolved), len(files),
                       sum(len(f.scan.scopes) - 1 for f in files), index.suppressed, time.perf_counter() - start,
                       tuple(failures), store.used if store else 0, store.problem if store else "")


def audit_sources(paths: Sequence[str | Path] | str | Path, *, modules: int | None = None,
                  items: int | None = None, like: str | None = None, seconds_per_visit: float | None = None,
                  results: str | Path | None = None, exclude: Sequence[str] = ()) -> Findings:
    """The findings of the Python files under ``paths``, priced when a tree is given (``modules`` and
    ``items``, or ``like='token2wav'`` or a transformers model type); ``seconds_per_visit`` fixes the
    per-module-visit cost, else it comes from ``results`` (a saved sweep), the cache or a quick sweep."""
    from .price import VisitCost, price_findings, tree_size, visit_cost

    from .price import check_visit_cost

    if seconds_per_visit is not None:
        check_visit_cost(seconds_per_visit)
    size = tree_size(modules, items, like)
    audit = scan_sources([paths] if isinstance(paths, (str, Path)) else paths, exclude)
    if audit.failures:
        raise SourceError("; ".join(audit.failures))
    found = list(audit.findings)
    if size is None or not found:
        return Findings(found)
    cost = VisitCost(seconds_per_visit, "given") if seconds_per_visit else visit_cost(results)
    return Findings(ordered(price_findings(found, size, cost)))
