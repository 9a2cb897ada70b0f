"""What module traversal costs, apart from Token2Wav: the synthetic sweep and the architecture audit.

:mod:`~.traversal` (the sweep), :mod:`~.trees`, :mod:`~.fits`, :mod:`~.traversal_plots`, :mod:`~.discovery_timing`,
:mod:`~.audit` (transformers architectures) and :mod:`~.price` (a source-audit finding priced).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "traversal_sweep": "traversal",
    "SweepConfig": "traversal",
    "audit_model": "audit",
    "time_discovery": "discovery_timing",
})
