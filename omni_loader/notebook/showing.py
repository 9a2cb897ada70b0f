"""One way for a notebook to show what the kit returns.

The kit returns plain data (Markdown, styled tables, figures, plot paths); :func:`show` picks the IPython wrapper.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from collections.abc import Mapping
from typing import Any

IMAGES = (".png", ".jpg", ".jpeg", ".svg")


def show(*items: Any) -> None:
    """Display each item: text as Markdown, an image path as the image, a list item by item, else itself."""
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
    "most_common": "most common classes", "min_depth": "shallowest depth", "max_depth": "deepest depth",
    "owner_class": "owner class", "local_name": "local name", "persistent_by_set": "persistent by the set",
    "in_state_dict": "in state_dict()", "rule_hazards": "flagged by rule_hazards()",
}


def readable(frame: Any, **more: str):  # -> DataFrame
    """``frame`` with the kit's column identifiers renamed to words (:data:`READABLE`, and ``more``)."""
    from ..sweep.fits import source_words

    named = {c: frame[c].astype(str).map(source_words) for c in ("source", "arch") if c in getattr(frame, "columns", ())}
    return frame.assign(**named).rename(columns={**READABLE, **more})


def unbroken(words: str) -> str:
    """``words`` with non-breaking spaces: a table's cell or a sentence shows them on one line."""
    return words.replace(" ", "\u00a0")


_HEADING = re.compile(r"^(#{1,6})(?= )")


def nested(markdown: str) -> str:
    """``markdown`` with its headings moved down under a notebook's ``##`` heading: none above ``###``."""
    lines, fenced, levels = markdown.splitlines(), False, {}
    for i, line in enumerate(lines):
        fenced ^= line.startswith("```")
        if not fenced and (m := _HEADING.match(line)):
            levels[i] = len(m[1])
    shift = max(0, 3 - min(levels.values())) if levels else 0
    for i, level in levels.items():
        lines[i] = "#" * min(6, level + shift) + lines[i][level:]
    return "\n".join(lines) + ("\n" if markdown.endswith("\n") else "")


def key_values(mapping: Mapping[str, Any], caption: str | None = None):  # -> Styler
    """A dict as a two-column table (``item``, ``value``), its keys in words."""
    import pandas as pd

    from ..formatting import plain_value, table

    rows = [{"item": str(k).replace("_", " "), "value": plain_value(v)} for k, v in mapping.items()]
    return table(pd.DataFrame(rows, columns=["item", "value"]), caption=caption)
