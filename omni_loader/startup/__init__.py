"""Startup, the PR's fourth row: the stage server, the startup A/B and the per-stage timeline.

:mod:`~.server`, :mod:`~.stage_group`, :mod:`~.one_run`, :mod:`~.serve_ab`, :mod:`~.logfigures`, :mod:`~.timeline`
with :mod:`~.timeline_plot`, and :mod:`~.detectable` (the change a startup A/B of a given design can detect).
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
