"""The results directory on disk: metadata.json and runs.csv written, appended and read back."""

from __future__ import annotations

import json
import math

import pytest

from omni_loader.errors import ResultsError
from omni_loader.results import (
    METADATA_FILE,
    RUN_COLUMNS,
    RUNS_FILE,
    SCHEMA_VERSION,
    append_rows,
    read_metadata,
    read_runs,
    write_metadata,
)


def _row(run_id: int, **values) -> dict:
    return {"run_id": run_id, "variant": "baseline", "warmup": False, "order": 1, "phase": "total", "parent": "",
            "seconds": 0.5, "status": "ok", "source": "load", **values}


def test_metadata_round_trip_with_its_schema_version(tmp_path):
    out = tmp_path / "new" / "res"  # parents are made
    path = write_metadata(out, {"kind": "reproduce", "when": {"a": [1, 2]}})
    assert path == out / METADATA_FILE
    record = json.loads(path.read_text())
    assert record["kind"] == "reproduce" and record["when"] == {"a": [1, 2]}
    assert read_metadata(out) == record
    assert record["schema_version"] == SCHEMA_VERSION
    write_metadata(out, {"kind": "other"})  # replaced whole, atomically: no temporary file left
    assert read_metadata(out)["kind"] == "other" and read_metadata(out)["schema_version"] == SCHEMA_VERSION
    assert sorted(p.name for p in out.iterdir()) == [METADATA_FILE]
    assert json.loads(path.read_text()) == read_metadata(out)
    assert path.read_text().startswith('{\n  "schema_version"')  # indented, the version first


def test_metadata_values_that_json_cannot_hold_are_written_as_text(tmp_path):
    write_metadata(tmp_path, {"path": tmp_path})
    assert read_metadata(tmp_path)["path"] == str(tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "not a results directory (no metadata.json)"), ("{not json", "is not valid JSON"),
     ('{"schema_version": 99}', "schema_version 99"), ('{"kind": "x"}', "schema_version None")],
)
def test_bad_metadata_is_one_clear_error(tmp_path, content, message):
    if content is not None:
        (tmp_path / METADATA_FILE).write_text(content)
    with pytest.raises(ResultsError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        read_metadata(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_rows_are_appended_under_one_header(tmp_path):
    append_rows(tmp_path, [_row(0), _row(0, phase="construct", parent="total", seconds=0.25)])
    append_rows(tmp_path, [_row(1, variant="optimized", warmup=True, order=None, seconds=None, status="failed",
                                error="worker killed")])
    lines = (tmp_path / RUNS_FILE).read_text().splitlines()
    assert lines[0] == ",".join(RUN_COLUMNS)
    assert len(lines) == 4 and lines.count(lines[0]) == 1
    frame = read_runs(tmp_path)
    assert list(frame.columns[: len(RUN_COLUMNS)]) == list(RUN_COLUMNS)
    assert list(frame["run_id"]) == [0, 0, 1]
    assert list(frame["warmup"]) == [False, False, True] and frame["warmup"].dtype == bool
    assert frame["seconds"].iloc[:2].tolist() == [0.5, 0.25] and math.isnan(frame["seconds"].iloc[2])
    assert list(frame["status"]) == ["ok", "ok", "failed"] and frame["error"].iloc[2] == "worker killed"
    assert frame["error"].iloc[0] == "" and frame["order"].iloc[2] == ""  # None is written as an empty cell
    assert list(frame["parent"]) == ["", "total", ""]


def test_an_empty_file_gets_its_header(tmp_path):
    (tmp_path / RUNS_FILE).write_text("")
    append_rows(tmp_path, [_row(0)])
    assert (tmp_path / RUNS_FILE).read_text().splitlines()[0] == ",".join(RUN_COLUMNS)
    assert len(read_runs(tmp_path)) == 1


def test_read_runs_without_a_file_is_an_empty_frame_with_the_columns(tmp_path):
    frame = read_runs(tmp_path)
    assert frame.empty and list(frame.columns) == list(RUN_COLUMNS)


def test_read_runs_names_missing_columns(tmp_path):
    (tmp_path / RUNS_FILE).write_text("run_id,variant\n0,baseline\n")
    with pytest.raises(ResultsError, match="lacks columns") as err:
        read_runs(tmp_path)
    assert "'phase'" in str(err.value) and "'run_id'" not in str(err.value)


def test_text_columns_keep_empty_cells_and_na_like_words(tmp_path):
    append_rows(tmp_path, [_row(0, digest="", error="NA", variant="None")])
    frame = read_runs(tmp_path)
    assert frame["digest"].iloc[0] == "" and frame["error"].iloc[0] == "NA" and frame["variant"].iloc[0] == "None"
    assert frame["warmup"].iloc[0] is False or frame["warmup"].iloc[0] == False  # noqa: E712
