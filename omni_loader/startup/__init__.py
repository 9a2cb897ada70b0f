"""Startup, the PR's fourth row: the stage server, the startup A/B and the per-stage timeline.

:mod:`~.server` (a code2wav stage server that logs as vLLM-Omni does), :mod:`~.stage_group`
(stages started together: one interleaved log, one /health), :mod:`~.one_run` (one startup run,
start to /health), :mod:`~.serve_ab` (the startup A/B), :mod:`~.logfigures` (figures read from
logs), :mod:`~.timeline` with :mod:`~.timeline_plot` (startup logs as a per-stage timeline and its
Gantt chart, and which of its phases hold the loader change) and :mod:`~.detectable` (the change a
startup A/B of a given design can detect).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "run_serve_ab": "serve_ab",
    "resume_serve_ab": "serve_ab",
    "StartupSpec": "serve_ab",
    "run_stage_server": "server",
    "run_stage_group": "stage_group",
    "read_timeline": "timeline",
    "Timeline": "timeline",
    "detectability": "detectable",
})
