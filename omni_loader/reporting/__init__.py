"""From a saved results directory to what a reader sees: statistics, controls, report.md, plots.

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
