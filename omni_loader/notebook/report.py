"""A saved benchmark, section by section: notebook 01's results and notebook 05's variants (``kit.report``).

Each function reads a results directory that ``kit.reproduce`` (or ``omni-loader reproduce``) wrote and
returns one section of its ``report.md`` for ``kit.show``: Markdown, styled tables or saved plots. Notebook
01 shows with it whether the phases both variants share differ beside its first picture (:func:`shared_phases`),
the verdicts that open the report (:func:`report_opening`), the environment, the PR's
rows and every phase (:func:`result_tables`), the controls, the PR's figures beside this run's, the plots,
equivalence and memory, the weight-loading ratio taken apart, a cold benchmark beside the warm one
(:func:`cold_and_warm`) and earlier results side by side (:func:`earlier_results`, :func:`side_by_side`);
the answer first, from the newest saved benchmark (:func:`headline`, :func:`latest_run`), and buffer discovery's
ratio beside the PR's with the model, snapshot, runs and condition of each (:func:`discovery_ratios`, which 02, 03
and 05 show too); notebook 05 shows a variant of your own against two others (:func:`beyond_the_pr`) and the load's largest
phases (:func:`largest_phases`).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "report_opening": "sections",
    "environment": "sections",
    "result_tables": "sections",
    "phase_table": "sections",
    "controls": "sections",
    "pr_reference": "sections",
    "saved_plots": "sections",
    "equivalence_and_memory": "sections",
    "weight_loading_parts": "sections",
    "cold_and_warm": ".reporting.cache_report",
    "earlier_results": "sections",
    "side_by_side": "sections",
    "beyond_the_pr": "sections",
    "largest_phases": "sections",
    "shared_phases": "sections",
    "headline": "sections",
    "latest_run": "sections",
    "discovery_ratios": "sections",
}, relative_to=__package__)
