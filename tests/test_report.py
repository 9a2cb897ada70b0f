"""reproduce -> runs.csv, metadata.json, report.md, plots; report re-renders from saved results."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import scipy.stats  # noqa: F401
from omni_loader.cli import main
from omni_loader.errors import ResultsError
from omni_loader.formatting import duration
from omni_loader.reporting.measurements import LABELS
from omni_loader.reporting.report import render_report
from omni_loader.results.rows import RUN_COLUMNS, read_runs
from omni_loader.results.suite import SCHEMA_VERSION, benchmark
from omni_loader.formatting import format_seconds, time_unit


@pytest.fixture(scope="module")
def results(tiny_snapshot, tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce") / "res"
    assert main(["reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "1", "--runs", "2",
                 "--out", str(out)]) == 0
    return out


@pytest.mark.subprocess  # the results fixture runs reproduce with a worker process per run
def test_reproduce_writes_the_results_layout(results):
    for name in ("runs.csv", "metadata.json", "report.md"):
        assert (results / name).is_file(), name
    # the phase plot shows every measured run of every phase as a point, in the unit of its panel
    frame = read_runs(results)
    measured = frame[(~frame["warmup"]) & (frame["status"] == "ok")]
    shown = _figure_rows(results / "plots" / "phases.csv")
    points = [r for r in shown if r["kind"] == "point"]
    assert len(points) == len(measured)
    panel = {r["panel"] for r in shown if r["title"].startswith("Whole Token2Wav load\n")}.pop()
    total = measured[measured["phase"] == "total"]
    scale = _scale(next(r["ylabel"] for r in shown if r["panel"] == panel))
    assert sorted(float(r["y"]) for r in points if r["panel"] == panel) == pytest.approx(sorted(total["seconds"] * scale))
    header = (results / "runs.csv").read_text().splitlines()[0].split(",")
    assert tuple(header) == RUN_COLUMNS
    meta = json.loads((results / "metadata.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION
    record = benchmark(meta, "load")
    for key in ("model", "checkpoint", "environment", "warmup", "repeats", "order", "command_line", "plan"):
        assert key in record
    assert record["checkpoint"]["checkpoint_source"] == "directory"


def _report_rows(text: str) -> dict[str, list[str]]:
    table = text.split("## Measurements", 1)[1].split("## Verdicts", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 3 and cells[0] not in ("Measurement", "---"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.subprocess  # the results fixture runs reproduce with a worker process per run
def test_report_medians_equal_the_medians_of_runs_csv(results):
    text = (results / "report.md").read_text()
    rows = _report_rows(text)
    for label in ("Calls to state_dict()", "Buffer discovery", "Token2Wav weight loading"):
        assert label in rows
    frame = read_runs(results)
    measured = frame[(~frame["warmup"]) & (frame["status"] == "ok")]
    medians = measured.groupby(["phase", "variant"])["seconds"].median()
    for phase in ("buffer_discovery", "weight_loading", "construct", "load_parameters", "total"):
        cells = rows[LABELS[phase]]
        unit = time_unit(medians[(phase, "baseline")])
        assert cells[1] == duration(medians[(phase, "baseline")], unit)  # the report's cells: thousands separated
        assert cells[2] == duration(medians[(phase, "optimized")], unit)
    calls = measured.drop_duplicates("run_id").groupby("variant")["state_dict_calls"].median()
    assert rows["Calls to state_dict()"][1:4] == [f"{calls['baseline']:g}", "0", f"Removed {calls['baseline']:g} calls"]
    assert "Item | Value" in text
    assert "Measurement | Baseline median | Optimized median | Change" in text
    assert re.search(r"Equivalence\*\*: equivalent: all 6 runs", text)
    assert "PR baseline" in text and "456.946 ms" in text


@pytest.mark.subprocess  # the results fixture runs reproduce with a worker process per run
def test_report_command_rerenders_the_same_tables(results, capsys):
    before = (results / "report.md").read_text()
    (results / "report.md").unlink()
    assert main(["report", str(results), "--quiet"]) == 0
    assert (results / "report.md").read_text() == before
    assert render_report(results) == before


@pytest.mark.subprocess  # the results fixture runs reproduce with a worker process per run
def test_plots_off_writes_the_text_alone_and_a_later_report_draws_them(results, tmp_path, monkeypatch, capsys):
    """$OMNI_LOADER_PLOTS=off: report.md says how to draw the plots and no plot file is written; a value that is
    neither on nor off is one line naming it; unset, the same files give the plots and the links again."""
    import shutil

    copy = tmp_path / "res"
    shutil.copytree(results, copy)
    shutil.rmtree(copy / "plots")
    monkeypatch.setenv("OMNI_LOADER_PLOTS", "off")
    assert main(["report", str(copy), "--quiet"]) == 0
    text = (copy / "report.md").read_text()
    assert not (copy / "plots").exists() and "![" not in text
    assert "Not drawn ($OMNI_LOADER_PLOTS=off): `omni-loader report DIR` draws them" in text
    assert render_report(copy) == text
    monkeypatch.setenv("OMNI_LOADER_PLOTS", "sometimes")
    assert main(["report", str(copy), "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == "omni-loader: error: $OMNI_LOADER_PLOTS='sometimes' is not on or off"
    monkeypatch.delenv("OMNI_LOADER_PLOTS")
    assert main(["report", str(copy), "--quiet"]) == 0
    assert sorted(p.name for p in (copy / "plots").iterdir()) == sorted(p.name for p in (results / "plots").iterdir())
    assert "Not drawn" not in (copy / "report.md").read_text() and "![phases](plots/phases.png)" in \
        (copy / "report.md").read_text()


@pytest.mark.subprocess  # the results fixture runs reproduce with a worker process per run
def test_unknown_schema_version_is_refused(results, tmp_path, capsys):
    import shutil

    copy = shutil.copytree(results, tmp_path / "copy")
    meta = json.loads((copy / "metadata.json").read_text())
    meta["schema_version"] = 99
    (copy / "metadata.json").write_text(json.dumps(meta))
    assert main(["report", str(copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "schema_version 99" in err[0] and "metadata.json" in err[0]


def test_report_on_a_directory_without_results(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a results directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- tables from known rows


def _write_results(out, runs):
    """A results directory from ``runs``: (variant, {phase: seconds}, digest) per measured run."""
    from omni_loader.results.rows import append_rows
    from omni_loader.results.suite import store_benchmark

    out.mkdir(parents=True, exist_ok=True)
    store_benchmark(out, "load", {"kind": "reproduce", "warmup": 0, "repeats": len(runs) // 2, "order": "alternate",
                                  "status": "complete"})
    rows = []
    for run_id, (variant, phases, digest) in enumerate(runs):
        for phase, seconds in phases.items():
            parent = "" if phase == "total" else "total"
            rows.append({"run_id": run_id, "variant": variant, "warmup": False, "order": run_id // 2 + 1,
                         "phase": phase, "parent": parent, "seconds": seconds, "status": "ok", "error": "",
                         "state_dict_calls": 51 if variant == "baseline" else 0, "weights_loaded": 187,
                         "persistent_buffers": 1, "digest": digest, "rss_peak_bytes": 2**30,
                         "device_peak_bytes": None, "source": "load"})
    append_rows(out, rows)
    return out


def _leaf_runs(base: dict[str, float], opt: dict[str, float], n: int = 3, digest: str = "d" * 64):
    """n runs per variant whose leaf phases are ``base`` / ``opt`` (all runs alike) and total their sum."""
    runs = []
    for _ in range(n):
        for variant, leaves in (("baseline", base), ("optimized", opt)):
            runs.append((variant, {**leaves, "total": sum(leaves.values())}, digest))
    return runs


def _md_tables(text: str, after: str) -> list[list[str]]:
    """The first markdown table after the heading ``after``, as rows of cells (header row included)."""
    block = text.split(after, 1)[1]
    rows = []
    for line in block.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") and "---" in c for c in cells):  # not the alignment row
                rows.append(cells)
        elif rows:
            break
    return rows


def _leaves(values: list[float]) -> dict[str, float]:
    from omni_loader.names import LEAF_PHASES

    assert len(values) >= 2
    # the first values go to the first phases, the rest of the leaves get the last value
    return {p: values[min(i, len(values) - 1)] for i, p in enumerate(LEAF_PHASES)}


def test_attribution_shares_are_of_each_variants_own_total(tmp_path):
    """'Where the load time goes': a phase's share is its median over the median total of the same variant."""
    from omni_loader.names import LEAF_PHASES

    base = _leaves([0.6, 0.2, 0.1])  # baseline total 0.6 + 0.2 + 0.1 * (k - 2)
    opt = _leaves([0.3, 0.05, 0.02])  # a different total: a share over the wrong total shows
    from omni_loader.reporting.report_tables import attribution_table

    out = _write_results(tmp_path / "res", _leaf_runs(base, opt))
    rows = _md_tables("\n" + attribution_table(read_runs(out)), "\n")
    assert rows[0] == ["Phase", "Baseline median", "Share", "Optimized median", "Share"]
    body = {r[0]: r for r in rows[1:]}
    assert list(body) == [LABELS.get(p, p) for p in LEAF_PHASES]
    totals = {"baseline": sum(base.values()), "optimized": sum(opt.values())}
    unit = time_unit(max(totals.values()))
    for phase in LEAF_PHASES:
        cells = body[LABELS.get(phase, phase)]
        assert cells[1] == format_seconds(base[phase], unit)
        assert cells[2] == f"{100 * base[phase] / totals['baseline']:.1f}%"
        assert cells[3] == format_seconds(opt[phase], unit)
        assert cells[4] == f"{100 * opt[phase] / totals['optimized']:.1f}%"
    # leaves that make up the whole load share 100% of it, in each variant
    for col in (2, 4):
        assert sum(float(r[col].rstrip("%")) for r in rows[1:]) == pytest.approx(100, abs=0.05 * len(LEAF_PHASES))


def test_reference_table_ratios_are_baseline_over_optimized(tmp_path):
    """The PR's ratio and this run's ratio: baseline median / optimized median, > 1 where optimized is faster."""
    from omni_loader.reporting.measurements import load_reference

    base, opt = _leaves([0.8, 0.4, 0.01]), _leaves([0.2, 0.1, 0.01])
    base["buffer_discovery"], opt["buffer_discovery"] = 0.5, 0.002
    runs = _leaf_runs(base, opt)
    for _, phases, _ in runs:
        phases["weight_loading"] = 2 * phases["buffer_discovery"]
    from omni_loader.reporting.measurements import comparisons
    from omni_loader.reporting.report_tables import reference_table

    out = _write_results(tmp_path / "res", runs)
    rows = _md_tables("\n" + reference_table(comparisons(read_runs(out)), load_reference()), "\n")
    assert rows[0] == ["Measurement", "PR baseline", "PR optimized", "PR ratio", "This run baseline",
                       "This run optimized", "This run ratio"]
    body = {r[0]: r for r in rows[1:]}
    reference = {m["label"]: m for m in load_reference()["measurements"]}
    assert list(body) == list(reference)
    for label, ref in reference.items():
        cells = body[label]
        if ref["unit"] == "calls":
            assert cells[1:4] == [f"{ref['baseline']:g}", f"{ref['optimized']:g}", "—"]
            assert cells[4:] == ["51", "0", "—"]
            continue
        pr_ratio = ref["baseline"] / ref["optimized"]
        assert pr_ratio > 1
        assert cells[3] == f"{pr_ratio:.2f}×"
        assert cells[1] == duration(ref["baseline"], time_unit(ref["baseline"]))
        assert cells[2] == duration(ref["optimized"], time_unit(ref["baseline"]))
    discovery = body["Buffer discovery"]
    assert discovery[3] == "292.16×"  # 456.946 ms / 1.564 ms = 292.165..., the PR's figure
    assert discovery[4:] == ["500.000 ms", "2.000 ms", f"{0.5 / 0.002:.2f}×"]
    assert body["Token2Wav weight loading"][6] == f"{1.0 / 0.004:.2f}×"
    assert body["Startup to /health"][4:] == ["not measured", "not measured", "—"]


# --------------------------------------------------------------------------- plots, checked by what they show


def _figure_rows(path):
    import csv

    return list(csv.DictReader(path.open()))


def _scale(axis_label: str) -> float:
    unit = axis_label.rsplit("(", 1)[1].rstrip(")")
    return {"s": 1.0, "ms": 1e3}[unit]


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    """A results directory with known, varied samples, rendered once (report and plots)."""
    from omni_loader.names import LEAF_PHASES
    from omni_loader.reporting.report import write_report

    samples = {  # three runs per variant; buffer discovery 200x faster, other phases alike
        "baseline": {"buffer_discovery": [0.50, 0.40, 0.45], "load_parameters": [0.030, 0.034, 0.032]},
        "optimized": {"buffer_discovery": [0.0020, 0.0025, 0.0022], "load_parameters": [0.031, 0.029, 0.033]},
    }
    runs = []
    for k in range(3):
        for variant in ("baseline", "optimized"):
            leaves = {p: 0.001 * (i + 1) * (1 + 0.1 * k) for i, p in enumerate(LEAF_PHASES)}
            leaves.update({p: v[k] for p, v in samples[variant].items()})
            wl = leaves["buffer_discovery"] + leaves["load_parameters"] + 0.01
            runs.append((variant, {**leaves, "weight_loading": wl, "total": sum(leaves.values())}, "d" * 64))
    out = _write_results(tmp_path_factory.mktemp("plots") / "res", runs)
    write_report(out)
    return out


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_each_plot_has_its_data_file_beside_it(plotted):
    names = sorted(p.name for p in (plotted / "plots").iterdir())
    assert names == sorted(f"{stem}.{ext}" for stem in ("phases", "ratios_vs_pr", "where_time_goes", "drift")
                           for ext in ("png", "svg", "csv"))
    text = (plotted / "report.md").read_text()
    assert "![phases](plots/phases.png)" in text and "![ratios_vs_pr](plots/ratios_vs_pr.png)" in text


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_drift_plot_shows_each_runs_seconds_at_its_place_in_the_run_order(plotted):
    frame = read_runs(plotted)
    rows = [r for r in _figure_rows(plotted / "plots" / "drift.csv") if r["kind"] == "point"]
    for panel, phase in enumerate(("total", "weight_loading")):
        want = frame[frame["phase"] == phase]
        drawn = sorted((float(r["x"]), round(float(r["y"]), 6)) for r in rows if r["panel"] == str(panel))
        # runs counted from 1, as the bar counts them ("run 1/12"), not the plan's run_id from 0
        assert drawn == sorted((float(i + 1), round(s * 1e3, 6)) for i, s in zip(want["run_id"], want["seconds"]))
        assert {r["label"] for r in rows if r["panel"] == str(panel)} == {"baseline", "optimized"}
    from omni_loader.reporting.figures import tick_labels
    from omni_loader.reporting.plots import drift_figure

    # loads of seconds, drawn in ms: the ticks separate thousands as the tables do ("2,000", not "2000")
    ticks = tick_labels(drift_figure(frame.assign(seconds=frame["seconds"] * 5.0 / frame["seconds"].max())))
    assert any("," in t for t in ticks) and not [t for t in ticks if re.fullmatch(r"\d{4,}(\.\d+)?", t)], ticks


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_phase_plot_shows_every_run_and_the_medians(plotted):
    frame = read_runs(plotted)
    rows = _figure_rows(plotted / "plots" / "phases.csv")
    from omni_loader.reporting.measurements import label

    # each panel is titled with its phase in words (wrapped onto lines), then the change
    panels = {" ".join(r["title"].split("\n")[:-1]): r["panel"] for r in rows}
    measured = frame[~frame["warmup"]]
    assert set(panels) == {label(p) for p in measured["phase"]}
    for phase, group in measured.groupby("phase"):
        mine = [r for r in rows if r["panel"] == panels[label(phase)]]
        scale = _scale(mine[0]["ylabel"])
        medians = []
        for i, variant in enumerate(("baseline", "optimized")):
            samples = sorted(group[group["variant"] == variant]["seconds"] * scale)
            points = sorted(float(r["y"]) for r in mine if r["kind"] == "point" and r["label"] == f"{variant} runs")
            assert points == pytest.approx(samples), (phase, variant)
            median = [float(r["y"]) for r in mine if r["kind"] == "line" and r["text"] == "D"
                      and abs(float(r["x"]) - (i + 0.3)) < 1e-9]
            assert median == pytest.approx([samples[1]]), (phase, variant)  # the middle of three
            whisker = sorted(float(r["y"]) for r in mine if r["kind"] == "line" and r["text"] == "_"
                             and abs(float(r["x"]) - (i + 0.3)) < 1e-9)
            assert whisker == pytest.approx([samples[0], samples[-1]]), (phase, variant)  # min-max caps
            medians.append(samples[1])
        if medians[0] / medians[1] > 10:  # a large ratio is named in the title, on a log scale
            subtitle = mine[0]["title"].split("\n")[-1]
            assert f"{medians[0] / medians[1]:.0f}" in subtitle and "log scale" in subtitle, subtitle
    from omni_loader.reporting.measurements import comparisons

    for c in comparisons(frame):  # a difference the kit claims none of is not left reading "faster" alone
        titles = {r["title"] for r in rows if r["panel"] == panels.get(label(c.phase))}
        if titles and c.unit == "s" and not c.differs() and c.ratio <= 10:
            assert all(t.endswith(" (no claim)") for t in titles), (c.phase, titles)
    subtitle = next(r["title"] for r in rows if r["panel"] == panels["Buffer discovery"]).split("\n")[-1]
    assert re.match(rf"{0.45 / 0.0022:.0f}\D", subtitle), subtitle  # 205 (times faster), not 1/205


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_ratio_plot_shows_baseline_over_optimized_beside_the_prs(plotted):
    from omni_loader.reporting.measurements import load_reference

    frame = read_runs(plotted)
    measured = frame[~frame["warmup"]]
    medians = measured.groupby(["phase", "variant"])["seconds"].median()
    rows = _figure_rows(plotted / "plots" / "ratios_vs_pr.csv")
    ticks = {r["text"]: float(r["x"]) for r in rows if r["kind"] == "xtick"}
    refs = [m for m in load_reference()["measurements"] if m["unit"] == "s" and m["label"] in ticks]
    assert [m["measurement"] for m in refs] == ["buffer_discovery", "weight_loading"]  # startup: not measured
    bars = [r for r in rows if r["kind"] == "bar"]
    assert len(bars) == 2 * len(refs)
    for ref in refs:
        at = ticks[ref["label"]]
        left = [float(b["value"]) for b in bars if at - 0.5 < float(b["x"]) + float(b["width"]) / 2 < at]
        right = [float(b["value"]) for b in bars if at < float(b["x"]) + float(b["width"]) / 2 < at + 0.5]
        assert left == pytest.approx([ref["baseline"] / ref["optimized"]])
        ours = medians[(ref["measurement"], "baseline")] / medians[(ref["measurement"], "optimized")]
        assert right == pytest.approx([ours])
    labels = {b["label"] for b in bars} - {""}
    assert "PR (MI300X, ROCm), median" in labels
    assert labels - {"PR (MI300X, ROCm), median"} <= {"this run: a claimed difference", "this run: no difference claimed"}
    discovery = ticks["Buffer discovery"]
    assert [float(b["value"]) for b in bars if discovery < float(b["x"]) + float(b["width"]) / 2 < discovery + 0.5
            ] == pytest.approx([0.45 / 0.0022])  # the optimized loader is ~205x faster here, not 0.005x


def test_ratio_plot_draws_each_interval_and_marks_a_row_without_a_claim():
    """A 1.3x the test rejected once stood as a plain bar beside a significant 200x on a log axis: now
    each of this run's bars carries its 95% interval, and one without a claim is hollow and says so."""
    from omni_loader.reporting.figures import figure_data, tick_labels
    from omni_loader.reporting.measurements import load_reference
    from omni_loader.reporting.plots import ratios_vs_pr_figure
    from omni_loader.reporting.stats import ratio_interval

    claimed = _comparison("buffer_discovery", [0.40, 0.45, 0.50, 0.42, 0.47], [0.0020, 0.0022, 0.0021, 0.0023, 0.0024])
    rejected = _comparison("weight_loading", [1.0, 1.5, 0.9, 1.2, 1.1], [1.0, 0.5, 0.95, 0.4, 0.85])
    assert claimed.differs() and not rejected.differs()
    fig = ratios_vs_pr_figure([claimed, rejected], load_reference())
    rows = figure_data(fig)
    ours = {r["label"]: r for r in rows if r["kind"] == "bar" and r["label"].startswith("this run")}
    assert set(ours) == {"this run: a claimed difference", "this run: no difference claimed"}
    assert ours["this run: no difference claimed"]["value"] == pytest.approx(rejected.ratio)
    caps = sorted(r["y"] for r in rows if r["kind"] == "line" and r["text"] == "_")
    assert caps == pytest.approx(sorted([*ratio_interval(claimed), *ratio_interval(rejected)]))
    notes = [r["text"] for r in rows if r["kind"] == "text"]
    assert sum("no claim" in n for n in notes) == 1 and any(n.startswith(f"{rejected.ratio:.3g}") for n in notes)
    assert not [t for t in tick_labels(fig) if re.search(r"×10|\$|e[+-]\d", t)], tick_labels(fig)


@pytest.mark.slow  # over a few seconds (the plotted fixture draws every plot)
def test_where_time_goes_draws_each_phase_in_its_own_colour_and_its_note_under_the_legend(plotted):
    """More phases than tab10 has colours: no two phases share one; the note under the legend (three rows of it)
    starts below the legend's box, not across it."""
    import matplotlib

    from omni_loader.names import LEAF_PHASES
    from omni_loader.reporting.plots import where_time_goes_figure

    fig = where_time_goes_figure(read_runs(plotted))
    ax = fig.axes[0]
    legend = ax.get_legend()
    colours = [matplotlib.colors.to_hex(h.get_facecolor()) for h in legend.legend_handles[:len(LEAF_PHASES)]]
    assert len(LEAF_PHASES) > 10 and len(set(colours)) == len(LEAF_PHASES), colours
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a figure without pyplot: drawn with Agg to measure it
    canvas.draw()
    renderer = canvas.get_renderer()
    note = next(t for t in ax.texts if t.get_text().startswith("The bar adds"))
    assert note.get_window_extent(renderer).y1 <= legend.get_window_extent(renderer).y0


@pytest.mark.slow  # over a few seconds (the plotted fixture draws every plot)
def test_where_time_goes_stacks_each_variants_phase_medians(plotted):
    from omni_loader.names import LEAF_PHASES

    frame = read_runs(plotted)
    measured = frame[~frame["warmup"]]
    medians = measured.groupby(["phase", "variant"])["seconds"].median()
    rows = _figure_rows(plotted / "plots" / "where_time_goes.csv")
    ticks = {r["text"]: float(r["y"]) for r in rows if r["kind"] == "ytick"}
    assert set(ticks) == {"baseline", "optimized"}
    scale = _scale(rows[0]["xlabel"])
    for variant, at in ticks.items():
        bars = [r for r in rows if r["kind"] == "bar" and abs(float(r["y"]) + float(r["height"]) / 2 - at) < 1e-9]
        widths = [float(b["width"]) for b in bars]
        assert widths == pytest.approx([medians[(p, variant)] * scale for p in LEAF_PHASES]), variant
        lefts = [float(b["x"]) for b in bars]
        assert lefts == pytest.approx([sum(widths[:k]) for k in range(len(widths))]), variant  # stacked
    from omni_loader.reporting.measurements import label

    legend = [r["label"] for r in rows if r["kind"] == "bar" and r["label"]]
    assert legend == [label(p) for p in LEAF_PHASES]  # in words, in load order


# --------------------------------------------------------------------------- the whole report, from known rows

ENV = {"device": "cpu", "device_name": "Test CPU", "device_memory_bytes": 8 * 2**30, "gpu_backend": "rocm",
       "cpu": "Model X", "cpu_count": 2, "memory_bytes": 24 * 2**30, "torch": "2.13.0", "rocm_hip": "7.2",
       "transformers": "5.24.0", "python": "3.11.7", "kit_version": "0.9", "kit_commit": "abc1234"}


# The load benchmark of the rich directory, as the current schema records it (load options nested in the spec).
RICH_RECORD = {"kind": "reproduce", "warmup": 1, "repeats": 3, "order": "alternate", "status": "complete",
               "model": "Test model", "environment": ENV,
               "checkpoint": {"checkpoint_source": "directory", "checkpoint_dir": "/snap"},
               "spec": {"load": {"layout": "vllm-omni", "device": "cpu", "dtype": "float32", "construct": "upstream"},
                        "workers": "spawn"},
               "command_line": "omni-loader reproduce", "started_at": "T0", "finished_at": "T1"}


def write_schema(out: Path, record: dict, version: int, startup: dict | None = None) -> None:
    """metadata.json holding the load benchmark ``record`` (and a ``startup`` one) as schema ``version`` lays
    it out: 3 names each benchmark under "benchmarks"; 2 puts the load record at the top, load options flat in
    its spec, and serve-ab's record under "serve_ab"."""
    out.mkdir(parents=True, exist_ok=True)
    if version >= 3:
        meta = {"schema_version": version, "benchmarks": {"load": record, **({"startup": startup} if startup else {})}}
    else:
        spec = {k: v for k, v in record["spec"].items() if k != "load"} | record["spec"].get("load", {})
        meta = {"schema_version": version, **record, "spec": spec, **({"serve_ab": startup} if startup else {})}
    (out / "metadata.json").write_text(json.dumps(meta))


def _rich_results(out):
    """Both variants, 3 measured runs each plus a warm-up and a failed run, server rows, memory figures."""
    from omni_loader.names import LEAF_PHASES
    from omni_loader.results.rows import append_rows

    write_schema(out, RICH_RECORD, SCHEMA_VERSION)
    discovery = {"baseline": [0.40, 0.50, 0.45], "optimized": [0.0020, 0.0024, 0.0022]}
    rss = {"baseline": [100, 104, 102], "optimized": [101, 103, 102]}
    rows = []

    def run(run_id, variant, k, warm=False):
        leaves = {p: 0.01 for p in LEAF_PHASES}
        leaves["buffer_discovery"] = discovery[variant][k]
        leaves["load_parameters"] = [0.10, 0.30, 0.20][k]  # alike in both variants, with a high spread
        phases = {**leaves, "weight_loading": 1.0 + leaves["buffer_discovery"], "total": 2.0 + leaves["buffer_discovery"]}
        for phase, seconds in phases.items():
            rows.append({"run_id": run_id, "variant": variant, "warmup": warm, "order": None if warm else k + 1,
                         "phase": phase, "parent": "", "seconds": seconds, "status": "ok", "error": "",
                         "state_dict_calls": 51 if variant == "baseline" else 0, "weights_loaded": 187,
                         "persistent_buffers": 1, "digest": "e" * 64, "rss_peak_bytes": rss[variant][k] * 2**20,
                         "device_peak_bytes": None, "source": "load"})

    run(0, "baseline", 0, warm=True)
    run(1, "optimized", 0, warm=True)
    for k in range(3):
        run(2 + 2 * k, "baseline", k)
        run(3 + 2 * k, "optimized", k)
    rows.append({"run_id": 8, "variant": "optimized", "warmup": False, "order": 4, "phase": "total", "parent": "",
                 "seconds": None, "status": "failed", "error": "worker killed by signal 9", "source": "load"})
    for k, (b, o) in enumerate([(105.0, 104.0), (106.0, 104.5), (104.5, 103.0)]):
        for variant, seconds, run_id in (("baseline", b, 9 + 2 * k), ("optimized", o, 10 + 2 * k)):
            rows.append({"run_id": run_id, "variant": variant, "warmup": False, "order": k + 1,
                         "phase": "startup_to_health", "parent": "", "seconds": seconds, "status": "ok",
                         "source": "server"})
            rows.append({"run_id": run_id, "variant": variant, "warmup": False, "order": k + 1,
                         "phase": "weight_loading", "parent": "startup_to_health", "seconds": seconds / 100,
                         "status": "ok", "source": "server"})
    append_rows(out, rows)
    return out


@pytest.fixture(scope="module")
def rich_dir(tmp_path_factory):
    return _rich_results(tmp_path_factory.mktemp("rich") / "res")


@pytest.fixture(scope="module")
def rich(rich_dir):
    return rich_dir, render_report(rich_dir)


def _section(text: str, heading: str) -> list[str]:
    return text.split(heading + "\n", 1)[1].split("\n## ", 1)[0].strip("\n").splitlines()


def test_report_intro_headline_and_verdicts(rich):
    out, text = rich
    lines = text.splitlines()
    assert lines[0] == "# Token2Wav loading: baseline vs optimized buffer discovery"
    assert ("This report measures both loader variants (baseline, optimized): 3 + 3 measured runs after 1 warm-up "
            "per variant, order alternate; 1 run failed (see Verdicts); status complete; integrity checks found "
            "nothing wrong.") in lines[2]
    head = lines[4:lines.index("## Environment")]
    assert head[0] == "- **Calls to state_dict()**: 51 → 0 (removed 51 calls); deterministic count."
    assert head[1] == ("- **Buffer discovery**: 450.000 ms → 2.200 ms (447.800 ms faster, 99.51%); "
                       "no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can); PR's rule: ranges separate.")
    assert head[2] == (f"- **Token2Wav weight loading**: {duration(1.45, 'ms')} → {duration(1.0022, 'ms')} "
                       "(447.800 ms faster, 30.88%); "
                       "no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can); PR's rule: ranges separate.")
    assert head[3].startswith("- **Startup to /health**: 105.000 s → 104.000 s (1.000 s faster, 0.95%); "
                              "no difference claimed") and head[3].endswith("; PR's rule: ranges overlap: no claim.")
    # every successful load is hashed, warm-ups included: 8 runs
    from omni_loader.reporting.stats import equivalence

    statement = equivalence(read_runs(out))["statement"]
    assert statement.startswith(f"equivalent: all 8 runs of both variants loaded identical tensors (sha256 {'e' * 16}…")
    assert head[4] == f"- **Equivalence**: {statement}."
    assert head[5] == "- **Memory**: Peak process RSS: unchanged (within noise)."
    verdicts = _section(text, "## Verdicts")
    assert verdicts[:3] == ["- Calls to state_dict(): deterministic count",
                            "- Buffer discovery: no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can)",
                            "- Token2Wav weight loading: no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can)"]
    assert verdicts[3].startswith("- Startup to /health: no difference claimed")
    assert any(v.startswith("- Server log: weight_loading: no difference claimed") for v in verdicts)
    assert "- Failed runs: 1 (run 8 optimized: worker killed by signal 9)" in verdicts
    assert "- Memory: Peak process RSS: unchanged (within noise)" in verdicts
    spread = _section(text, "### Spread warnings")
    assert "- Load parameters: baseline spread is high: IQR is 50% of the median" in spread
    assert "- Load parameters: optimized spread is high: IQR is 50% of the median" in spread


def test_report_environment_table(rich_dir):
    from omni_loader.reporting.report_environment import environment_table
    from omni_loader.results.suite import Suite

    rows = _md_tables("\n" + environment_table(Suite.read(rich_dir)), "\n")
    assert rows[0] == ["Item", "Value"]
    table = dict(rows[1:])
    assert table["Model"] == "Test model"
    assert table["Checkpoint"] == "directory: /snap"
    assert table["Device"] == "cpu (Test CPU, 8 GiB)"
    assert table["CPU"] == "Model X (2 cores)"
    assert table["Memory"] == "24 GiB"
    assert table["PyTorch"] == "2.13.0" and table["transformers"] == "5.24.0" and table["Python"] == "3.11.7"
    assert table["ROCm (HIP)"] == "7.2"
    assert table["omni-loader"] == "0.9 (abc1234)"
    assert table["Layout / dtypes"] == "vllm-omni / DiT float32, BigVGAN bfloat16 (stage dtype float32)"
    assert table["Variants"] == ("baseline = vLLM-Omni 0.28.0 and the earlier releases that ship find_all_registers "
                                 "(code: be81443c, December 2025); optimized = vLLM-Omni 0.30.0, the first release "
                                 "with the fix (code: PR 7061)")
    assert table["Warm-ups"] == "1 per variant"
    assert table["Repeats"] == "3 per variant, order alternate, a fresh interpreter per run (imports included)"
    assert table["Command"] == "`omni-loader reproduce`"
    assert table["Started / finished"] == "T0 / T1"


def test_environment_table_without_a_gpu_or_details():
    from omni_loader.reporting.report_environment import environment_table
    from omni_loader.results.suite import Suite

    table = dict(_md_tables("\n" + environment_table(Suite({"spec": {"in_process": True}})), "\n")[1:])
    assert table["CUDA"] == "none (CPU build)" and table["Device"] == "()" and table["Memory"] == "?"
    assert table["CPU"] == "(? cores)" and table["omni-loader"] == "(no git commit)"  # cells are stripped
    assert table["Repeats"] == "None per variant, order None, in-process (later runs see a warm process)"
    assert table["Started / finished"] == "? / ?" and table["Checkpoint"] == "?:"
    cuda = dict(_md_tables("\n" + environment_table(Suite({"kind": "reproduce", "environment": {"cuda": "12.4"},
                                                             "status": "running"})), "\n")[1:])
    assert cuda["CUDA"] == "12.4" and cuda["Started / finished"] == "? / running"
    assert cuda["Repeats"].endswith(", a fresh interpreter per run (imports included)")  # schema 1: spawn


def test_report_measurement_table_cells(rich_dir):
    from omni_loader.reporting.measurements import comparisons
    from omni_loader.reporting.report_tables import measurement_table

    rows = _md_tables("\n" + measurement_table(comparisons(read_runs(rich_dir))), "\n")
    assert rows[0] == ["Measurement", "Baseline median", "Optimized median", "Change", "Ratio", "Baseline min–max",
                       "Optimized min–max", "Mann-Whitney p", "95% CI of Δ median", "Verdict", "PR's rule (min–max)"]
    body = {r[0]: r for r in rows[1:]}
    assert [r[0] for r in rows[1:5]] == ["Calls to state_dict()", "Buffer discovery", "Token2Wav weight loading",
                                        "Startup to /health"]
    assert body["Calls to state_dict()"][1:] == ["51", "0", "Removed 51 calls", "—", "51–51", "0–0", "—", "—",
                                                 "deterministic count", "—"]
    bd = body["Buffer discovery"]
    assert bd[1:5] == ["450.000 ms", "2.200 ms", "447.800 ms faster, 99.51%", f"{0.45 / 0.0022:.2f}×"]
    assert bd[5:7] == ["400.000 ms–500.000 ms (IQR 50.000 ms)", "2.000 ms–2.400 ms (IQR 0.200 ms)"]
    assert bd[7] == "0.1"
    low, high = (float(x.removesuffix(" ms")) for x in bd[8].split(" … "))
    assert low <= (0.0022 - 0.45) * 1e3 <= high < 0
    startup = body["Startup to /health"]
    assert startup[1:4] == ["105.000 s", "104.000 s", "1.000 s faster, 0.95%"]  # startup in seconds, as the PR
    assert startup[5] == "104.500 s–106.000 s (IQR 0.750 s)"
    assert body["Server log: weight_loading"][1:3] == [duration(1.05, "ms"), duration(1.04, "ms")]
    assert body["Whole Token2Wav load"][1:3] == [duration(2.45, "ms"), duration(2.0022, "ms")]


def test_report_memory_table(rich_dir):
    from omni_loader.reporting.report_tables import memory_table

    table, verdict = memory_table(read_runs(rich_dir))
    assert verdict == "Peak process RSS: unchanged (within noise)"
    rows = _md_tables("\n" + table, "\n")
    assert rows == [["Memory", "Baseline median", "Baseline min–max", "Optimized median", "Optimized min–max",
                     "Verdict"],
                    ["Peak process RSS", "102 MiB", "100 MiB–104 MiB", "102 MiB", "101 MiB–103 MiB",
                     "unchanged (within noise)"]]


def test_report_plots_and_profiles_are_linked(rich, tmp_path):
    import shutil

    out, text = rich
    assert _section(text, "## Plots") == ["![phases](plots/phases.png)", "![where_time_goes](plots/where_time_goes.png)",
                                          "![ratios_vs_pr](plots/ratios_vs_pr.png)", "![drift](plots/drift.png)"]
    assert "## Profiles" not in text
    copy = Path(shutil.copytree(out, tmp_path / "copy"))
    (copy / "profiles" / "baseline").mkdir(parents=True)
    for name in ("profile.md", "flame.svg", "notes.txt"):
        (copy / "profiles" / "baseline" / name).write_text("x")
    (copy / "profiles" / "profile.md").write_text("x")
    (copy / "profiles" / "stray.csv").write_text("x")  # a file, not a variant directory
    profiles = _section(render_report(copy), "## Profiles")
    assert profiles == ["Where the time goes, both variants: [profiles/profile.md](profiles/profile.md)", "",
                        "- baseline: [flame.svg](profiles/baseline/flame.svg), "
                        "[profile.md](profiles/baseline/profile.md)"]
    (copy / "profiles" / "profile.md").unlink()
    assert _section(render_report(copy), "## Profiles")[0].startswith("- baseline: ")


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_render_report_writes_nothing_and_write_report_writes_what_it_links(rich, tmp_path, monkeypatch):
    """Written again over the plots it drew, the same report (each plot file checked before any is written); with
    $OMNI_LOADER_PLOTS=off, the text alone, rendered and written alike, and no plot drawn again."""
    import shutil

    out, text = rich
    assert not (out / "plots").exists() and not (out / "report.md").exists()  # rendered, not written
    copy = Path(shutil.copytree(out, tmp_path / "copy"))
    from omni_loader.reporting.report import write_report

    path = write_report(copy)
    assert path == copy / "report.md" and path.read_text() == text
    linked = re.findall(r"!\[\w+\]\((plots/\w+\.png)\)", text)
    assert len(linked) == 4 and all((copy / p).is_file() for p in linked)
    assert sorted(p.name for p in (copy / "plots").iterdir()) == sorted(
        f"{Path(p).stem}.{ext}" for p in linked for ext in ("png", "svg", "csv"))
    assert write_report(copy).read_text() == text
    drawn = {p.name: p.stat().st_mtime_ns for p in (copy / "plots").iterdir()}
    monkeypatch.setenv("OMNI_LOADER_PLOTS", "off")
    off = write_report(copy).read_text()
    assert "![" not in off and "Not drawn ($OMNI_LOADER_PLOTS=off)" in off and render_report(copy) == off
    assert {p.name: p.stat().st_mtime_ns for p in (copy / "plots").iterdir()} == drawn


def test_write_report_checks_every_plot_before_it_writes_one(rich_dir, tmp_path, monkeypatch):
    """The last plot's file, a hard link to a file elsewhere: refused in one line naming it, before the first plot
    is written again (two small figures stand in for the report's, drawn in a fraction of the time)."""
    import shutil

    import omni_loader.reporting.report as report
    from omni_loader.reporting.figures import ShownFigure

    def figures(check, comps):
        made = {stem: ShownFigure(figsize=(2, 2)) for stem in ("first", "last")}
        for fig in made.values():
            fig.subplots().bar([0, 1], [1, 2])
        return made

    monkeypatch.setattr(report, "_figures", figures)
    copy = Path(shutil.copytree(rich_dir, tmp_path / "copy"))
    report.write_report(copy)
    drawn = {p.name: p.stat().st_mtime_ns for p in (copy / "plots").iterdir()}
    assert sorted(drawn) == ["first.csv", "first.png", "first.svg", "last.csv", "last.png", "last.svg"]
    outside = tmp_path / "outside.csv"
    outside.write_text("not a plot\n")
    last = copy / "plots" / "last.csv"
    last.unlink()
    os.link(outside, last)
    with pytest.raises(ResultsError, match=re.escape(f"{last} is a hard link")):
        report.write_report(copy)
    assert outside.read_text() == "not a plot\n"
    assert {p.name: p.stat().st_mtime_ns for p in (copy / "plots").iterdir() if p != last} == {
        name: t for name, t in drawn.items() if name != last.name}


def test_a_rendered_report_links_its_plots_without_drawing_them(rich, monkeypatch):
    """render_report (the notebooks' report sections) drew every plot to learn their names, about 1.5 s a call:
    it names them from the data alone (plots.report_figure_stems, the test each figure function makes), the same
    links write_report writes (the test above)."""
    from omni_loader.reporting import plots

    class NoDrawing:
        def __init__(self, *args, **kwargs):
            raise AssertionError("render_report drew a figure")

    out, text = rich
    monkeypatch.setattr(plots, "ShownFigure", NoDrawing)
    assert render_report(out) == text and len(re.findall(r"!\[\w+\]\(plots/\w+\.png\)", text)) == 4


def test_report_reads_schema_2_and_3_records_alike(rich_dir, tmp_path):
    """The report reads a benchmark's record only through results.benchmark: schema 2's layout (load record at
    the top, load options flat, serve-ab's record under "serve_ab") and schema 3's ("benchmarks") give one report,
    and the load benchmark's record is the one described, not the startup one beside it."""
    import shutil

    startup = {"kind": "serve-ab", "status": "complete", "model": "Other model", "warmup": 9,
               "environment": {"device": "cuda", "device_name": "Other GPU"}, "spec": {"runs": 9}}
    texts = {}
    for version in (2, 3):
        copy = Path(shutil.copytree(rich_dir, tmp_path / f"v{version}"))
        write_schema(copy, RICH_RECORD, version, startup)
        texts[version] = render_report(copy)
    assert texts[2] == texts[3]
    table = dict(_md_tables(texts[3], "## Environment")[1:])
    assert table["Model"] == "Test model" and table["Device"] == "cpu (Test CPU, 8 GiB)"
    assert table["Layout / dtypes"] == "vllm-omni / DiT float32, BigVGAN bfloat16 (stage dtype float32)" and table["Construction"].startswith("upstream-cpu:")
    assert table["Warm-ups"] == "1 per variant" and table["Started / finished"] == "T0 / T1"


def test_a_startup_benchmark_alone_is_described_by_its_own_record():
    from omni_loader.results.suite import Suite

    serve_ab = Suite({"schema_version": 2, "kind": "serve-ab", "model": "M", "spec": {"runs": 4}})
    assert serve_ab.described["model"] == "M" and serve_ab.spec == {"runs": 4}
    both = Suite({"schema_version": 3, "benchmarks": {"startup": {"model": "S"}, "load": {"model": "L", "spec": {
        "load": {"layout": "transformers"}, "runs": 2}}}})
    assert both.described["model"] == "L" and both.spec == {"runs": 2, "layout": "transformers"}
    assert Suite({"schema_version": 3, "benchmarks": {}}).described == {}


def test_comparisons_order_and_labels(rich_dir):
    from omni_loader.reporting.measurements import comparisons, label, row_unit

    out = rich_dir
    comps = comparisons(read_runs(out))
    phases = [c.phase for c in comps]
    assert phases[:4] == ["state_dict_calls", "buffer_discovery", "weight_loading", "startup_to_health"]
    assert phases[-1] == "server:weight_loading"  # server log figures last
    assert [c.unit for c in comps[:2]] == ["calls", "s"]
    assert label("server:weight_loading") == "Server log: weight_loading" and label("other") == "other"
    assert label("total") == "Whole Token2Wav load"
    assert [row_unit(c) for c in comps[1:4]] == ["ms", "ms", "s"]
    assert comparisons(read_runs(out / "nowhere")) == []


# --------------------------------------------------------------------------- exact cells: A/A floor, beyond the PR, summary
#
# Every cell below is worked out by hand from the samples written, so a flipped operator, a changed
# constant, a unit chosen from the wrong value or a dropped row in report_tables / report / measurements
# shows as a changed cell.

MIB = 2**20


def _aa_frame(samples: dict[str, tuple[list[float], list[float]]]):
    """A runs frame holding only A/A rows (source 'aa'): phase -> (arm 1 samples, arm 2 samples)."""
    import pandas as pd

    rows = []
    for phase, arms in samples.items():
        for arm, values in zip(("aa-1", "aa-2"), arms):
            for k, seconds in enumerate(values):
                rows.append({"run_id": 100 * (arm == "aa-2") + k, "variant": arm, "warmup": False, "status": "ok",
                             "source": "aa", "phase": phase, "seconds": seconds})
    return pd.DataFrame(rows)


def test_noise_floor_table_cells_each_in_the_unit_of_the_floors_own_median():
    """One unit per row, chosen from the median of both arms together: an arm's median or extreme on the
    other side of 10 s is still written in the row's unit; the relative floor is the resolvable change over
    that median (|Δ median| here, wider than half the bootstrap interval by construction)."""
    from omni_loader.reporting.report_tables import noise_floor_table
    from omni_loader.reporting.measurements import noise_floors

    frame = _aa_frame({
        # both arms together: median (9.9 + 10.4) / 2 = 10.15 s -> seconds, though arm 2 lies below 10 s
        "total": ([10.4, 10.5, 10.6], [9.7, 9.8, 9.9]),
        # both arms together: median (9.2 + 9.9) / 2 = 9.55 s -> milliseconds, though arm 1 reaches 10 s
        "buffer_discovery": ([9.9, 10.0, 10.1], [9.0, 9.1, 9.2]),
    })
    floors = noise_floors(frame)
    assert list(floors) == ["total", "buffer_discovery"]
    rows = _md_tables("\n" + noise_floor_table(floors), "\n")
    assert rows == [
        ["Phase", "Runs (arm 1 + arm 2)", "Arm 1 median", "Arm 2 median", "Min–max (both arms)",
         "Smallest resolvable change", "Relative", "Kit's verdict on the arms"],
        # 0.7 / 10.15 = 6.90%
        ["Whole Token2Wav load", "3 + 3", "10.500 s", "9.800 s", "9.700 s–10.600 s", "0.700 s", "±6.9%", SEPARATE],
        # 0.9 / 9.55 = 9.42%
        ["Buffer discovery", "3 + 3", "10000.000 ms", "9100.000 ms", "9000.000 ms–10100.000 ms", "900.000 ms",
         "±9.4%", SEPARATE],
    ]
    # arms of unequal size are counted each on its own; a phase with fewer than 2 runs in an arm has no floor
    uneven = _aa_frame({"total": ([0.010, 0.011], [0.012, 0.013, 0.014, 0.015]), "construct": ([0.1], [0.1, 0.2])})
    assert list(noise_floors(uneven)) == ["total"]
    assert _md_tables("\n" + noise_floor_table(noise_floors(uneven)), "\n")[1][:2] == ["Whole Token2Wav load",
                                                                                      "2 + 4"]


def test_summary_table_shows_every_time_column_in_one_unit_named_in_its_header():
    import pandas as pd

    from omni_loader.reporting.report_tables import styled_summary_table

    rows = []
    for k, (b, o) in enumerate([(0.40, 0.0020), (0.50, 0.0024), (0.45, 0.0022)]):
        for variant, seconds, run_id in (("baseline", b, 2 * k), ("optimized", o, 2 * k + 1)):
            rows.append({"run_id": run_id, "variant": variant, "warmup": False, "status": "ok", "source": "load",
                         "phase": "buffer_discovery", "seconds": seconds})
    styler = styled_summary_table(pd.DataFrame(rows))
    shown = styler.data  # one source ("load"): no column for it; phases and headers in words
    assert list(shown.columns) == ["variant", "phase", "runs", "median (ms)", "first quartile (ms)",
                                   "third quartile (ms)", "interquartile range (ms)", "min (ms)", "max (ms)"]
    assert list(shown["variant"]) == ["baseline", "optimized"] and set(shown["phase"]) == {LABELS["buffer_discovery"]}
    assert list(shown.iloc[0, 2:]) == pytest.approx([3, 450.0, 425.0, 475.0, 50.0, 400.0, 500.0])
    assert list(shown.iloc[1, 2:]) == pytest.approx([3, 2.2, 2.1, 2.3, 0.2, 2.0, 2.4])
    html = styler.to_html()
    assert ">450.000<" in html and ">2.200<" in html
    server = pd.DataFrame([{**r, "source": "server", "phase": "server:weights"} for r in rows])
    two = styled_summary_table(pd.concat([pd.DataFrame(rows), server])).data  # two sources: each row says which
    assert list(two.columns[:3]) == ["source", "variant", "phase"] and list(two["source"]) == ["load"] * 2 + ["server"] * 2


# The arms directory: the PR's pair, a built-in variant placed between them and a custom variant last, so that the
# benchmark's first variant is `baseline` and the second is not the PR's other one; plus A/A rows for two phases.
ARMS = ("baseline", "assign", "optimized", "mine")
MINE = {"name": "mine", "discovery": "builtin:baseline", "parameters": "builtin:assign", "memory": "",
        "needs_gpu": False}
ARMS_SAMPLES = {  # per variant: buffer discovery, load parameters, total (three runs), state_dict calls, peak RSS
    "baseline": {"buffer_discovery": [0.40, 0.50, 0.45], "load_parameters": [0.030, 0.036, 0.033],
                 "total": [9.0, 9.2, 9.1], "calls": 51, "rss": [100, 104, 102]},
    "assign": {"buffer_discovery": [0.0020, 0.0024, 0.0022], "load_parameters": [0.020, 0.024, 0.021],
               "total": [8.0, 8.2, 8.1], "calls": 51, "rss": [150, 160, 155]},
    "optimized": {"buffer_discovery": [0.0020, 0.0024, 0.0022], "load_parameters": [0.031, 0.029, 0.033],
                  "total": [8.5, 8.7, 8.6], "calls": 0, "rss": [101, 103, 102]},
    # no load_parameters rows and no memory figures: those rows are left out, not written as n/a
    "mine": {"buffer_discovery": [0.30, 0.35, 0.32], "total": [12.0, 12.4, 12.2], "calls": 0, "rss": None},
}
ARMS_AA = {"buffer_discovery": ([0.0020, 0.0021, 0.0022], [0.0023, 0.0024, 0.0025]),
           "load_parameters": ([0.030, 0.031, 0.032], [0.034, 0.035, 0.036])}


def _arms_results(out):
    from omni_loader.results.rows import append_rows

    record = {**RICH_RECORD, "spec": {**RICH_RECORD["spec"], "variants": list(ARMS), "custom_variants": [MINE],
                                      "aa": True}}
    write_schema(out, record, SCHEMA_VERSION)
    rows = []
    base = {"warmup": False, "status": "ok", "error": "", "weights_loaded": 187, "persistent_buffers": 1,
            "digest": "e" * 64, "device_peak_bytes": None}
    for k in range(3):
        for i, variant in enumerate(ARMS):
            s = ARMS_SAMPLES[variant]
            phases = {p: s[p][k] for p in ("buffer_discovery", "load_parameters", "total") if p in s}
            phases["weight_loading"] = phases["buffer_discovery"] + phases.get("load_parameters", 0.0) + 0.01
            for phase, seconds in phases.items():
                rows.append({**base, "run_id": 4 * k + i, "variant": variant, "order": k + 1, "phase": phase,
                             "parent": "" if phase == "total" else "total", "seconds": seconds, "source": "load",
                             "state_dict_calls": s["calls"], "rss_peak_bytes": s["rss"][k] * MIB if s["rss"] else ""})
    for a, arm in enumerate(("aa-1", "aa-2")):  # every A/A run times both phases
        for k in range(3):
            for phase, arms in ARMS_AA.items():
                rows.append({**base, "run_id": 100 + 3 * a + k, "variant": arm, "order": k + 1, "phase": phase,
                             "parent": "", "seconds": arms[a][k], "source": "aa", "state_dict_calls": 0,
                             "rss_peak_bytes": ""})
    append_rows(out, rows)
    return out


@pytest.fixture(scope="module")
def arms_dir(tmp_path_factory):
    return _arms_results(tmp_path_factory.mktemp("arms") / "res")


ASSIGN_MEMORY = ("parameters are the checkpoint's memory-mapped tensors where dtype and device allow: they stay "
                 "backed by the file mapping (pages shared with the page cache, read on first use), and the memory "
                 "written at construction is freed; the fused qkv_proj is a new stacked tensor")
BEYOND_HEADER = ["Variant", "Measurement", "baseline median", "Variant median", "Change", "Ratio", "Variant min–max",
                 "Verdict"]
SEPARATE = "no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can)"  # the kit's verdict at 3+3
BEYOND_ROWS_ASSIGN = [
    ["assign", "Calls to state_dict()", "51", "51", "unchanged", "—", "51–51", "deterministic count"],
    ["assign", "Buffer discovery", "450.000 ms", "2.200 ms", "447.800 ms faster, 99.51%", "204.55×",
     "2.000 ms–2.400 ms (IQR 0.200 ms)", SEPARATE],
    # 33 ms -> 21 ms: 12 / 33 = 36.36%, 33 / 21 = 1.57x
    ["assign", "Load parameters", "33.000 ms", "21.000 ms", "12.000 ms faster, 36.36%", "1.57×",
     "20.000 ms–24.000 ms (IQR 2.000 ms)", SEPARATE],
    # weight loading = discovery + load parameters + 10 ms: 493 ms -> 33.2 ms
    ["assign", "Token2Wav weight loading", "493.000 ms", "33.200 ms", "459.800 ms faster, 93.27%", "14.85×",
     "32.000 ms–36.400 ms (IQR 2.200 ms)", SEPARATE],
    ["assign", "Whole Token2Wav load", "9,100.000 ms", "8,100.000 ms", "1,000.000 ms faster, 10.99%", "1.12×",
     "8,000.000 ms–8,200.000 ms (IQR 100.000 ms)", SEPARATE],
    # 102 MiB -> 155 MiB, ranges 100–104 and 150–160 apart: 53 / 102 = 52.0%
    ["assign", "Peak process RSS", "102 MiB", "155 MiB", "+53.0 MiB", "—", "150 MiB–160 MiB", "changed by 52.0%"],
]
BEYOND_ROWS_MINE = [
    ["mine", "Calls to state_dict()", "51", "0", "Removed 51 calls", "—", "0–0", "deterministic count"],
    ["mine", "Buffer discovery", "450.000 ms", "320.000 ms", "130.000 ms faster, 28.89%", "1.41×",
     "300.000 ms–350.000 ms (IQR 25.000 ms)", SEPARATE],
    # no Load parameters row: mine has no such rows
    ["mine", "Token2Wav weight loading", "493.000 ms", "330.000 ms", "163.000 ms faster, 33.06%", "1.49×",
     "310.000 ms–360.000 ms (IQR 25.000 ms)", SEPARATE],
    # the row's unit comes from the baseline (9.1 s: ms), the variant's 12.2 s is written in it as well
    ["mine", "Whole Token2Wav load", "9,100.000 ms", "12,200.000 ms", "3,100.000 ms slower, 34.07%", "0.75×",
     "12,000.000 ms–12,400.000 ms (IQR 200.000 ms)", SEPARATE],
    # no Peak process RSS row: mine recorded no memory figures
]


def test_beyond_pr_section_compares_every_other_variant_with_the_first(arms_dir):
    from omni_loader.reporting.report_tables import beyond_pr_section
    from omni_loader.results.suite import Suite

    lines = beyond_pr_section(read_runs(arms_dir), Suite.read(arms_dir))
    table = lines[4]
    assert lines[:4] == ["## Beyond the PR", "",
                         "Each other variant against `baseline`, the first of this benchmark's variants, in the same "
                         "runs (same alternation, same statistics; equivalence above covers every variant).", ""]
    assert lines[5:] == ["",
                         "- **assign**: discovery `builtin:optimized`, parameters `builtin:assign`. "
                         f"Memory: {ASSIGN_MEMORY}.",
                         "- **mine**: discovery `builtin:baseline`, parameters `builtin:assign`. "
                         "Memory: no change to where parameters live.",
                         ""]
    # `optimized`, the PR's other variant, is the measurement table's: not repeated here
    assert _md_tables("\n" + table, "\n") == [BEYOND_HEADER, *BEYOND_ROWS_ASSIGN, *BEYOND_ROWS_MINE]
    assert table.splitlines()[1] == "| --- | --- | --- | --- | --- | --- | --- | --- |"


@pytest.fixture
def no_figures(monkeypatch):
    """render_report linking two plots whatever the rows hold (phases, drift): these tests read the text around
    the links, on rows made up to test that text."""
    from omni_loader.reporting import plots

    monkeypatch.setattr(plots, "report_figure_stems", lambda frame, comps, reference: ["phases", "drift"])


def test_render_report_with_aa_floors_and_variants_beyond_the_pr(arms_dir):
    """The whole report of the arms directory: A/A floors in the headline, as a column and as a table of their
    own; the variants beyond the PR between the measurements and the verdicts; blocks one blank line apart."""
    text = render_report(arms_dir)
    lines = text.split("\n")
    assert text.endswith("|\n\n## Plots\n\n" + "".join(f"![{stem}](plots/{stem}.png)\n" for stem in (
        "phases", "where_time_goes", "ratios_vs_pr", "drift")) + "\n")
    assert "\n\n\n" not in text and "|\n|" in text  # blocks one line apart; table rows kept together
    assert [x for x in lines if x.startswith("#")] == [
        "# Token2Wav loading: baseline vs optimized buffer discovery", "## Environment", "## Measurements",
        "### A/A noise floor", "## Controls", "### `baseline` against `optimized`", "### `baseline` against `mine`",
        "## Beyond the PR", "## Verdicts", "### Spread warnings", "## Memory",
        "## Against the PR's figures", "### Which timer each row is", "## Where the load time goes",
        "### Page faults and context switches per phase", "## Plots"]
    assert lines[1] == lines[3] == ""
    assert lines[2].endswith("This report measures 4 loader variants (baseline, assign, optimized, mine): 3 + 3 + 3 + 3 "
                             "measured runs after 1 warm-up per variant, order alternate; status complete; "
                             "integrity checks found nothing wrong.")  # A/A runs and other variants not counted
    equivalence = ("equivalent: all 18 runs of all 4 variants (baseline, assign, optimized, mine) and the A/A arms "
                   "loaded identical tensors (sha256 eeeeeeeeeeeeeeee…; 187 weights loaded, 1 persistent buffer)")
    assert lines[4:lines.index("## Environment")] == [
        "- **Calls to state_dict()**: 51 → 0 (removed 51 calls); deterministic count.",
        f"- **Buffer discovery**: 450.000 ms → 2.200 ms (447.800 ms faster, 99.51%); {SEPARATE}; "
        "A/A noise floor ±13.3% (resolved); PR's rule: ranges separate.",  # 0.3 ms over the A/A median 2.25 ms
        f"- **Token2Wav weight loading**: 493.000 ms → 43.000 ms (450.000 ms faster, 91.28%); {SEPARATE}; "
        "PR's rule: ranges separate.",
        f"- **Equivalence**: {equivalence}.",
        "- **Memory**: Peak process RSS: unchanged (within noise).",
        # load parameters, the one shared phase timed in both arms: 33 -> 31 ms; weight loading 450 ms saved
        "- **Controls**: none of the 1 phases both variants run unchanged differs (same statistics, beyond the A/A "
        "floor); Token2Wav weight loading 450.000 ms = 447.800 ms in the changed step (Buffer discovery) + 2.000 ms in "
        "controls + 0.200 ms between phases.",
        ""]
    for i, line in enumerate(lines[1:-1], start=1):  # every heading stands one blank line apart from its neighbours
        if line.startswith("#"):
            assert lines[i - 1] == lines[i + 1] == "", line
    assert lines[lines.index("## Memory"):lines.index("## Against the PR's figures")] == [
        "## Memory", "",
        "| Memory | Baseline median | Baseline min–max | Optimized median | Optimized min–max | Verdict |",
        "| --- | --- | --- | --- | --- | --- |",
        "| Peak process RSS | 102 MiB | 100 MiB–104 MiB | 102 MiB | 101 MiB–103 MiB | unchanged (within noise) |", ""]
    environment = lines[lines.index("## Environment"):lines.index("## Measurements")]
    assert environment[:3] == ["## Environment", "", "| Item | Value |"] and environment[-1] == ""
    assert all(x.startswith("| ") for x in environment[2:-1])
    assert _section(text, "## Measurements")[:3] == [
        "Medians of the measured runs; spread as min–max and interquartile range; Mann-Whitney U (two-sided) and a "
        "95% percentile bootstrap interval for median(optimized) − median(baseline). The kit's verdict claims a difference "
        "when that interval excludes 0 and the rank test agrees (p < 0.05), and, with an A/A benchmark, when it is "
        "beyond the noise floor: medians and ranks, which one slow run cannot flip. The PR's own rule (no claim where "
        "the min–max ranges overlap, as it did for startup) is shown beside it, labelled.", "",
        "| Measurement | Baseline median | Optimized median | Change | Ratio | Baseline min–max | Optimized min–max "
        "| Mann-Whitney p | 95% CI of Δ median | Verdict | PR's rule (min–max) | A/A noise floor |"]
    measurements = _md_tables(text, "## Measurements")
    assert measurements[0][-3:] == ["Verdict", "PR's rule (min–max)", "A/A noise floor"]
    assert [r[0] for r in measurements[1:]] == ["Calls to state_dict()", "Buffer discovery", "Token2Wav weight loading",
                                                "Load parameters", "Whole Token2Wav load"]
    # a floor only where the A/A runs timed the phase; load parameters' 6.06% is within its ±12.1% (4 ms / 33 ms)
    assert [r[-1] for r in measurements[1:]] == ["—", "±13.3% (resolved)", "—", "±12.1% (below the floor)", "—"]
    assert measurements[4][1:8] == ["33.000 ms", "31.000 ms", "2.000 ms faster, 6.06%", "1.06×",
                                    "30.000 ms–36.000 ms (IQR 3.000 ms)", "29.000 ms–33.000 ms (IQR 2.000 ms)", "0.507"]
    assert measurements[4][9:11] == [SEPARATE, "ranges overlap: no claim"]
    assert _section(text, "### A/A noise floor") == [
        "The optimized variant in both arms, planned like the A/B runs: any difference between the arms is noise, so "
        "an A/B difference smaller than the floor cannot be told apart from identical loads.", "",
        "| Phase | Runs (arm 1 + arm 2) | Arm 1 median | Arm 2 median | Min–max (both arms) | Smallest resolvable change "
        "| Relative | Kit's verdict on the arms |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| Buffer discovery | 3 + 3 | 2.100 ms | 2.400 ms | 2.000 ms–2.500 ms | 0.300 ms | ±13.3% | {SEPARATE} |",
        f"| Load parameters | 3 + 3 | 31.000 ms | 35.000 ms | 30.000 ms–36.000 ms | 4.000 ms | ±12.1% | {SEPARATE} |"]
    beyond = _md_tables(text, "## Beyond the PR")
    assert beyond == [BEYOND_HEADER, *BEYOND_ROWS_ASSIGN, *BEYOND_ROWS_MINE]
    assert f"- **assign**: discovery `builtin:optimized`, parameters `builtin:assign`. Memory: {ASSIGN_MEMORY}." in lines
    assert _section(text, "## Against the PR's figures")[:3] == [
        "The PR measured Qwen2.5-Omni-3B on one AMD MI300X (ROCm 7.2, PyTorch 2.12) inside vLLM-Omni; absolute times "
        "differ across machines, so compare the ratios.", "",
        "| Measurement | PR baseline | PR optimized | PR ratio | This run baseline | This run optimized | This run ratio |"]
    assert _md_tables(text, "## Against the PR's figures")[2] == ["Buffer discovery", "456.946 ms", "1.564 ms", "292.16×",
                                                                 "450.000 ms", "2.200 ms", "204.55×"]
    assert _section(text, "## Where the load time goes")[0] == "| Phase | Baseline median | Share | Optimized median | Share |"
    where = {row[0]: row for row in _md_tables(text, "## Where the load time goes")[1:]}
    assert where["Buffer discovery"] == ["Buffer discovery", "450.000 ms", "4.9%", "2.200 ms", "0.0%"]  # of 9.1 s, 8.6 s
    assert _section(text, "### Page faults and context switches per phase")[:3] == [
        "Medians per run of `getrusage` deltas. Minor faults are first touches of fresh memory (on a CPU, every 4 KiB "
        "page of a parameter written for the first time); involuntary switches are the scheduler giving the CPU to "
        "another process: a phase with many of them was slowed by a neighbour, not by its own work.", "",
        "| Phase | Minor faults (base.) | Minor faults (opti.) | Major faults (base.) | Major faults (opti.) | Voluntary "
        "switches (base.) | Voluntary switches (opti.) | Involuntary switches (base.) | Involuntary switches (opti.) |"]
    verdicts = _section(text, "## Verdicts")
    assert verdicts == ["- Calls to state_dict(): deterministic count", f"- Buffer discovery: {SEPARATE}",
                        f"- Token2Wav weight loading: {SEPARATE}",
                        f"- Load parameters: {SEPARATE}",
                        f"- Whole Token2Wav load: {SEPARATE}", f"- Equivalence: {equivalence}",
                        "- Memory: Peak process RSS: unchanged (within noise)", "- Failed runs: none", "",
                        "### Spread warnings", "",
                        # IQR 50 ms over 450 ms; 53 ms over 493 ms
                        "- Buffer discovery: baseline spread is high: IQR is 11% of the median",
                        "- Token2Wav weight loading: baseline spread is high: IQR is 11% of the median"]


def test_planned_arms_and_spec_of_read_the_described_record():
    from omni_loader.reporting.measurements import planned_arms
    from omni_loader.results.suite import Suite

    def meta(spec):
        return Suite({"schema_version": 3, "benchmarks": {"load": {"spec": spec}}})

    assert planned_arms(meta({})) == ["baseline", "optimized"]  # schema 1: the PR's two
    assert planned_arms(meta({"variants": ["optimized", "assign"]})) == ["optimized", "assign"]
    assert planned_arms(meta({"variants": ["optimized", "assign"], "aa": True})) == ["optimized", "assign", "aa-1",
                                                                                    "aa-2"]
    assert planned_arms(meta({"aa": False})) == ["baseline", "optimized"]
    # only the load options' own dict is flattened: another setting holding a dict stays as it is
    spec = {"load": {"layout": "vllm-omni", "dtype": "float32"}, "threads": {"torch": 4}, "runs": 3}
    assert meta(spec).spec == {"threads": {"torch": 4}, "runs": 3, "layout": "vllm-omni", "dtype": "float32"}
    assert Suite({"schema_version": 3, "benchmarks": {"load": {}}}).spec == {}


def test_labels_and_row_units():
    from omni_loader.reporting.measurements import label, phase_unit, row_unit
    from omni_loader.reporting.stats import Summary, compare

    assert label("server:weight_loading") == "Server log: weight_loading"
    assert label("server:a:b") == "Server log: a:b"  # only the first colon separates the prefix
    assert label("buffer_discovery") == "Buffer discovery" and label("my_step") == "my_step"
    assert phase_unit("startup_to_health", 0.5) == "s"  # startup in seconds whatever its size, as the PR quotes it
    assert phase_unit("total", 0.5) == "ms" and phase_unit("total", 12.0) == "s"
    slow = compare(Summary("baseline", "total", (12.0, 13.0)), Summary("optimized", "total", (0.1, 0.2)))
    assert row_unit(slow) == "s"  # from the baseline's median, not the optimized one's
    assert row_unit(compare(Summary("baseline", "total", (0.1, 0.2)), Summary("optimized", "total", (12.0, 13.0)))) == "ms"


def test_comparisons_leave_out_the_yardstick_and_one_sided_phases_and_keep_unlabelled_ones():
    """The yardstick (timed after the load) is no A/B row; a phase only one variant timed has no comparison; a
    phase without a label comes after the labelled ones, once."""
    import pandas as pd

    from omni_loader.reporting.measurements import comparisons

    rows = []
    for k in range(3):
        for i, variant in enumerate(("baseline", "optimized")):
            phases = {"my_step": 0.01 + k / 1000, "total": 1.0 + k / 10, "reference_copy": 0.5 + k / 10,
                      "construct": 0.2 + k / 100}
            if variant == "baseline":
                phases["post_load"] = 0.003
            for phase, seconds in phases.items():
                rows.append({"run_id": 2 * k + i, "variant": variant, "warmup": False, "status": "ok",
                             "source": "load", "phase": phase, "seconds": seconds, "state_dict_calls": 51 * (1 - i)})
    comps = comparisons(pd.DataFrame(rows))
    assert [c.phase for c in comps] == ["state_dict_calls", "construct", "total", "my_step"]
    assert [c.unit for c in comps] == ["calls", "s", "s", "s"]
    assert [c.baseline.median for c in comps] == pytest.approx([51, 0.21, 1.1, 0.011])
    assert [c.optimized.median for c in comps] == pytest.approx([0, 0.21, 1.1, 0.011])


YARDSTICK_TEXT = [
    "### Load parameters against a plain copy", "",
    "After each load (outside its timed phases) the same checkpoint tensors were copied once more into the same, now "
    "resident, model with a strict `load_state_dict`: what copying alone costs on this machine. The loader's step also "
    "meets the first touches that construction leaves to it: the checkpoint's newly mapped pages in every mode, and "
    "with `--construct upstream-cpu` the fused `qkv_proj` that upstream allocates with `torch.empty`; the copy meets "
    "none. The ratio is how much more the loader's step takes, first touches included.", ""]


def test_yardstick_lines_per_variant_skip_a_zero_copy_and_unrecorded_faults():
    """Both variants, baseline first. A copy timed at 0 s gives no ratio (the other runs still do); a variant
    whose fault counts were not recorded gets no fault clause; a variant without the copy gets no line."""
    import pandas as pd

    from omni_loader.reporting.report_tables import yardstick_lines

    rows = []
    runs = {"baseline": [(0.20, 0.10), (0.22, 0.10), (0.24, 0.0)], "optimized": [(0.30, 0.15), (0.32, 0.16), (0.34, 0.10)]}
    for variant, pairs in runs.items():
        for k, (ours, copy) in enumerate(pairs):
            run_id = 2 * k + (variant == "optimized")
            for phase, seconds, faults in (("load_parameters", ours, 90_000 + 1000 * k), ("reference_copy", copy, 7 + k)):
                rows.append({"run_id": run_id, "variant": variant, "warmup": False, "status": "ok", "source": "load",
                             "phase": phase, "seconds": seconds,
                             "minor_faults": None if variant == "baseline" else faults})
    frame = pd.DataFrame(rows)
    assert yardstick_lines(frame) == YARDSTICK_TEXT[:-1] + [
        "",
        # ratios 0.20 / 0.10 and 0.22 / 0.10; the third run's copy took 0 s: no ratio
        "- baseline: Load parameters 220.000 ms against strict load_state_dict (after the load) 100.000 ms in the same "
        "3 runs: 2.10× (per-run ratios 2.00–2.20×)",
        "- optimized: Load parameters 320.000 ms against strict load_state_dict (after the load) 150.000 ms in the same "
        "3 runs: 2.00× (per-run ratios 2.00–3.40×); minor page faults (first touches) 91,000 against 8",
        ""]
    # without the baseline's copy, the optimized line still comes (the baseline is skipped, not the end)
    only = yardstick_lines(frame[~((frame["variant"] == "baseline") & (frame["phase"] == "reference_copy"))])
    assert [x[:12] for x in only if x.startswith("- ")] == ["- optimized:"]
    assert only[:4] == YARDSTICK_TEXT[:4] and only[-1] == ""
    assert yardstick_lines(frame[frame["phase"] != "reference_copy"]) == []
    # fault counts not recorded at all (no column): no fault clause either
    assert yardstick_lines(frame.drop(columns="minor_faults"))[-2].endswith("(per-run ratios 2.00–3.40×)")


def test_counters_table_medians_per_phase_and_variant_of_measured_loads():
    import pandas as pd

    from omni_loader.names import LEAF_PHASES
    from omni_loader.reporting.report_tables import counters_table

    rows = []
    counts = {  # (variant, phase) -> per run: (minor, major, voluntary, involuntary)
        ("baseline", "total"): [(1000, 1, 5, None), (1200, 1, 7, None), (1100, 1, 6, None)],
        ("optimized", "total"): [(500, 0, 8, None), (700, 0, 8, None), (600, 0, 8, None)],
        ("baseline", "buffer_discovery"): [(10, 0, 2, None), (30, 0, 2, None), (20, 0, 2, None)],
        ("optimized", "buffer_discovery"): [(1, 0, 3, 4), (3, 0, 3, 4), (2, 0, 3, 4)],
    }
    for (variant, phase), runs in counts.items():
        for k, (minor, major, vol, invol) in enumerate(runs):
            rows.append({"run_id": 2 * k + (variant == "optimized"), "variant": variant, "warmup": False, "status": "ok",
                         "source": "load", "phase": phase, "seconds": 0.1, "minor_faults": minor, "major_faults": major,
                         "voluntary_switches": vol, "involuntary_switches": invol})
    noise = {"minor_faults": 10**9, "major_faults": 10**9, "voluntary_switches": 10**9, "involuntary_switches": 10**9}
    for extra in ({"source": "aa", "variant": "baseline"}, {"warmup": True}, {"status": "failed"}):
        rows.append({"run_id": 50 + len(rows), "variant": "optimized", "warmup": False, "status": "ok", "source": "load",
                     "phase": "total", "seconds": 0.1, **noise, **extra})  # none of these is a measured load
    table = counters_table(pd.DataFrame(rows))
    parsed = _md_tables("\n" + table, "\n")
    assert parsed[0] == ["Phase", "Minor faults (base.)", "Minor faults (opti.)", "Major faults (base.)",
                         "Major faults (opti.)", "Voluntary switches (base.)", "Voluntary switches (opti.)",
                         "Involuntary switches (base.)", "Involuntary switches (opti.)"]
    body = {r[0]: r[1:] for r in parsed[1:]}
    assert [r[0] for r in parsed[1:]] == [LABELS[p] for p in ("total", *LEAF_PHASES)]
    assert body["Whole Token2Wav load"] == ["1,100", "600", "1", "0", "6", "8", "—", "—"]
    assert body["Buffer discovery"] == ["20", "2", "0", "0", "2", "3", "—", "4"]
    assert body["Load parameters"] == ["—"] * 8


def test_report_states_integrity_problems_and_every_failed_run(tmp_path, no_figures):
    from omni_loader.results.rows import append_rows

    out = _write_results(tmp_path / "res", _leaf_runs({"buffer_discovery": 0.4, "load_parameters": 0.1},
                                                      {"buffer_discovery": 0.002, "load_parameters": 0.1}))
    failed = {"warmup": False, "status": "failed", "source": "load", "phase": "total", "parent": ""}
    append_rows(out, [
        {**failed, "run_id": 6, "variant": "optimized", "error": "worker killed by signal 9"},
        {**failed, "run_id": 6, "variant": "optimized", "error": "worker killed by signal 9", "phase": "construct"},
        {**failed, "run_id": 7, "variant": "baseline", "error": "out of memory"},
        # run 0's buffer discovery written twice: the run cannot be trusted
        {"run_id": 0, "variant": "baseline", "warmup": False, "status": "ok", "source": "load",
         "phase": "buffer_discovery", "parent": "total", "seconds": 0.4, "digest": "d" * 64}])
    lines = render_report(out).split("\n")
    assert lines[2].endswith("2 + 3 measured runs after 0 warm-ups per variant, order alternate; 2 runs failed "
                             "(see Verdicts); status complete; "
                             "1 duplicated run ignored.")
    assert lines[3:6] == ["", "- Integrity: 1 run has more than one row for a phase (run ids 0): two writers, or "
                              "rows copied twice; all 4 of their rows are ignored", ""]
    assert lines[6].startswith("- **Calls to state_dict()**: 51 → 0")
    # one line per failed run, each run once however many rows it left
    verdicts = _section("\n".join(lines), "## Verdicts")
    assert verdicts[-1] == "- Failed runs: 2 (run 6 optimized: worker killed by signal 9; run 7 baseline: out of memory)"
    assert "### Spread warnings" not in lines  # runs alike: no spread to warn of


def test_profiles_section_links_every_kind_of_profile_file_per_variant(tmp_path, no_figures):
    out = _write_results(tmp_path / "res", _leaf_runs({"buffer_discovery": 0.4, "load_parameters": 0.1},
                                                      {"buffer_discovery": 0.002, "load_parameters": 0.1}))
    for variant, names in (("optimized", ("stats.pstats", "tree.json", "top.csv")),
                           ("baseline", ("profile.md", "flame.svg", "log.txt", "raw.prof"))):
        (out / "profiles" / variant).mkdir(parents=True)
        for name in names:
            (out / "profiles" / variant / name).write_text("x")
    links = ("- baseline: [flame.svg](profiles/baseline/flame.svg), [profile.md](profiles/baseline/profile.md)\n"
             "- optimized: [stats.pstats](profiles/optimized/stats.pstats), "
             "[top.csv](profiles/optimized/top.csv), [tree.json](profiles/optimized/tree.json)\n\n")
    assert render_report(out).endswith("\n## Profiles\n\n" + links)
    (out / "profiles" / "profile.md").write_text("x")  # the attribution of both variants comes first
    assert render_report(out).endswith("\n## Profiles\n\nWhere the time goes, both variants: "
                                       "[profiles/profile.md](profiles/profile.md)\n\n" + links)


def _comparison(phase, baseline, optimized, unit="s"):
    from omni_loader.reporting.stats import Summary, compare

    return compare(Summary("baseline", phase, tuple(baseline)), Summary("optimized", phase, tuple(optimized)), unit)


def test_a_fast_startup_row_stays_in_seconds_in_every_cell():
    """Startup is quoted in seconds whatever its size: medians, change, spread, IQR and interval all say 's'
    even where each figure alone would be written in milliseconds."""
    from omni_loader.reporting.report_tables import headline, measurement_table

    startup = _comparison("startup_to_health", [5.0, 5.2, 5.1], [4.0, 4.1, 4.2])
    (row,) = _md_tables("\n" + measurement_table([startup]), "\n")[1:]
    assert row[:7] == ["Startup to /health", "5.100 s", "4.100 s", "1.000 s faster, 19.61%", "1.24×",
                       "5.000 s–5.200 s (IQR 0.100 s)", "4.000 s–4.200 s (IQR 0.100 s)"]
    assert row[7:] == ["0.1", row[8], SEPARATE, "ranges separate"]
    assert re.fullmatch(r"-\d\.\d{3} s … -\d\.\d{3} s", row[8]), row[8]
    assert headline([startup], {"statement": "equivalent"}, "not measured") == [
        f"- **Startup to /health**: 5.100 s → 4.100 s (1.000 s faster, 19.61%); {SEPARATE}; PR's rule: ranges separate.",
        "- **Equivalence**: equivalent.", "- **Memory**: not measured."]


def test_measurement_table_ratio_of_a_skipped_phase_and_a_single_run():
    from omni_loader.reporting.report_tables import measurement_table

    skipped = _comparison("split_buffers", [0.001, 0.002, 0.003], [0.0, 0.0, 0.0])
    single = _comparison("post_load", [0.004], [0.003])
    calls = _comparison("state_dict_calls", [219, 219], [0, 0], unit="calls")
    rows = _md_tables("\n" + measurement_table([calls, skipped, single]), "\n")[1:]
    assert rows[0][1:5] == ["219", "0", "Removed 219 calls", "—"]
    assert rows[1][1:5] == ["2.000 ms", "0.000 ms", "2.000 ms faster, 100.00%", "∞"]  # an optimized median of 0
    # one run each: no test, no interval
    assert rows[2][1:] == ["4.000 ms", "3.000 ms", "1.000 ms faster, 25.00%", "1.33×", "4.000 ms–4.000 ms (IQR 0.000 ms)",
                           "3.000 ms–3.000 ms (IQR 0.000 ms)", "—", "—", "too few runs for a test", "too few runs"]


def test_reference_table_writes_each_side_in_its_baselines_unit():
    """The PR's two figures in the unit of the PR's baseline, this run's two in the unit of this run's baseline."""
    from omni_loader.reporting.report_tables import reference_table

    reference = {"measurements": [
        {"measurement": "total", "label": "Whole load", "unit": "s", "baseline": 12.0, "optimized": 0.5},
        {"measurement": "state_dict_calls", "label": "Calls", "unit": "calls", "baseline": 219, "optimized": 0},
        {"measurement": "construct", "label": "Construction", "unit": "s", "baseline": 0.5, "optimized": 0.25},
        {"measurement": "startup_to_health", "label": "Startup", "unit": "s", "baseline": 105.0, "optimized": 104.0}]}
    comps = [_comparison("total", [11.0, 12.0, 13.0], [0.4, 0.5, 0.6]),
             _comparison("state_dict_calls", [51, 51], [0, 0], unit="calls"),
             _comparison("startup_to_health", [5.0, 5.1, 5.2], [4.0, 4.1, 4.2])]
    rows = _md_tables("\n" + reference_table(comps, reference), "\n")
    assert rows == [
        ["Measurement", "PR baseline", "PR optimized", "PR ratio", "This run baseline", "This run optimized",
         "This run ratio"],
        ["Whole load", "12.000 s", "0.500 s", "24.00×", "12.000 s", "0.500 s", "24.00×"],
        ["Calls", "219", "0", "—", "51", "0", "—"],
        ["Construction", "500.000 ms", "250.000 ms", "2.00×", "not measured", "not measured", "—"],
        # startup in seconds, however short this run's
        ["Startup", "105.000 s", "104.000 s", "1.01×", "5.100 s", "4.100 s", "1.24×"]]


def test_attribution_in_seconds_for_long_loads_and_no_share_of_a_zero_total(tmp_path):
    from omni_loader.reporting.report_tables import attribution_table

    slow = _write_results(tmp_path / "slow", _leaf_runs({"construct": 11.0, "load_parameters": 0.5},
                                                        {"construct": 3.0, "load_parameters": 0.5}))
    rows = {r[0]: r[1:] for r in _md_tables("\n" + attribution_table(read_runs(slow)), "\n")[1:]}
    # the unit of the longer whole load (11.5 s) for every cell; shares of 11.5 s and 3.5 s
    assert rows["Construction"] == ["11.000 s", "95.7%", "3.000 s", "85.7%"]
    assert rows["Load parameters"] == ["0.500 s", "4.3%", "0.500 s", "14.3%"]
    assert rows["Buffer discovery"] == ["n/a", "n/a", "n/a", "n/a"]
    zero = _write_results(tmp_path / "zero", [(v, {"construct": 0.001, "total": 0.0}, "d" * 64)
                                              for v in ("baseline", "optimized")])
    rows = {r[0]: r[1:] for r in _md_tables("\n" + attribution_table(read_runs(zero)), "\n")[1:]}
    assert rows["Construction"] == ["1.000 ms", "n/a", "1.000 ms", "n/a"]
    assert attribution_table(read_runs(tmp_path / "nowhere")) == "No loader runs in this directory."


def test_memory_table_leaves_out_a_figure_one_variant_lacks(tmp_path):
    from omni_loader.reporting.report_tables import memory_table
    from omni_loader.results.rows import append_rows

    out = tmp_path / "res"
    out.mkdir()
    append_rows(out, [{"run_id": i, "variant": v, "warmup": False, "phase": "total", "seconds": 1.0, "status": "ok",
                       "source": "load", "rss_peak_bytes": 2**30 if v == "baseline" else "", "device_peak_bytes": ""}
                      for i, v in enumerate(("baseline", "optimized"))])
    table, verdict = memory_table(read_runs(out))
    assert verdict == "not measured" and len(table.splitlines()) == 2
    both = tmp_path / "both"
    both.mkdir()
    append_rows(both, [{"run_id": i, "variant": v, "warmup": False, "phase": "total", "seconds": 1.0, "status": "ok",
                        "source": "load", "rss_peak_bytes": 2**30, "device_peak_bytes": (i + 1) * 2**30}
                       for i, v in enumerate(("baseline", "optimized"))])
    table, verdict = memory_table(read_runs(both))
    assert verdict == "Peak process RSS: unchanged (within noise); Peak device memory: changed by 100.0%"
    assert [r[0] for r in _md_tables("\n" + table, "\n")[1:]] == ["Peak process RSS", "Peak device memory"]
    assert table.splitlines()[3] == ("| Peak device memory | 1,024 MiB | 1,024 MiB–1,024 MiB | 2,048 MiB | "
                                     "2,048 MiB–2,048 MiB | changed by 100.0% |")
    assert memory_table(read_runs(tmp_path / "nothing"))[1] == "not measured"  # no runs.csv at all


def test_beyond_pr_rows_name_every_confounder_and_read_verdicts_at_the_designs_share():
    """A variant beyond the PR whose step also slows two phases it shares with the first: the rows holding them are
    marked with both, by name; a sequential design's verdicts are read at its look's error rate (4 runs a side:
    p 0.029, claimed at 0.05, not at the first look's 0.01)."""
    from omni_loader.reporting.controls import pair_reports
    from omni_loader.reporting.report_tables import beyond_pr_section
    from omni_loader.results.suite import Suite
    from test_controls import _frame

    frame = _frame(slower={"split_buffers": 0.1, "load_buffers": 0.1}, runs=4)
    frame = frame.assign(variant=frame["variant"].replace({"optimized": "slowed"}), state_dict_calls=0,
                         rss_peak_bytes="")
    slowed = {"name": "slowed", "discovery": "builtin:optimized", "parameters": "builtin:baseline", "memory": "",
              "needs_gpu": False}

    def verdicts(**design) -> dict[str, str]:
        suite = Suite({"schema_version": 3, "benchmarks": {"load": {
            "spec": {"variants": ["baseline", "slowed"], "custom_variants": [slowed]}, **design}}})
        rows = _md_tables("\n" + beyond_pr_section(frame, suite, pair_reports(frame, suite))[4], "\n")[1:]
        return {row[1]: row[-1] for row in rows}

    fixed, at_first_look = verdicts(), verdicts(sequential={"looks": [5, 10], "stopped_at": 5})
    mark = f"; **confounded** by {LABELS['split_buffers']}, {LABELS['load_buffers']} (see Controls)"
    claimed = "faster (95% CI of Δ median excludes 0, Mann-Whitney p=0.0286)"
    not_claimed = "no difference claimed: 4+4 runs cannot reach p < 0.01 (their smallest p is 0.029; 5 runs a side can)"
    assert fixed[LABELS["buffer_discovery"]] == claimed  # the changed step itself: not marked
    assert fixed[LABELS["weight_loading"]] == fixed[LABELS["total"]] == claimed + mark
    assert at_first_look[LABELS["buffer_discovery"]] == not_claimed
    assert at_first_look[LABELS["weight_loading"]] == not_claimed + mark


def _controls_frame():
    """Four runs a side: construction about 10 s in both arms (the optimized 50 ms faster), load parameters 200 ms
    slower in the optimized arm, load buffers timed in one optimized run only."""
    import pandas as pd

    rows = []
    for k in range(4):
        for i, (variant, phases) in enumerate((
                ("baseline", {"construct": 10.0 + 0.01 * k, "buffer_discovery": 1.0 + 0.01 * k,
                              "load_parameters": 0.3 + 0.001 * k, "load_buffers": 0.004 + 0.0001 * k}),
                ("optimized", {"construct": 9.95 + 0.01 * k, "buffer_discovery": 0.005 + 0.0001 * k,
                               "load_parameters": 0.5 + 0.001 * k, **({"load_buffers": 0.004} if k == 0 else {})}))):
            phases["weight_loading"] = sum(v for p, v in phases.items() if p != "construct")
            phases["total"] = phases["construct"] + phases["weight_loading"]
            rows += [{"run_id": 2 * k + i, "variant": variant, "warmup": False, "status": "ok", "source": "load",
                      "phase": p, "seconds": s} for p, s in phases.items()]
    return pd.DataFrame(rows)


def test_the_controls_table_writes_each_control_in_its_rows_unit_and_names_the_rows_it_confounds():
    """Construction's row is in seconds (its baseline median is over 10 s): the optimized median and the interval,
    under 10 s, are written in seconds too. Load parameters, 200 ms slower in a phase both run unchanged, confounds
    both rows holding it. Load buffers, with one optimized run, has no interval and no test. With an A/A floor
    wider than construction's 50 ms, its verdict is the floor's."""
    from omni_loader.reporting.controls import control_report
    from omni_loader.reporting.measurements import noise_floors
    from omni_loader.reporting.report_tables import controls_section

    frame = _controls_frame()
    claimed = "(95% CI of Δ median excludes 0, Mann-Whitney p=0.0286)"
    holding = f"{LABELS['weight_loading']}, {LABELS['total']}"
    expected = [
        ["Control", "baseline median", "optimized median", "Change", "95% CI of Δ median", "Verdict", "Inside"],
        # medians: the middle two of 10.00–10.03 s and of 9.95–9.98 s; Δ 50 ms of 10.015 s = 0.50%
        [LABELS["construct"], "10.015 s", "9.965 s", "0.050 s faster, 0.50%", "-0.070 s … -0.030 s",
         f"faster {claimed}", LABELS["total"]],
        # 301.5 -> 501.5 ms: 200 / 301.5 = 66.33%
        [LABELS["load_parameters"], "301.500 ms", "501.500 ms", "200.000 ms slower, 66.33%", "198.000 ms … 202.000 ms",
         f"slower {claimed}", f"**confounds** {holding}"],
        [LABELS["load_buffers"], "4.150 ms", "4.000 ms", "0.150 ms faster, 3.61%", "—", "too few runs for a test",
         holding],
    ]
    assert _md_tables("\n".join(controls_section([control_report(frame)])), "### `baseline` against `optimized`") == \
        expected
    floors = noise_floors(_aa_frame({"construct": ([10.0, 10.1, 10.2], [10.2, 10.3, 10.4])}))  # ±200 ms
    within = _md_tables("\n".join(controls_section([control_report(frame, floors=floors)])), "### `baseline`")
    assert within[1][5] == "within the A/A noise floor: no difference claimed" and within[2:] == expected[2:]
    rowless = frame[~frame["phase"].isin(["weight_loading", "total"])]  # no enclosing row timed: inside none
    assert [r[-1] for r in _md_tables("\n".join(controls_section([control_report(rowless)])), "### `b")[1:]] == ["—"] * 3


def test_the_controls_section_takes_each_rows_saving_apart():
    """Around each pair's table: the steps the variants differ in, and per enclosing row the saving taken apart,
    with the confounders that mark it. No step differs: 'no step', 'none'; a changed step not timed: said so."""
    from omni_loader.reporting.controls import control_report
    from omni_loader.reporting.report_tables import controls_section

    frame = _controls_frame()
    wl, total, bd, lp = (LABELS[p] for p in ("weight_loading", "total", "buffer_discovery", "load_parameters"))
    tail = "between phases (and what medians do not add up to). What the change itself bought:"
    section = controls_section([control_report(frame)])
    assert section[4:8] == ["### `baseline` against `optimized`", "", f"They differ only in {bd}.", ""]
    assert section[9:] == [
        "",
        # weight loading: 1,312.15 -> 499.25 ms; discovery 1,015 -> 5.15 ms; load parameters +200 ms, buffers -0.15 ms
        f"- {wl}: saving 812.900 ms = 1,009.850 ms in the changed step ({bd}) + −199.850 ms in 2 controls + 2.900 ms "
        f"{tail} 1,009.850 ms. **Confounded** by {lp} −200.000 ms.",
        f"- {total}: saving 864.000 ms = 1,009.850 ms in the changed step ({bd}) + −149.850 ms in 3 controls + "
        f"4.000 ms {tail} 1,009.850 ms. **Confounded** by {lp} −200.000 ms.",
        ""]

    def variant(discovery: str, parameters: str) -> dict:
        return {"name": "optimized", "discovery": discovery, "parameters": parameters, "memory": "", "needs_gpu": False}

    same = controls_section([control_report(frame, "baseline", variant("builtin:baseline", "builtin:copy"))])
    assert same[6] == "They differ only in no step."
    assert same[-3] == (f"- {wl}: saving 812.900 ms = 0.000 ms in the changed steps (none) + 810.000 ms in 3 controls + "
                        f"2.900 ms {tail} 0.000 ms. **Confounded** by {bd} 1,009.850 ms, {lp} −200.000 ms.")
    untimed = frame[frame["phase"] != "load_parameters"]
    both = controls_section([control_report(untimed, "baseline", variant("builtin:optimized", "builtin:assign"))])
    assert both[6] == f"They differ only in {bd}, {lp}."
    assert both[-3] == (f"- {wl}: saving 812.900 ms = 1,009.850 ms in the changed steps ({bd}, {lp} (not timed)) + "
                        f"0.150 ms in 1 control + −197.100 ms {tail} 1,009.850 ms.")


def test_the_controls_sentence_names_each_differing_control_in_its_rows_unit_and_the_changed_steps():
    """Each control that differs, with both medians in its row's unit (construction's 9.965 s too, as in the table),
    and the steps the saving is credited to: one, two, or none where the variants run the same steps."""
    from omni_loader.reporting.controls import control_report
    from omni_loader.reporting.measurements import noise_floors
    from omni_loader.reporting.report_tables import controls_sentence
    from test_controls import _frame

    frame = _controls_frame()
    claimed = "(95% CI of Δ median excludes 0, Mann-Whitney p=0.0286)"

    def variant(discovery: str, parameters: str) -> dict:
        return {"name": "optimized", "discovery": discovery, "parameters": parameters, "memory": "", "needs_gpu": False}

    sentence = controls_sentence(control_report(frame))
    assert sentence.startswith(
        f"2 of the 3 phases both variants run unchanged differ: {LABELS['construct']} 10.015 s → 9.965 s (faster "
        f"{claimed}); {LABELS['load_parameters']} 301.500 ms → 501.500 ms (slower {claimed}); 1 of them "
        f"({LABELS['load_parameters']}) by at least 1% of a row it is in: the rows holding it are confounded. That is "
        "the machine, not the change; ")
    assert f"in the changed step ({LABELS['buffer_discovery']}) " in sentence
    both = controls_sentence(control_report(frame, "baseline", variant("builtin:optimized", "builtin:assign")))
    assert f"in the changed step ({LABELS['buffer_discovery']}, {LABELS['load_parameters']}) " in both
    assert f"differs: {LABELS['construct']} 10.015 s → 9.965 s (faster {claimed}); by less than 1% of a row it is " \
        "in, so no row is confounded. " in both
    same = controls_sentence(control_report(frame, "baseline", variant("builtin:baseline", "builtin:copy")))
    assert "0.000 ms in the changed step (no step) " in same
    assert f"; 2 of them ({LABELS['buffer_discovery']}, {LABELS['load_parameters']}) by at least 1% of a row it is " \
        "in: the rows holding them are confounded. " in same
    one = controls_sentence(control_report(_frame(slower={"load_parameters": 0.2}, runs=4)))
    assert one.startswith(f"1 of the 10 phases both variants run unchanged differs: {LABELS['load_parameters']} "
                          f"300.900 ms → 501.500 ms (slower {claimed}); by at least 1% of a row it is in: the rows "
                          "holding it are confounded. ")
    rowless = frame[~frame["phase"].isin(["weight_loading", "total"])]  # no enclosing row: nothing to take apart
    assert controls_sentence(control_report(rowless)).endswith("so no row is confounded. That is the machine, not the "
                                                               "change.")
    clean = controls_sentence(control_report(_frame(runs=4)))  # no A/A floor to go beyond
    assert clean.startswith("none of the 10 phases both variants run unchanged differs (same statistics); ")
    small = controls_sentence(control_report(_frame(slower={"hub_check": 0.0001, "model_loaded_size": 0.0001}, runs=4)))
    assert small.startswith("2 of the 10 phases both variants run unchanged differ: ")
    assert "; none by 1% of a row it is in, so no row is confounded. " in small
    floors = noise_floors(_aa_frame({"load_parameters": ([0.300, 0.301, 0.302], [0.302, 0.303, 0.304])}))
    assert (f"{LABELS['load_parameters']} 301.500 ms → 501.500 ms (slower (95% CI of Δ median excludes 0, "
            "Mann-Whitney p=0.0286; beyond the A/A noise floor)); ") in controls_sentence(control_report(frame, floors=floors))


def test_beyond_pr_section_follows_the_recorded_variants(arms_dir):
    """The first recorded variant is the reference; the PR's pair alone has no section; a spec without custom
    variants names built-ins only."""
    from omni_loader.reporting.report_tables import beyond_pr_section
    from omni_loader.results.suite import Suite

    frame = read_runs(arms_dir)

    def section(variants):
        return beyond_pr_section(frame, Suite({"schema_version": 3, "benchmarks": {"load": {"spec": {"variants": variants}}}}))

    assert section(["optimized", "baseline"]) == [] and section(None) == []
    lines = section(["baseline", "optimized", "assign"])
    assert _md_tables("\n" + lines[4], "\n") == [BEYOND_HEADER, *BEYOND_ROWS_ASSIGN]
    assert lines[6:] == [f"- **assign**: discovery `builtin:optimized`, parameters `builtin:assign`. Memory: "
                         f"{ASSIGN_MEMORY}.", ""]
    lines = section(["optimized", "assign"])
    assert lines[2].startswith("Each other variant against `optimized`, the first of this benchmark's variants")
    rows = _md_tables("\n" + lines[4], "\n")
    assert rows[0][2] == "optimized median"
    assert rows[1] == ["assign", "Calls to state_dict()", "0", "51", "51 more calls", "—", "51–51", "deterministic count"]
    assert rows[-1] == ["assign", "Peak process RSS", "102 MiB", "155 MiB", "+53.0 MiB", "—", "150 MiB–160 MiB",
                        "changed by 52.0%"]


def test_report_quotes_a_dead_writers_directory_whole(tmp_path, no_figures):
    """The integrity line ends with the command that continues the directory: its path is quoted intact (here
    one that ends in an 'X'), and an empty profile directory is listed as such."""
    out = _write_results(tmp_path / "runX", _leaf_runs({"buffer_discovery": 0.4, "load_parameters": 0.1},
                                                       {"buffer_discovery": 0.002, "load_parameters": 0.1}))
    write_schema(out, {**RICH_RECORD, "status": "running"}, SCHEMA_VERSION)
    (out / "profiles" / "baseline").mkdir(parents=True)
    lines = render_report(out).split("\n")
    assert lines[2].endswith("order alternate; status running; its writer died.")
    assert lines[4:6] == [f"- Integrity: metadata.json says running, but no process is writing {out}: its writer was "
                          f"killed or crashed; continue with omni-loader reproduce --resume --out {out}", ""]
    assert lines[-5:] == ["## Profiles", "", "- baseline: no profile files", "", ""]


def test_rows_labelled_server_log_come_after_the_loaders_own():
    """Whatever its source, a row the report labels 'Server log: …' comes after every other row of its rank."""
    import pandas as pd

    from omni_loader.reporting.measurements import comparisons, label

    rows = []
    for k in range(2):
        for i, variant in enumerate(("baseline", "optimized")):
            for phase, source in (("server:probe", "load"), ("my_step", "load"), ("weight_loading", "server"),
                                  ("zeta", "server")):
                rows.append({"run_id": 10 * k + i, "variant": variant, "warmup": False, "status": "ok", "source": source,
                             "phase": phase, "seconds": 0.1 + k / 100, "state_dict_calls": 0})
    comps = comparisons(pd.DataFrame(rows))
    assert [c.phase for c in comps] == ["state_dict_calls", "my_step", "server:probe", "server:weight_loading",
                                        "server:zeta"]
    assert [label(c.phase) for c in comps[1:]] == ["my_step", "Server log: probe", "Server log: weight_loading",
                                                   "Server log: zeta"]


def test_which_timer_the_prs_row_is_follows_from_the_figures(tmp_path) -> None:
    """The PR's medians, to the microsecond, cannot be read off vLLM's two-decimal line; vLLM's line covers the
    outer load_weights, and the report says by how much that exceeds the PR's row in this run."""
    from omni_loader.reporting.measurements import comparisons, load_reference
    from omni_loader.reporting.timers import finer_than_vllm_line, timer_lines
    from omni_loader.results.rows import read_runs

    assert finer_than_vllm_line(1.099526) and not finer_than_vllm_line(1.10) and not finer_than_vllm_line(0.62)
    runs = _leaf_runs({"buffer_discovery": 0.5, "outer_load_weights": 1.75, "weight_loading": 1.0},
                      {"buffer_discovery": 0.01, "outer_load_weights": 1.25, "weight_loading": 0.5})
    out = _write_results(tmp_path / "r", runs)
    comps = comparisons(read_runs(out))
    said = " ".join(timer_lines(comps, load_reference()))
    assert "1099.526 ms and 620.436 ms) are finer than vLLM's `Loading weights took X seconds` line" in said
    assert "the kit's `weight_loading`" in said
    assert "This run: 1750.000 ms baseline, 1250.000 ms optimized, of which 750.000 ms and 750.000 ms are outside" in said
    rounded = {"measurements": [{"measurement": "weight_loading", "label": "Token2Wav weight loading",
                                 "baseline": 1.10, "optimized": 0.62}]}
    assert "cannot be told from its figures" in " ".join(timer_lines(comps, rounded))
    assert "### Which timer each row is" in render_report(out)


def test_the_controls_sum_writes_a_loss_as_minus_not_plus_minus() -> None:
    """01's Lab pass read "1,132.399 ms in the changed step (Buffer discovery) + −1.406 ms in controls + −9.085 ms
    between phases": a term that is a loss is subtracted ("− 1.406 ms"), a gain added, one that rounds to 0 added."""
    from types import SimpleNamespace

    from omni_loader.reporting.report_tables import controls_sentence

    row = SimpleNamespace(phase="weight_loading", saving=1.121908, changed_saving=1.132399, controls_saving=-0.001406,
                          remainder=-0.009085)
    report = SimpleNamespace(changed=["buffer_discovery"], controls=[], rows=[row], confounders=[])
    assert controls_sentence(report).endswith(
        "; Token2Wav weight loading 1,121.908 ms = 1,132.399 ms in the changed step (Buffer discovery) − 1.406 ms in "
        "controls − 9.085 ms between phases.")
    row.controls_saving, row.remainder = 0.002, -1e-7  # a gain, and a loss that rounds to 0.000 ms
    assert controls_sentence(report).endswith("(Buffer discovery) + 2.000 ms in controls + 0.000 ms between phases.")
