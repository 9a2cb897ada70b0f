"""The audits beyond Token2Wav: transformers architectures and source code, notebook 05 (``kit.audits``).

Notebook 05 builds transformers architectures on the meta device and times both discovery rules on each
(:func:`architectures`, :func:`audit`, as a table :func:`audit_frame`), places them on the sweep's B·N
line (:func:`place_on_curve`, with the sweep's own Token2Wav point :func:`with_placed_models`, the range
they span :func:`range_sentence`, which lie within a factor of two of it :func:`factor_sentence`, the
figure :func:`plot_on_curve`), and reads Python source for a whole-tree walk repeated per item of a loop,
rule OL001 (:func:`audit_sources`, its findings as Markdown :func:`findings_markdown`, why a finding's
price is neither the sweep's line nor its measured Token2Wav :func:`price_beside_sweep`).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "architectures": ".sweep.audit",
    "audit": ".sweep.audit",
    "audit_frame": ".sweep.audit",
    "place_on_curve": ".sweep.audit",
    "with_placed_models": ".sweep.audit",
    "range_sentence": ".sweep.audit",
    "factor_sentence": ".sweep.audit",
    "plot_on_curve": ".sweep.audit",
    "audit_sources": ".lint.source_audit",
    "findings_markdown": ".lint.findings",
    "price_beside_sweep": ".lint.price",
}, relative_to=__package__)
