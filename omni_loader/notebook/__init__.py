"""The kit's face for notebooks: ``from omni_loader import notebook as kit``.

Notebooks call this one module, so the kit's folders can change underneath without breaking one. At most 30 names:
a few nouns whose methods do the work, the verbs that make them, and the helpers that show
(``docs/my_first_ab.ipynb`` is a tiny A/B in five cells). The names are grouped below by what a notebook
does with them; the nouns' methods (``kit.results(out).controls()``, ``kit.tree().agreement()``) do the rest.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    # the notebook itself
    "check_parameters": "parameters",
    "results_dir": "files",
    "execute": "files",
    # showing
    "show": "showing",
    "table": ".formatting",
    "readable": "showing",
    "key_values": "showing",
    "short_duration": ".formatting",
    "count": ".formatting",
    "mib": ".formatting",
    # the machine and the snapshot
    "device_banner": ".host.devices",
    "resolve_device": ".host.devices",
    "resolve_snapshot": ".token2wav.checkpoint",
    "LoadOptions": ".token2wav.options",
    # module trees and the two rules (03, 04)
    "rules_as_code": "story",
    "tree": "explore",
    "hazards": "explore",
    "load_model": "waveform",
    # what module traversal costs (03, 05)
    "sweep": ".sweep.traversal",
    "audit": ".sweep.audit",
    "audit_sources": ".sweep.price",
    # the benchmark (01, 05): its spec, its run, its saved results as the report's sections
    "benchmark_spec": ".bench.runner",
    "reproduce": "sections",
    "results": "sections",
    "discovery_ratios": "sections",
    "BUILTIN_VARIANTS": ".token2wav.variants",
    "parse_variant": ".token2wav.variants",
    # the profiles (02) and the startup A/B (06)
    "profile": "profiles",
    "start_stage_groups": "stages",
    "timeline": "stages",
})
