"""One benchmark: what it measures, and the runs that measure it.

:mod:`~.spec` (``BenchmarkSpec``: the frozen record of what is measured), :mod:`~.worker` (one load
in a fresh process: fork server, spawn or in-process) and :mod:`~.runner` (warm-ups and measured
runs, each appended to the results directory as it ends). The main job around it (profiles,
startup A/B, report) is :mod:`omni_loader.job`.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "BenchmarkSpec": "spec",
    "run_benchmark": "runner",
    "benchmark_spec": "runner",
    "LoadRequest": "worker",
    "run_load": "worker",
})
