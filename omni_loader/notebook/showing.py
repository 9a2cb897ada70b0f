"""One way for a notebook to show what the kit returns.

Why: the kit's notebook functions return data a reader can also use outside Jupyter (Markdown text,
styled tables, figures, paths of saved plots), and each cell used to pick the IPython wrapper for
each (``Markdown(...)``, ``Image(filename=...)``, ``display``). :func:`show` picks it from the value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

IMAGES = (".png", ".jpg", ".jpeg", ".svg")


def show(*items: Any) -> None:
    """Display each item as a notebook shows it: text as Markdown, the path of a saved image as the
    image, a list or tuple item by item, anything else (a table, a figure, an audio player) as itself."""
    from IPython.display import Image, Markdown, SVG, display

    for item in items:
        if isinstance(item, (list, tuple)):
            show(*item)
        elif isinstance(item, str):
            display(Markdown(item))
        elif isinstance(item, (Path, os.PathLike)) and Path(item).suffix.lower() in IMAGES:
            display(SVG(filename=str(item)) if Path(item).suffix.lower() == ".svg" else Image(filename=str(item)))
        else:
            display(item)


# The kit's column identifiers, as a table's reader wants them (the CSV files keep the identifiers).
READABLE = {
    "baseline_seconds": "baseline", "optimized_seconds": "optimized", "median_seconds": "median",
    "predicted_seconds": "predicted", "measured_over_fit": "measured ÷ fit",
    "inside_fitted_range": "inside the fitted range", "baseline_over_B_state_dicts": "baseline ÷ (B × one state_dict)",
    "r2": "R²", "stderr": "slope's standard error", "n_points": "points", "x_min": "smallest x", "x_max": "largest x",
    "named_buffers": "named buffers", "persistent_buffers": "persistent buffers",
    "baseline_calls": "state_dict() calls (baseline)", "model_class": "class", "arch": "architecture",
}


def readable(frame: Any, **more: str):  # -> DataFrame
    """``frame`` with the kit's column identifiers renamed to words (:data:`READABLE`, and ``more``):
    ``measured_over_fit`` becomes "measured ÷ fit". Pass the new names to ``kit.table``'s ``seconds``
    and ``decimals``."""
    return frame.rename(columns={**READABLE, **more})
