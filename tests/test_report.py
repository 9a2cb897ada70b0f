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


def test_reproduce_writes_the_results_layout(results):
    for name in ("runs.csv", "metadata.json", "report.md"):
        assert (results / name).is_file(), name
    pngs = sorted(p.name for p in (results / "plots").glob("*.png"))
    assert pngs == ["phases.png", "ratios_vs_pr.png", "where_time_goes.png"]
    assert all((results / "plots" / p).with_suffix(".svg").is_file() for p in pngs)
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


def test_report_command_rerenders_the_same_tables(results, capsys):
    before = (results / "report.md").read_text()
    (results / "report.md").unlink()
    assert main(["report", str(results), "--quiet"]) == 0
    assert (results / "report.md").read_text() == before
    assert render_report(results) == before


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
