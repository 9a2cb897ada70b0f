"""omni-loader: profile model-loading code, starting with vLLM-Omni's Qwen2.5-Omni Token2Wav loader.

The package is folders that name its parts, from the ground up (each folder's ``__init__`` is its
API, imported lazily, so ``import omni_loader`` stays cheap):

- ``host/``       the machine a load runs on and the phase clock
- ``token2wav/``  the model, its checkpoint and vLLM-Omni's load path, the variants' steps
- ``results/``    the results directory: run plan, runs.csv, metadata.json, checks, one writer, archives
- ``bench/``      one benchmark: its spec, the worker process, the runs
- ``reporting/``  statistics, controls, report.md and plots, from saved results
- ``profiling/``  cProfile, py-spy, torch.profiler and flamegraphs of one load
- ``startup/``    the stage server, the startup A/B and the per-stage timeline
- ``compare/``    reproductions side by side
- ``sweep/``      what module traversal costs, and the architecture audit
- ``lint/``       the source audit: whole-tree module walks inside loops, read from source (rule OL001)
- ``notebook/``   what the notebooks need beyond the rest
- ``cli/``        the ``omni-loader`` command

and, at the top, the shared vocabulary (``names``, ``errors``, ``formatting``, ``progress``) and
:mod:`omni_loader.job`, the main job. The names below are the ones a notebook or script starts with.
"""

from __future__ import annotations

from .lazy import exports

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = exports(__name__, {
    "LoadOptions": "token2wav.options",
    "build_model": "token2wav.model",
    "inventory": "token2wav.model",
    "find_persistent_buffers": "token2wav.discovery",
    "count_state_dict_calls": "token2wav.discovery",
    "Variant": "token2wav.variants",
    "parse_variant": "token2wav.variants",
    "resolve_snapshot": "token2wav.checkpoint",
    "synthesize": "token2wav.checkpoint",
    "load_token2wav": "token2wav.loader",
    "plan_runs": "results.planner",
    "check_results": "results.integrity",
    "read_runs": "results.rows",
    "read_metadata": "results.suite",
    "benchmark": "results.suite",
    "pack": "results.archive",
    "BenchmarkSpec": "results.spec",
    "run_benchmark": "bench.runner",
    "reproduce": "job",
    "benchmark_spec": "bench.runner",
    "phase_summary": "reporting.stats",
    "equivalence": "reporting.stats",
    "noise_floor": "reporting.stats",
    "write_report": "reporting.report",
    "render_report": "reporting.report",
    "compare_results": "compare.reproductions",
    "profile_variants": "profiling",
    "ProfileSettings": "profiling",
    "traversal_sweep": "sweep.traversal",
    "SweepConfig": "sweep.traversal",
})
__all__ = ["__version__", *__all__]
