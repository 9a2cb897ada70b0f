"""The source audit in one call: read the sources, summarise their functions, return the findings, with what
was read and what was not (the command line says both; a notebook usually wants just the findings)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..formatting import count
from .calls import Index, Unresolved
from .findings import RULES, Finding, ordered
from .limits import MAX_FILE_BYTES
from .sources import gc_paused, read_sources


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
        parts = [f"{count(len(self.findings), 'finding')} in {count(self.files)} files "
                 f"({count(self.functions)} functions) in {self.seconds:.1f} s"]
        if self.failures:
            parts.append(f"{count(len(self.failures), 'path')} not audited")
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


def scan_sources(paths: Iterable[str | Path], exclude: Sequence[str] = (), *, rules: Iterable[str] = tuple(RULES),
                 once: bool = False, max_bytes: int = MAX_FILE_BYTES, workers: int | None = None,
                 cache: bool = True) -> SourceAudit:
    """Audit the Python files under ``paths`` (nothing is imported or run), less those an ``exclude`` glob
    matches. ``rules``: the ids to report (default: all); ``once``: also walks run at most once per call, as
    notes; ``max_bytes``: the size cap per file (0: none); ``workers``: processes to parse in (default: every
    CPU); ``cache``: reuse earlier scans of the same bytes. Paths not audited are in ``failures``."""
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
