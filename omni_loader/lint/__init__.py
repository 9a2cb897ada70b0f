"""A source audit for whole-tree module walks inside loops (rule OL001), read with :mod:`ast`, never run.

:mod:`~.walks` (what counts as a whole-tree walk, what a receiver is built from), :mod:`~.exits`
(whether a loop is left right after a walk), :mod:`~.scan` (one file's functions reduced to their
walks, calls and loops), :mod:`~.sources` (paths, module names, imports, ignore comments),
:mod:`~.calls` (calls resolved across the sources, functions summarised, findings),
:mod:`~.findings` (the ``Finding`` record: text, JSON, SARIF, Markdown), :mod:`~.price` (B·N module
visits at the cost measured here) and :mod:`~.source_audit` (the one call).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "audit_sources": "source_audit",
    "scan_sources": "source_audit",
    "SourceAudit": "source_audit",
    "Finding": "findings",
    "Price": "findings",
    "text_lines": "findings",
    "to_json": "findings",
    "to_sarif": "findings",
    "findings_markdown": "findings",
    "TreeSize": "price",
    "VisitCost": "price",
    "tree_size": "price",
    "visit_cost": "price",
    "price_findings": "price",
})
