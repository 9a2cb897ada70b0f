"""reproduce -> runs.csv, metadata.json, report.md, plots; report re-renders from saved results."""

from __future__ import annotations

import json
import re

import pytest

from omni_loader.cli import main
from omni_loader.report import LABELS, render_report
from omni_loader.results import RUN_COLUMNS, SCHEMA_VERSION, read_runs
from omni_loader.stats import format_seconds, time_unit


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
    panel = {r["panel"] for r in shown if r["title"].startswith("total\n")}.pop()
    total = measured[measured["phase"] == "total"]
    scale = _scale(next(r["ylabel"] for r in shown if r["panel"] == panel))
    assert sorted(float(r["y"]) for r in points if r["panel"] == panel) == pytest.approx(sorted(total["seconds"] * scale))
    header = (results / "runs.csv").read_text().splitlines()[0].split(",")
    assert tuple(header) == RUN_COLUMNS
    meta = json.loads((results / "metadata.json").read_text())
    assert meta["schema_version"] == SCHEMA_VERSION
    for key in ("model", "checkpoint", "environment", "warmup", "repeats", "order", "command_line", "plan"):
        assert key in meta
    assert meta["checkpoint"]["checkpoint_source"] == "directory"


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
        assert cells[1] == format_seconds(medians[(phase, "baseline")], unit)
        assert cells[2] == format_seconds(medians[(phase, "optimized")], unit)
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
    from omni_loader.results import append_rows, write_metadata

    write_metadata(out, {"kind": "reproduce", "warmup": 0, "repeats": len(runs) // 2, "order": "alternate",
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
            if set(cells) != {"---"}:
                rows.append(cells)
        elif rows:
            break
    return rows


def _leaves(values: list[float]) -> dict[str, float]:
    from omni_loader.loader import LEAF_PHASES

    assert len(values) >= 2
    # the first values go to the first phases, the rest of the leaves get the last value
    return {p: values[min(i, len(values) - 1)] for i, p in enumerate(LEAF_PHASES)}


def test_attribution_shares_are_of_each_variants_own_total(tmp_path):
    """'Where the load time goes': a phase's share is its median over the median total of the same variant."""
    from omni_loader.loader import LEAF_PHASES

    base = _leaves([0.6, 0.2, 0.1])  # baseline total 0.6 + 0.2 + 0.1 * (k - 2)
    opt = _leaves([0.3, 0.05, 0.02])  # a different total: a share over the wrong total shows
    from omni_loader.report import attribution_table

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
    from omni_loader.report import load_reference

    base, opt = _leaves([0.8, 0.4, 0.01]), _leaves([0.2, 0.1, 0.01])
    base["buffer_discovery"], opt["buffer_discovery"] = 0.5, 0.002
    runs = _leaf_runs(base, opt)
    for _, phases, _ in runs:
        phases["weight_loading"] = 2 * phases["buffer_discovery"]
    from omni_loader.report import comparisons, reference_table

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
        assert cells[3] == f"{pr_ratio:.2f}x"
        assert cells[1] == format_seconds(ref["baseline"], time_unit(ref["baseline"]))
        assert cells[2] == format_seconds(ref["optimized"], time_unit(ref["baseline"]))
    discovery = body["Buffer discovery"]
    assert discovery[3] == "292.16x"  # 456.946 ms / 1.564 ms = 292.165..., the PR's figure
    assert discovery[4:] == ["500.000 ms", "2.000 ms", f"{0.5 / 0.002:.2f}x"]
    assert body["Token2Wav weight loading"][6] == f"{1.0 / 0.004:.2f}x"
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
    from omni_loader.loader import LEAF_PHASES
    from omni_loader.report import write_report

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


def test_each_plot_has_its_data_file_beside_it(plotted):
    names = sorted(p.name for p in (plotted / "plots").iterdir())
    assert names == sorted(f"{stem}.{ext}" for stem in ("phases", "ratios_vs_pr", "where_time_goes")
                           for ext in ("png", "svg", "csv"))
    text = (plotted / "report.md").read_text()
    assert "![phases](plots/phases.png)" in text and "![ratios_vs_pr](plots/ratios_vs_pr.png)" in text


def test_phase_plot_shows_every_run_and_the_medians(plotted):
    frame = read_runs(plotted)
    rows = _figure_rows(plotted / "plots" / "phases.csv")
    panels = {r["title"].split("\n")[0]: r["panel"] for r in rows}
    measured = frame[~frame["warmup"]]
    assert set(panels) == set(measured["phase"])
    for phase, group in measured.groupby("phase"):
        mine = [r for r in rows if r["panel"] == panels[phase]]
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
            subtitle = mine[0]["title"].split("\n")[1]
            assert f"{medians[0] / medians[1]:.0f}" in subtitle and "log scale" in subtitle, subtitle
    subtitle = next(r["title"] for r in rows if r["panel"] == panels["buffer_discovery"]).split("\n")[1]
    assert re.match(rf"{0.45 / 0.0022:.0f}\D", subtitle), subtitle  # 205 (times faster), not 1/205


def test_ratio_plot_shows_baseline_over_optimized_beside_the_prs(plotted):
    from omni_loader.report import load_reference

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
    assert labels == {"PR (MI300X, ROCm)", "this run"}
    discovery = ticks["Buffer discovery"]
    assert [float(b["value"]) for b in bars if discovery < float(b["x"]) + float(b["width"]) / 2 < discovery + 0.5
            ] == pytest.approx([0.45 / 0.0022])  # the optimized loader is ~205x faster here, not 0.005x


def test_where_time_goes_stacks_each_variants_phase_medians(plotted):
    from omni_loader.loader import LEAF_PHASES

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
    legend = [r["label"] for r in rows if r["kind"] == "bar" and r["label"]]
    assert legend == list(LEAF_PHASES)
