"""A source audit for module walks inside loops (rules OL001, OL002), read with :mod:`ast`, never run.

:mod:`~.walks` (what counts as a whole-tree walk, what a receiver is built from), :mod:`~.exits`
(whether a loop is left right after a walk), :mod:`~.scan` (one file's functions reduced to their
walks, calls and loops), :mod:`~.sources` (paths walked, files read with a bound, module names,
imports, ignore comments, parsing in processes), :mod:`~.cache` (scans kept by content),
:mod:`~.calls` (calls resolved across the sources, functions summarised, findings),
:mod:`~.findings` (the ``Finding`` record, its rule and severity: text, JSON, SARIF, GitHub,
Markdown), :mod:`~.baseline` (findings already known), :mod:`~.limits` (the bounds) and
:mod:`~.source_audit` (the one call). A finding's price, B·N module visits at the cost measured here, is the
traversal sweep's (:mod:`omni_loader.sweep.price`).
Every module here imports the standard library only (and the kit's own stdlib-only helpers): the
pre-commit hook runs it where torch is not installed.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "scan_sources": "source_audit",
    "SourceAudit": "source_audit",
    "Finding": "findings",
    "Price": "findings",
    "text_lines": "findings",
    "to_json": "findings",
    "to_sarif": "findings",
    "findings_markdown": "findings",
})
