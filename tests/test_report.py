"""reproduce -> runs.csv, metadata.json, report.md, plots; report re-renders from saved results."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import omni_loader.plots  # noqa: F401  (matplotlib loaded at collection: make mutation forks its workers after it)
import scipy.stats  # noqa: F401
from omni_loader.cli import main
from omni_loader.formatting import duration
from omni_loader.report import LABELS, render_report
from omni_loader.results import RUN_COLUMNS, SCHEMA_VERSION, benchmark, read_runs
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
    from omni_loader.results import append_rows, store_benchmark

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
            if set(cells) != {"---"}:
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
        assert cells[1] == duration(ref["baseline"], time_unit(ref["baseline"]))
        assert cells[2] == duration(ref["optimized"], time_unit(ref["baseline"]))
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
    from omni_loader.names import LEAF_PHASES
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
    assert names == sorted(f"{stem}.{ext}" for stem in ("phases", "ratios_vs_pr", "where_time_goes", "drift")
                           for ext in ("png", "svg", "csv"))
    text = (plotted / "report.md").read_text()
    assert "![phases](plots/phases.png)" in text and "![ratios_vs_pr](plots/ratios_vs_pr.png)" in text


def test_drift_plot_shows_each_runs_seconds_at_its_place_in_the_run_order(plotted):
    frame = read_runs(plotted)
    rows = [r for r in _figure_rows(plotted / "plots" / "drift.csv") if r["kind"] == "point"]
    for panel, phase in enumerate(("total", "weight_loading")):
        want = frame[frame["phase"] == phase]
        drawn = sorted((float(r["x"]), round(float(r["y"]), 6)) for r in rows if r["panel"] == str(panel))
        assert drawn == sorted((float(i), round(s * 1e3, 6)) for i, s in zip(want["run_id"], want["seconds"]))
        assert {r["label"] for r in rows if r["panel"] == str(panel)} == {"baseline", "optimized"}


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
    legend = [r["label"] for r in rows if r["kind"] == "bar" and r["label"]]
    assert legend == list(LEAF_PHASES)


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
    from omni_loader.results import append_rows

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
    assert ("This report measures both loader variants: 3 + 3 measured runs after 1 warm-up(s) per variant, "
            "order alternate; status complete; integrity checks found nothing wrong.") in lines[2]
    head = lines[4:lines.index("## Environment")]
    assert head[0] == "- **Calls to state_dict()**: 51 → 0 (Removed 51 calls); deterministic count."
    assert head[1] == ("- **Buffer discovery**: 450.000 ms → 2.200 ms (447.800 ms faster, 99.51%); "
                       "ranges separate but not significant at n=3+3 (p=0.1).")
    assert head[2] == (f"- **Token2Wav weight loading**: {duration(1.45, 'ms')} → {duration(1.0022, 'ms')} "
                       "(447.800 ms faster, 30.88%); "
                       "ranges separate but not significant at n=3+3 (p=0.1).")
    assert head[3] == ("- **Startup to /health**: 105.000 s → 104.000 s (1.000 s faster, 0.95%); "
                       "ranges overlap: no stable difference claimed.")
    # every successful load is hashed, warm-ups included: 8 runs
    from omni_loader.stats import equivalence

    statement = equivalence(read_runs(out))["statement"]
    assert statement.startswith(f"equivalent: all 8 runs of both variants loaded identical tensors (sha256 {'e' * 16}…")
    assert head[4] == f"- **Equivalence**: {statement}."
    assert head[5] == "- **Memory**: Peak process RSS: unchanged (within noise)."
    verdicts = _section(text, "## Verdicts")
    assert verdicts[:4] == ["- Calls to state_dict(): deterministic count",
                            "- Buffer discovery: ranges separate but not significant at n=3+3 (p=0.1)",
                            "- Token2Wav weight loading: ranges separate but not significant at n=3+3 (p=0.1)",
                            "- Startup to /health: ranges overlap: no stable difference claimed"]
    assert "- Server log: weight_loading: ranges overlap: no stable difference claimed" in verdicts
    assert "- Failed runs: 1 (run 8 optimized: worker killed by signal 9)" in verdicts
    assert "- Memory: Peak process RSS: unchanged (within noise)" in verdicts
    spread = _section(text, "### Spread warnings")
    assert "- Load parameters: baseline spread is high: IQR is 50% of the median" in spread
    assert "- Load parameters: optimized spread is high: IQR is 50% of the median" in spread


def test_report_environment_table(rich_dir):
    from omni_loader.report import environment_table
    from omni_loader.results import read_metadata

    rows = _md_tables("\n" + environment_table(read_metadata(rich_dir)), "\n")
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
    assert table["Layout / dtype"] == "vllm-omni / float32"
    assert table["Warm-ups"] == "1 per variant"
    assert table["Repeats"] == "3 per variant, order alternate, a fresh interpreter per run (imports included)"
    assert table["Command"] == "`omni-loader reproduce`"
    assert table["Started / finished"] == "T0 / T1"


def test_environment_table_without_a_gpu_or_details():
    from omni_loader.report import environment_table

    table = dict(_md_tables("\n" + environment_table({"spec": {"in_process": True}}), "\n")[1:])
    assert table["CUDA"] == "none (CPU build)" and table["Device"] == "()" and table["Memory"] == "?"
    assert table["CPU"] == "(? cores)" and table["omni-loader"] == "(no git commit)"  # cells are stripped
    assert table["Repeats"] == "None per variant, order None, in-process (later runs see a warm process)"
    assert table["Started / finished"] == "? / ?" and table["Checkpoint"] == "?:"
    cuda = dict(_md_tables("\n" + environment_table({"kind": "reproduce", "environment": {"cuda": "12.4"},
                                                       "status": "running"}), "\n")[1:])
    assert cuda["CUDA"] == "12.4" and cuda["Started / finished"] == "? / running"
    assert cuda["Repeats"].endswith(", a fresh interpreter per run (imports included)")  # schema 1: spawn


def test_report_measurement_table_cells(rich_dir):
    from omni_loader.report import comparisons, measurement_table

    rows = _md_tables("\n" + measurement_table(comparisons(read_runs(rich_dir))), "\n")
    assert rows[0] == ["Measurement", "Baseline median", "Optimized median", "Change", "Ratio", "Baseline min–max",
                       "Optimized min–max", "Mann-Whitney p", "95% CI of Δ median", "Verdict"]
    body = {r[0]: r for r in rows[1:]}
    assert [r[0] for r in rows[1:5]] == ["Calls to state_dict()", "Buffer discovery", "Token2Wav weight loading",
                                        "Startup to /health"]
    assert body["Calls to state_dict()"][1:] == ["51", "0", "Removed 51 calls", "—", "51–51", "0–0", "—", "—",
                                                 "deterministic count"]
    bd = body["Buffer discovery"]
    assert bd[1:5] == ["450.000 ms", "2.200 ms", "447.800 ms faster, 99.51%", f"{0.45 / 0.0022:.2f}x"]
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
    from omni_loader.report import memory_table

    table, verdict = memory_table(read_runs(rich_dir))
    assert verdict == "Peak process RSS: unchanged (within noise)"
    rows = _md_tables("\n" + table, "\n")
    assert rows == [["Memory", "Baseline median", "Baseline min–max", "Optimized median", "Optimized min–max",
                     "Verdict"],
                    ["Peak process RSS", "102 MiB", "100 MiB–104 MiB", "102 MiB", "101 MiB–103 MiB",
                     "unchanged (within noise)"]]


def test_memory_table_with_device_peaks_and_without_figures(tmp_path):
    from omni_loader.report import memory_table

    rows = []
    for run_id, (variant, dev) in enumerate([("baseline", 2**30), ("optimized", 2 * 2**30)]):
        rows.append({"run_id": run_id, "variant": variant, "warmup": False, "phase": "total", "seconds": 1.0,
                     "status": "ok", "source": "load", "rss_peak_bytes": "", "device_peak_bytes": dev})
    out = tmp_path / "res"
    from omni_loader.results import append_rows

    out.mkdir()
    append_rows(out, rows)
    table, verdict = memory_table(read_runs(out))
    assert verdict == "Peak device memory: changed by 100.0%"
    assert table.splitlines()[2] == "| Peak device memory | 1,024 MiB | 1,024 MiB–1,024 MiB | 2,048 MiB | 2,048 MiB–2,048 MiB | changed by 100.0% |"
    table, verdict = memory_table(read_runs(tmp_path / "nothing"))
    assert verdict == "not measured" and len(table.splitlines()) == 2


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


def test_render_report_writes_nothing_and_write_report_writes_what_it_links(rich, tmp_path):
    import shutil

    out, text = rich
    assert not (out / "plots").exists() and not (out / "report.md").exists()  # rendered, not written
    copy = Path(shutil.copytree(out, tmp_path / "copy"))
    from omni_loader.report import write_report

    path = write_report(copy)
    assert path == copy / "report.md" and path.read_text() == text
    linked = re.findall(r"!\[\w+\]\((plots/\w+\.png)\)", text)
    assert len(linked) == 4 and all((copy / p).is_file() for p in linked)
    assert sorted(p.name for p in (copy / "plots").iterdir()) == sorted(
        f"{Path(p).stem}.{ext}" for p in linked for ext in ("png", "svg", "csv"))


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
    assert table["Layout / dtype"] == "vllm-omni / float32" and table["Construction"].startswith("upstream:")
    assert table["Warm-ups"] == "1 per variant" and table["Started / finished"] == "T0 / T1"


def test_a_startup_benchmark_alone_is_described_by_its_own_record():
    from omni_loader.measurements import described_record, spec_of

    serve_ab = {"schema_version": 2, "kind": "serve-ab", "model": "M", "spec": {"runs": 4}}
    assert described_record(serve_ab)["model"] == "M" and spec_of(serve_ab) == {"runs": 4}
    both = {"schema_version": 3, "benchmarks": {"startup": {"model": "S"}, "load": {"model": "L", "spec": {
        "load": {"layout": "transformers"}, "runs": 2}}}}
    assert described_record(both)["model"] == "L" and spec_of(both) == {"runs": 2, "layout": "transformers"}
    assert described_record({"schema_version": 3, "benchmarks": {}}) == {}


def test_comparisons_order_and_labels(rich_dir):
    from omni_loader.report import comparisons, label, row_unit

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


def test_yardstick_line_quotes_per_run_ratios_and_first_touches():
    """load_parameters against the plain copy of the same run: ratios per run (ours / copy), their median
    and range, and the median minor faults of each, read from the rows."""
    import pandas as pd

    from omni_loader.report_tables import yardstick_lines

    rows = []
    for run_id, (ours, copy) in enumerate([(0.30, 0.15), (0.32, 0.16), (0.34, 0.10)]):
        for phase, seconds, faults in (("load_parameters", ours, 94_000 + run_id), ("reference_copy", copy, 1)):
            rows.append({"run_id": run_id, "variant": "optimized", "warmup": False, "status": "ok", "source": "load",
                         "phase": phase, "seconds": seconds, "minor_faults": faults})
    lines = yardstick_lines(pd.DataFrame(rows))
    (line,) = [x for x in lines if x.startswith("- ")]
    assert line.startswith("- optimized: Load parameters 320.000 ms against strict load_state_dict")
    assert "150.000 ms in the same 3 runs: 2.00x (per-run ratios 2.00–3.40x)" in line
    assert line.endswith("minor page faults (first touches) 94,001 against 1")
    no_counters = yardstick_lines(pd.DataFrame(rows).drop(columns="minor_faults"))
    assert [x for x in no_counters if x.startswith("- ")][0].endswith("2.00–3.40x)")
