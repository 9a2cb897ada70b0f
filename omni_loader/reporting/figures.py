"""A figure as files (PNG, SVG and the values it draws as CSV), and a figure that shows itself.

Plots are built without pyplot, so drawing never switches a kernel's backend; :class:`ShownFigure` renders its
own PNG so it shows in any kernel. :func:`write_figure` is the one writer, and :func:`figure_data` reads back
what a figure shows, so a test checks a plot by its values.
"""

from __future__ import annotations

import contextlib
import csv
import io
import warnings
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from ..formatting import number

FIGURE_DATA_COLUMNS = ("panel", "title", "xlabel", "ylabel", "kind", "label", "x", "y", "width", "height", "value",
                       "text")
PNG_DPI = 130


class ShownFigure(Figure):
    """A :class:`~matplotlib.figure.Figure` that a notebook displays when a cell returns it."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=PNG_DPI, bbox_inches="tight")
        return buf.getvalue()


class PlainLogFormatter(LogFormatter):
    """Labels of a log axis as plain numbers (``0.5``, ``10,000``, not ``10²`` or ``1e+05``)."""

    def __init__(self, text=number, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = text

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self.text(x) if super().__call__(x, pos) else ""


def log_axis(ax: Any, which: str = "y", text=number) -> None:
    """Put ``ax``'s ``which`` axis on a log scale with plain labels: the kit's one way to draw one."""
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    axis.set_major_formatter(PlainLogFormatter(text, labelOnlyBase=False))
    axis.set_minor_formatter(PlainLogFormatter(text, labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def tick_labels(fig: Figure) -> list[str]:
    """Every tick label the figure draws (major and minor, both axes of every panel), as text."""
    fig.canvas.draw()  # labels are computed when the figure is drawn
    return [lab.get_text() for ax in fig.axes if ax.get_visible() and ax.axison
            for axis in (ax.xaxis, ax.yaxis) for minor in (False, True)
            for lab in axis.get_ticklabels(minor=minor) if lab.get_visible() and lab.get_text()]


@contextlib.contextmanager
def warnings_said_on_success():
    """Hold the warnings raised inside the block; say them only if it ends without an exception."""
    with warnings.catch_warnings(record=True) as caught:
        yield
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def write_figure(fig: Figure, directory: str | Path, stem: str) -> list[Path]:
    """``<stem>.png``, ``<stem>.svg`` and ``<stem>.csv`` (the values drawn: :func:`figure_data`) under ``directory``."""
    from ..safe_files import ensure_dir, open_file, refuse_links

    directory = ensure_dir(directory)  # a symlinked plots/ is refused in one line, never written through
    refuse_links(directory, figure_files(stem))  # every file checked before the first is written
    paths = [directory / f"{stem}.png", directory / f"{stem}.svg"]
    for p in paths:
        with open_file(p, "w", binary=True) as fh:  # never through a link
            fig.savefig(fh, format=p.suffix[1:], dpi=PNG_DPI if p.suffix == ".png" else None, bbox_inches="tight")
    with open_file(directory / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIGURE_DATA_COLUMNS)
        writer.writeheader()
        writer.writerows({c: ("" if row.get(c) is None else row.get(c)) for c in FIGURE_DATA_COLUMNS}
                         for row in figure_data(fig))
    return [*paths, directory / f"{stem}.csv"]


def figure_files(stem: str) -> tuple[str, ...]:
    """The names :func:`write_figure` writes for ``stem``: a writer checks them all before it writes one."""
    return tuple(f"{stem}{suffix}" for suffix in (".png", ".svg", ".csv"))


def figure_data(fig: Figure) -> list[dict[str, Any]]:
    """What a figure shows, one row per drawn value, read from its artists (not from the data behind them).

    ``kind`` is ``bar``, ``point``, ``line``, ``text``, ``xtick``/``ytick`` (a category's label) or
    ``xtick_label``/``ytick_label`` (every label drawn); values are in the plotted unit, ``panel`` numbers the axes.
    """
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.text import Annotation

    rows: list[dict[str, Any]] = []
    for panel, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        base = {"panel": panel, "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel()}

        def add(kind: str, label: Any = "", **values: Any) -> None:
            shown = isinstance(label, str) and not label.startswith("_")  # "_child3": matplotlib's, not a label
            rows.append({**base, "kind": kind, "label": label if shown else "", **values})

        for container in ax.containers:
            if isinstance(container, BarContainer):
                for patch, value in zip(container.patches, container.datavalues):
                    add("bar", container.get_label(), x=patch.get_x(), y=patch.get_y(), width=patch.get_width(),
                        height=patch.get_height(), value=float(value))
        for collection in ax.collections:
            if isinstance(collection, PathCollection):
                for x, y in collection.get_offsets():
                    add("point", collection.get_label(), x=float(x), y=float(y))
        for line in ax.lines:
            for x, y in zip(line.get_xdata(), line.get_ydata()):
                add("line", line.get_label(), x=float(x), y=float(y), text=str(line.get_marker()))
        for t in ax.texts:
            x, y = t.xy if isinstance(t, Annotation) else t.get_position()
            add("text", x=float(x), y=float(y), text=t.get_text())
        for kind, axis in (("xtick", ax.xaxis), ("ytick", ax.yaxis)):
            for pos, lab in zip(axis.get_ticklocs(), axis.get_ticklabels()):
                if _is_category(lab.get_text()):  # a named category, not a number on a scale
                    add(kind, **{kind[0]: float(pos)}, text=lab.get_text())
            for minor in (False, True):  # every label drawn, as a reader sees it (a drawn figure's)
                for pos, lab in zip(axis.get_ticklocs(minor=minor), axis.get_ticklabels(minor=minor)):
                    if lab.get_visible() and lab.get_text():
                        add(f"{kind}_label", **{kind[0]: float(pos)}, text=lab.get_text())
    return rows


def _is_category(text: str) -> bool:
    if not text or text.startswith("$"):  # mathtext: a scale's number (10^2)
        return False
    try:
        float(text.replace("\u2212", "-"))
    except ValueError:
        return True
    return False
