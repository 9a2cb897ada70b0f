"""One benchmark: what it measures, and the runs that measure it.

What is measured is :class:`~omni_loader.results.spec.BenchmarkSpec`, the frozen record a results directory keeps;
:mod:`~.worker` runs one load in a fresh process (fork server, spawn or in-process) and :mod:`~.runner` the warm-ups
and measured runs, each appended to the results directory as it ends. The main job around it (profiles,
startup A/B, report) is :mod:`omni_loader.job`.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "run_benchmark": "runner",
    "benchmark_spec": "runner",
    "LoadRequest": "worker",
    "run_load": "worker",
})
