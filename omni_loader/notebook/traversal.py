"""What module traversal costs: the sweep of synthetic trees and its fits, notebooks 03 and 05 (``kit.traversal``).

Notebook 03 runs the sweep (:class:`SweepConfig`, :func:`traversal_sweep`: ``state_dict()`` and both
rules timed on trees of N modules and B buffers, the real Token2Wav placed among them), draws it with its
log-log fits (:func:`plot_sweep`), says where the real model sits on them
(:func:`placement_sentence`), splits the optimized rule's cost into per-module, per-buffer and fixed
terms (:func:`cost_summary`) and sets the baseline beside B state dicts (:func:`baseline_over_state_dicts`).
Notebook 05 runs the same sweep for the line its audited architectures are placed on, and sets its slope beside
the one of 03's saved sweep (:func:`slope_beside_saved`).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "SweepConfig": ".sweep.traversal",
    "traversal_sweep": ".sweep.traversal",
    "plot_sweep": ".sweep.traversal_plots",
    "cost_summary": ".sweep.fits",
    "baseline_over_state_dicts": ".sweep.fits",
    "placement_sentence": ".sweep.fits",
    "slope_beside_saved": ".sweep.fits",
}, relative_to=__package__)
