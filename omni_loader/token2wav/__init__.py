"""Token2Wav and how vLLM-Omni loads it: the thing measured.

:mod:`~.options` (``LoadOptions``: layout, device, dtype, construction mode of one load),
:mod:`~.model` (the module tree in the vllm-omni and transformers layouts, construction modes),
:mod:`~.checkpoint` (Hub snapshot layout, offline cache lookup, synthetic snapshots),
:mod:`~.discovery` (the two buffer-discovery rules, the ``state_dict()`` counter, rule hazards),
:mod:`~.steps` (the load steps a variant can replace), :mod:`~.variants` (variants naming their
steps) and :mod:`~.loader` (vLLM-Omni's load path, read top to bottom). Nothing here knows about
benchmarks, results directories or reports.
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
