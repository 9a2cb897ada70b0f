"""Figures without pyplot: a notebook shows them, importing the plots leaves matplotlib's backend alone,
and one writer puts each figure on disk with the values it draws."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from omni_loader.reporting.figures import ShownFigure, write_figure
from omni_loader.formatting import time_unit
from omni_loader.reporting.stats import Summary, compare


def _figure() -> ShownFigure:
    fig = ShownFigure(figsize=(3, 2))
    ax = fig.subplots()
    ax.bar([0, 1], [2.0, 5.0], label="bars")
    ax.set_xticks([0, 1], ["baseline", "optimized"])
    return fig


def test_a_notebook_shows_a_figure_that_a_cell_returns() -> None:
    """IPython's display machinery, as a kernel without ``%matplotlib inline`` runs it, finds a PNG."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(_figure())
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"


def test_importing_and_drawing_the_plots_leaves_the_backend_alone(tmp_path: Path) -> None:
    probe = ("import sys, matplotlib; before = matplotlib.rcParams._get_backend_or_none(); "
             "import omni_loader.reporting.plots, omni_loader.reporting.report, omni_loader.compare.reproductions; "
             "from omni_loader.reporting.stats import Summary, compare; "
             "c = compare(Summary('baseline', 'total', (1.0, 1.1)), Summary('optimized', 'total', (0.5, 0.6))); "
             "fig = omni_loader.reporting.plots.phases_figure([c]); fig.savefig(sys.argv[1]); "
             "print(before == matplotlib.rcParams._get_backend_or_none(), 'matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "f.png")], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "False"]


def test_write_figure_writes_png_svg_and_the_values_drawn(tmp_path: Path) -> None:
    paths = write_figure(_figure(), tmp_path / "plots", "bars")
    assert [p.name for p in paths] == ["bars.png", "bars.svg", "bars.csv"] and all(p.stat().st_size for p in paths)
    rows = list(csv.DictReader(paths[2].open()))
    assert [float(r["value"]) for r in rows if r["kind"] == "bar"] == [2.0, 5.0]
    assert [r["text"] for r in rows if r["kind"] == "xtick"] == ["baseline", "optimized"]


def test_a_time_axis_takes_the_kits_one_unit_rule() -> None:
    """Below 10 s an axis is in ms, from 10 s on in s: the rule of formatting.time_unit, not one of its own."""
    from omni_loader.reporting.plots import phases_figure

    for seconds in ((9.0, 9.5, 8.0, 8.5), (9.0, 10.5, 8.0, 8.5)):
        c = compare(Summary("baseline", "total", seconds[:2]), Summary("optimized", "total", seconds[2:]))
        (ax, *_) = phases_figure([c]).axes
        assert ax.get_ylabel() == f"time ({time_unit(seconds)})"
        assert ax.get_ylabel() == ("time (s)" if max(seconds) >= 10 else "time (ms)")
