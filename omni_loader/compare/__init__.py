"""Reproductions side by side: several results directories, or packed archives of them, in one table.

:mod:`~.reproductions` (``compare_results``, the entry point), :mod:`~.side_by_side` (the data:
``SideBySide``), :mod:`~.compare_render` (markdown, CSV, JSON) and :mod:`~.ratio_plot` (the figure).
"""

from ..lazy import exports

__all__, __getattr__, __dir__ = exports(__name__, {
    "compare_results": "reproductions",
    "SideBySide": "side_by_side",
    "write_compare": "compare_render",
})
