"""What module traversal costs, apart from Token2Wav: the synthetic sweep and the architecture audit.

:mod:`~.traversal` (the sweep), :mod:`~.trees`
(synthetic module trees), :mod:`~.fits` (log-log fits and the cost model), :mod:`~.traversal_plots` (its figure), :mod:`~.discovery_timing` (one
discovery rule timed) and :mod:`~.audit` (any transformers architecture audited for the
``state_dict()``-per-buffer cost) and :mod:`~.price` (a source-audit finding priced at the per-visit cost measured
here).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "traversal_sweep": "traversal",
    "SweepConfig": "traversal",
    "audit_model": "audit",
    "time_discovery": "discovery_timing",
})
