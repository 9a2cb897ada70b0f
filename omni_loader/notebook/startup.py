"""Where a server's startup goes: stage groups, their timeline and the startup A/B, notebook 06 (``kit.startup``).

Notebook 06 starts stage groups of both Token2Wav variants (:func:`start_stage_groups`), reads a start's
log (:func:`first_start_log`, or a ``vllm serve`` log of your own) into a per-stage timeline
(:func:`read_timeline`), says and tabulates it (:func:`timeline_sentence`, :func:`timeline_table`), draws
it (:func:`gantt`), compares the variants by stage and phase (:func:`stage_comparison_table`), sets the
whole start beside the PR's fourth row (:func:`startup_row`) and says what a startup A/B of this many runs
can detect (:func:`detectable_sentences`).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "start_stage_groups": "stages",
    "first_start_log": "stages",
    "read_timeline": ".startup.timeline",
    "timeline_sentence": "stages",
    "timeline_table": "stages",
    "gantt": ".startup.timeline_plot",
    "stage_comparison_table": "stages",
    "startup_row": "stages",
    "detectable_sentences": "stages",
}, relative_to=__package__)
