"""A source audit for module walks inside loops (rules OL001, OL002, OL003), read with :mod:`ast`, never run.

:mod:`~.walks` (what a walk is), :mod:`~.exits` (is the loop left after it), :mod:`~.scan` (one file
reduced), :mod:`~.sources` (files read and parsed), :mod:`~.cache`, :mod:`~.calls` (calls resolved,
findings), :mod:`~.findings` (the record and its renderings), :mod:`~.baseline`, :mod:`~.limits` and
:mod:`~.source_audit` (the one call); a finding's price is :mod:`omni_loader.sweep.price`'s. Standard
library only: the pre-commit hook runs it where torch is not installed."""

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
