"""Token2Wav and how vLLM-Omni loads it: the thing measured, knowing nothing of benchmarks or reports.

:mod:`~.options` (``LoadOptions``), :mod:`~.model` (the module tree in both layouts), :mod:`~.checkpoint` (Hub
snapshots, cache lookup, synthetic ones), :mod:`~.discovery` (the two buffer-discovery rules),
:mod:`~.steps` and :mod:`~.variants` (the load steps a variant names), :mod:`~.loader` (the load path).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "LoadOptions": "options",
    "build_model": "model",
    "inventory": "model",
    "config_dict": "model",
    "find_persistent_buffers": "discovery",
    "count_state_dict_calls": "discovery",
    "rule_hazards": "discovery",
    "compare_variants": "discovery",
    "Variant": "variants",
    "BUILTIN_VARIANTS": "variants",
    "parse_variant": "variants",
    "Snapshot": "checkpoint",
    "resolve_snapshot": "checkpoint",
    "open_snapshot": "checkpoint",
    "find_in_hub_cache": "checkpoint",
    "synthesize": "checkpoint",
    "iter_token2wav_weights": "checkpoint",
    "load_token2wav": "loader",
    "LoadResult": "loader",
})
