"""Figures without pyplot: a notebook shows them, importing the plots leaves matplotlib's backend alone,
and one writer puts each figure on disk with the values it draws."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from omni_loader.reporting.figures import ShownFigure, write_figure
from omni_loader.formatting import time_unit
from omni_loader.reporting.stats import Summary, compare
from omni_loader.results.integrity import Results
from omni_loader.results.suite import Suite


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


@pytest.mark.subprocess
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


def test_the_phase_panels_labels_lie_inside_their_frames_and_the_ratio_labels_clear_the_whiskers() -> None:
    """01's fifth Lab pass: the medians' labels ("3.06 ms", "713 ms") ran over the panels' right frames, and the
    whisker's cap of this run's ratio struck through its "205×" label."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from omni_loader.reporting.measurements import load_reference
    from omni_loader.reporting.plots import phases_figure, ratios_vs_pr_figure

    discovery = compare(Summary("baseline", "buffer_discovery", (0.62, 0.88, 0.61, 0.64, 0.93)),
                        Summary("optimized", "buffer_discovery", (0.0031, 0.0046, 0.0027, 0.0029, 0.0045)))
    construct = compare(Summary("baseline", "construct", (0.72, 0.88, 0.75, 0.78, 0.68)),
                        Summary("optimized", "construct", (0.713, 0.79, 0.70, 0.735, 0.695)))
    fig = phases_figure([discovery, construct])
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    for ax in [a for a in fig.axes if a.texts]:
        frame = ax.get_window_extent(renderer)
        for t in ax.texts:
            box = t.get_window_extent(renderer)
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (t.get_text(), box, frame)
    weights = compare(Summary("baseline", "weight_loading", (0.86, 1.2, 0.8, 0.78, 1.16)),
                      Summary("optimized", "weight_loading", (0.226, 0.2, 0.24, 0.22, 0.25)))
    fig = ratios_vs_pr_figure([discovery, weights], load_reference())
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    caps = [line.get_window_extent(renderer) for line in ax.lines if line.get_marker() == "_"]
    labels = [t.get_window_extent(renderer) for t in ax.texts if t.get_text().endswith("×")]
    assert caps and labels
    for cap in caps:  # a cap is a line at its box's middle (the marker's box is taller than the line it draws)
        middle = (cap.y0 + cap.y1) / 2
        above = [t for t in labels if t.x0 < cap.x1 and cap.x0 < t.x1 and t.y1 > middle]
        assert all(t.y0 >= middle + 2 for t in above), (middle, above)


def test_log_axes_read_as_plain_numbers_and_times() -> None:
    """Every log axis the kit draws labels its ticks plainly: the compare plot once read 6×10⁰ and 4×10⁰
    on minor ticks, the sweep 10⁻⁴ on a time axis. Drawn over less than a decade (minor ticks labelled)
    and over six decades."""
    import re

    import pandas as pd

    from omni_loader.reporting.figures import tick_labels
    from omni_loader.sweep import fits
    from omni_loader.sweep.audit import plot_on_curve
    from omni_loader.sweep.traversal_plots import plot_sweep

    rows = pd.DataFrame([{"experiment": exp, "source": "synthetic", "N": n, "B": b, "x": x, "repeat": r,
                          "seconds": 2e-6 * x * (1 + 0.01 * r), "cpu_seconds": 2e-6 * x}
                         for exp in fits.EXPERIMENTS for n in (32, 4096) for b in (4, 256) for r in range(3)
                         for x in [{"state_dict": n, "baseline": n * b, "optimized": n + b}[exp]]])
    narrow = ShownFigure(figsize=(3, 2))
    ax = narrow.subplots()
    ax.plot([3.5, 8.0], [3.5, 8.0])
    from omni_loader.reporting.figures import log_axis

    log_axis(ax, "y")
    placed = pd.DataFrame({"arch": ["bert", "whisper"], "x": [2_000.0, 90_000.0], "baseline_seconds": [0.01, 0.4]})
    fit = fits.fit_loglog([100, 1e6], [1e-4, 1.0])
    for fig in (plot_sweep(rows), narrow, plot_on_curve(placed, fit)):
        labels = tick_labels(fig)
        assert labels, "no tick labels drawn"
        assert not [t for t in labels if re.search(r"×10|\$|e[+-]?\d|10\^|\u2212\d", t)], labels
    assert {"4", "6"} <= set(tick_labels(narrow))  # minor ticks over less than a decade are labelled, plainly
    assert "1 ms" in tick_labels(plot_sweep(rows))  # a time axis reads as times


def test_on_curve_labels_do_not_collide_or_leave_the_frame() -> None:
    """05's plot: two models close on the B·N line (seamless_m4t and Token2Wav, as a default run places them) take
    their labels on either side of each other, and the rightmost model's label stays inside the frame."""
    import itertools

    import pandas as pd
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from omni_loader.sweep import fits
    from omni_loader.sweep.audit import plot_on_curve

    placed = pd.DataFrame({"arch": ["bert", "resnet", "encodec", "seamless_m4t", "token2wav-full"],
                           "x": [456.0, 44_838.0, 66_528.0, 163_096.0, 239_148.0],
                           "baseline_seconds": [0.0011, 0.159, 0.242, 1.335, 1.402]})
    fig = plot_on_curve(placed, fits.fit_loglog([64, 65_536], [2e-4, 0.27]))
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    labels = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(labels) == {"bert", "resnet", "encodec", "seamless_m4t", "full-size Token2Wav"}  # the star in words
    for (a, box_a), (b, box_b) in itertools.combinations(labels.items(), 2):
        assert not box_a.overlaps(box_b), (a, b)
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 for box in labels.values()), labels
    # the star's label on its right, where no point is: on its left it sat under seamless_m4t's (fifth Lab pass)
    star_x = ax.transData.transform((239_148.0, 1.402e3))[0]
    assert labels["full-size Token2Wav"].x0 > star_x, (labels["full-size Token2Wav"], star_x)


def test_a_drawing_that_runs_out_of_memory_says_none_of_its_warnings(tmp_path, monkeypatch, recwarn):
    """write_report draws under warnings_said_on_success: the glyph warnings a font that could not be read gives
    before the MemoryError are dropped (the command's one line is all that is said), while a drawing that ends well
    says its warnings as before."""
    import warnings

    from omni_loader.reporting import report
    from omni_loader.reporting.figures import warnings_said_on_success

    with warnings_said_on_success():
        warnings.warn("kept", UserWarning)
    assert [str(w.message) for w in recwarn] == ["kept"]
    recwarn.clear()

    def figures_then_out_of_memory(*_):
        warnings.warn("Glyph 48 (0) missing from font(s) DejaVu Sans.", UserWarning)
        raise MemoryError

    monkeypatch.setattr(report, "_figures", figures_then_out_of_memory)
    monkeypatch.setattr(report, "plots_wanted", lambda: True)
    monkeypatch.setattr(report, "comparisons", lambda *a: [])
    monkeypatch.setattr(report, "design_alpha", lambda m: 0.05)
    with pytest.raises(MemoryError):
        report.write_report(Results(tmp_path, Suite({}), None))
    assert not [str(w.message) for w in recwarn]
