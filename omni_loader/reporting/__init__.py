"""From a saved results directory to what a reader sees: statistics, controls, report.md, plots.

:mod:`~.stats` (summaries, comparisons, the kit's verdict and the PR's rule, noise floor,
equivalence), :mod:`~.controls` (shared-phase controls and confounded rows), :mod:`~.measurements`
(what a results directory measured), :mod:`~.report` with :mod:`~.report_tables` and
:mod:`~.report_environment` (report.md), :mod:`~.figures` and :mod:`~.plots` (figures as files).
Everything here reads saved results; nothing runs a load.
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "phase_summary": "stats",
    "equivalence": "stats",
    "noise_floor": "stats",
    "Comparison": "stats",
    "comparisons": "measurements",
    "control_report": "controls",
    "write_report": "report",
    "render_report": "report",
})
