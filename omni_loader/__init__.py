"""omni-loader: profile model-loading code, starting with vLLM-Omni's Qwen2.5-Omni Token2Wav loader.

The public API, by module (imported lazily, so ``import omni_loader`` stays cheap; every name
below is also importable from its module):

- options:    ``LoadOptions`` (layout, device, dtype, construction mode of one load)
- model:      ``build_model``, ``inventory``, ``config_dict``
- discovery:  ``find_persistent_buffers``, ``count_state_dict_calls``, ``rule_hazards``, ``compare_variants``
- variants:   ``Variant``, ``BUILTIN_VARIANTS``, ``parse_variant``
- checkpoint: ``resolve_snapshot``, ``open_snapshot``, ``find_in_hub_cache``, ``synthesize``, ``iter_token2wav_weights``
- loader:     ``load_token2wav``, ``LoadResult``
- planner:    ``plan_runs``, ``PlannedRun``
- spec:       ``BenchmarkSpec``
- runner:     ``reproduce``, ``run_benchmark``
- results:    ``check_results`` (runs.csv checked: untrusted rows left out and named), ``read_runs``,
              ``read_metadata``, ``benchmark`` (one named benchmark of a results directory)
- stats:      ``phase_summary``, ``equivalence``, ``noise_floor`` (and ``stats.compare``)
- report:     ``write_report``, ``render_report``
- compare:    ``compare_results``; archive: ``pack``
- profiling:  ``profile_variants``, ``ProfileSettings``
- traversal:  ``traversal_sweep``, ``SweepConfig``

``audit.audit``, ``serve_ab.serve_ab`` and ``stats.compare`` share their name with a module of the
package, so they are imported from their modules only.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
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
    "resolve_snapshot": "checkpoint",
    "open_snapshot": "checkpoint",
    "find_in_hub_cache": "checkpoint",
    "synthesize": "checkpoint",
    "iter_token2wav_weights": "checkpoint",
    "load_token2wav": "loader",
    "LoadResult": "loader",
    "plan_runs": "planner",
    "PlannedRun": "planner",
    "BenchmarkSpec": "spec",
    "reproduce": "runner",
    "run_benchmark": "runner",
    "check_results": "results",
    "read_runs": "results",
    "read_metadata": "results",
    "benchmark": "results",
    "phase_summary": "stats",
    "equivalence": "stats",
    "noise_floor": "stats",
    "write_report": "report",
    "render_report": "report",
    "compare_results": "compare",
    "pack": "archive",
    "profile_variants": "profiling",
    "ProfileSettings": "profiling",
    "traversal_sweep": "traversal",
    "SweepConfig": "traversal",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'omni_loader' has no attribute {name!r}")
