"""omni-loader: profile model-loading code, starting with vLLM-Omni's Qwen2.5-Omni Token2Wav loader.

The public API, by module (imported lazily, so ``import omni_loader`` stays cheap):

- model:      ``build_model``, ``inventory``, ``config_dict``
- discovery:  ``find_persistent_buffers``, ``count_state_dict_calls``, ``rule_hazards``, ``compare_variants``
- checkpoint: ``resolve_snapshot``, ``open_snapshot``, ``find_in_hub_cache``, ``synthesize``, ``iter_token2wav_weights``
- loader:     ``load_token2wav``, ``LoadResult``
- runner:     ``reproduce``, ``run_benchmark``, ``BenchmarkSpec``, ``plan_runs``
- results:    ``check_results`` (runs.csv checked: untrusted rows left out and named), ``read_runs``, ``read_metadata``
- report:     ``write_report``, ``render_report``
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_API = {
    "build_model": "model",
    "inventory": "model",
    "config_dict": "model",
    "find_persistent_buffers": "discovery",
    "count_state_dict_calls": "discovery",
    "rule_hazards": "discovery",
    "compare_variants": "discovery",
    "resolve_snapshot": "checkpoint",
    "open_snapshot": "checkpoint",
    "find_in_hub_cache": "checkpoint",
    "synthesize": "checkpoint",
    "iter_token2wav_weights": "checkpoint",
    "load_token2wav": "loader",
    "LoadResult": "loader",
    "reproduce": "runner",
    "run_benchmark": "runner",
    "BenchmarkSpec": "runner",
    "plan_runs": "runner",
    "check_results": "results",
    "read_runs": "results",
    "read_metadata": "results",
    "write_report": "report",
    "render_report": "report",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    raise AttributeError(f"module 'omni_loader' has no attribute {name!r}")
