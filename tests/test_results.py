"""The results directory on disk: metadata.json and runs.csv written, appended and read back."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from omni_loader.errors import ResultsError
from omni_loader.results.suite import METADATA_FILE, SCHEMA_VERSION, read_metadata, write_metadata
from omni_loader.results.rows import RUN_COLUMNS, RUNS_FILE, append_rows, read_runs

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)


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


def test_the_columns_are_pinned():
    """runs.csv's columns, in order: changing them means a new schema version (and readers of the old one)."""
    from dataclasses import fields

    from omni_loader.results.rows import RunRow

    assert RUN_COLUMNS == (
        "run_id", "variant", "warmup", "order", "phase", "parent", "seconds", "status", "error", "state_dict_calls",
        "weights_loaded", "persistent_buffers", "digest", "rss_peak_bytes", "device_peak_bytes", "source",
        "minor_faults", "major_faults", "voluntary_switches", "involuntary_switches", "read_bytes",
        "checkpoint_resident", "run_started", "run_ended")
    assert tuple(f.name for f in fields(RunRow)) == RUN_COLUMNS


def test_a_run_row_takes_its_run_from_the_plan(tmp_path):
    from omni_loader.results.planner import PlannedRun
    from omni_loader.results.rows import RunRow, failed_row

    run = PlannedRun(7, "optimized", False, 3, "aa")
    row = RunRow.of(run, "total", seconds=0.5)
    assert (row.run_id, row.variant, row.warmup, row.order, row.source) == (7, "optimized", False, 3, "aa")
    failed = failed_row(run, "Traceback (most recent call last):\n  ...\nValueError: bad shard\n", 1.5)
    assert (failed.phase, failed.status, failed.error, failed.seconds) == ("total", "failed", "ValueError: bad shard", 1.5)
    assert failed_row(run, "  ").error == "failed"
    assert (failed.run_started, failed.run_ended) == ("", "")  # no stamps unless given
    stamped = failed_row(run, "x", started="2026-11-30T04:00:00", ended="2026-11-30T04:00:07")
    assert (stamped.run_started, stamped.run_ended) == ("2026-11-30T04:00:00", "2026-11-30T04:00:07")
    assert failed_row(run, "y" * 400).error == "y" * 300  # one line of at most 300 characters
    append_rows(tmp_path, [row, failed])  # RunRow values and dicts alike
    frame = read_runs(tmp_path)
    assert list(frame["source"]) == ["aa", "aa"] and list(frame["order"]) == [3, 3]
    assert list(frame["digest"]) == ["", ""] and frame["minor_faults"].isna().all()  # None is an empty cell


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
    assert str(err.value).startswith(f"{tmp_path / RUNS_FILE} lacks columns")  # names the file


def test_text_columns_keep_empty_cells_and_na_like_words(tmp_path):
    append_rows(tmp_path, [_row(0, digest="", error="NA", variant="None")])
    frame = read_runs(tmp_path)
    assert frame["digest"].iloc[0] == "" and frame["error"].iloc[0] == "NA" and frame["variant"].iloc[0] == "None"
    assert frame["warmup"].iloc[0] is False or frame["warmup"].iloc[0] == False  # noqa: E712


# --------------------------------------------------------------------------- integrity (check_results)


def _plan(n: int) -> list[dict]:
    return [{"run_id": i, "variant": ("baseline", "optimized")[i % 2], "warmup": False, "order": i // 2 + 1,
             "source": "load"} for i in range(n)]


def _run_rows(run_id: int, phases=("total", "construct")) -> list[dict]:
    plan = _plan(run_id + 1)[run_id]
    return [_row(run_id, variant=plan["variant"], order=plan["order"], phase=p, parent="" if p == "total" else "total")
            for p in phases]


def _results(tmp_path, n: int = 4, status: str = "complete"):
    write_metadata(tmp_path, {"kind": "reproduce", "plan": _plan(n), "status": status})
    append_rows(tmp_path, [row for i in range(n) for row in _run_rows(i)])
    return tmp_path


def test_check_results_of_a_clean_directory(tmp_path):
    from omni_loader.results.integrity import check_results

    check = check_results(_results(tmp_path))
    assert check.ok and check.problems == [] and check.summary == "" and check.rejected_lines == ()
    assert check.directory == tmp_path and check.suite.raw["kind"] == "reproduce"
    assert list(check.frame.columns) == list(RUN_COLUMNS) and len(check.frame) == 8
    assert check.frame.equals(read_runs(tmp_path))


def test_a_results_object_is_read_once_and_stands_for_its_directory(tmp_path):
    """Results.read checks a directory once and hands the object on as it is; it goes where a path goes and finds
    the report's plots by name, in the order asked, those that exist."""
    import os

    from omni_loader.results.integrity import Results

    check = Results.read(_results(tmp_path, n=2))
    assert Results.read(check) is check
    assert os.fspath(check) == str(tmp_path) and check / "runs.csv" == tmp_path / "runs.csv"
    assert check.load["kind"] == "reproduce" and check.load.settings == {}
    (tmp_path / "plots").mkdir()
    for name in ("drift", "phases"):
        (tmp_path / "plots" / f"{name}.png").write_bytes(b"png")
    assert check.plots(["phases", "where_time_goes", "drift"]) == [tmp_path / "plots" / "phases.png",
                                                                   tmp_path / "plots" / "drift.png"]


def test_check_results_leaves_out_a_duplicated_run_and_a_torn_last_line(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path)
    append_rows(out, _run_rows(2))  # run 2 again: two writers
    with (out / RUNS_FILE).open("a") as fh:
        fh.write("2,baseline,False,2,tot")  # the second writer's crash mid-line
    check = check_results(out)
    assert not check.ok
    assert check.summary == "1 torn row ignored; 1 duplicated run ignored; 1 planned run missing"
    assert "line 12" in check.problems[0] and "run ids 2" in check.problems[1] and "all 4 of their rows" in check.problems[1]
    assert sorted(set(check.frame["run_id"])) == [0, 1, 3] and len(check.frame) == 6
    assert check.missing_runs == (2,) and check.rejected_lines == (6, 7, 10, 11, 12)


def test_check_results_rows_off_the_plan_newer_schema_and_incomplete_runs(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=4)
    append_rows(out, [_row(9, phase="total")])  # a run id the plan does not have
    append_rows(out, [_row(3, phase="extra", variant="baseline")])  # run 3 is planned as optimized
    with (out / RUNS_FILE).open("a") as fh:
        fh.write(",".join(["5"] * (len(RUN_COLUMNS) + 2)) + "\r\n")  # more fields than the header
    lines = (out / RUNS_FILE).read_text().splitlines(keepends=True)
    (out / RUNS_FILE).write_text("".join(line for line in lines  # run 1 loses its construct row
                                         if not (line.startswith("1,") and ",construct," in line)))
    check = check_results(out)
    assert "1 row of a newer schema ignored" in check.findings
    assert "2 rows off the plan ignored" in check.findings
    assert "1 incomplete run ignored" in check.findings and "run ids 1" in " ".join(check.problems)
    assert sorted(set(check.frame["run_id"])) == [0, 2, 3] and len(check.frame) == 6
    assert check.missing_runs == (1,)


def test_check_results_says_an_interrupted_directory_can_be_resumed(tmp_path):
    from omni_loader.results.integrity import check_results, resume_command

    out = _results(tmp_path, n=2)
    write_metadata(out, {"kind": "reproduce", "plan": _plan(4), "status": "interrupted"})
    check = check_results(out)
    assert check.problems == [f"2 of 4 planned runs have no usable rows: 2, 3 (status interrupted: continue with "
                              f"omni-loader reproduce --resume --out {out})"]
    write_metadata(out, {"kind": "reproduce", "plan": _plan(4), "status": "running"})  # nobody holds the lock
    assert check_results(out).findings[-1] == "its writer died"
    # a startup benchmark alone is continued by serve-ab, whose command the finding names
    write_metadata(out, {"benchmarks": {"startup": {"kind": "serve-ab", "plan": _plan(6)[4:], "status": "interrupted"}}})
    assert check_results(out).problems[-1].endswith(f"(status interrupted: continue with omni-loader serve-ab "
                                                    f"--resume --out {out})")
    assert resume_command(out) == f"omni-loader reproduce --resume --out {out}"  # no suite read: reproduce's


def test_check_results_refuses_what_it_cannot_read(tmp_path):
    from omni_loader.results.integrity import check_results

    with pytest.raises(ResultsError, match="no metadata.json"):
        check_results(tmp_path)
    (tmp_path / METADATA_FILE).write_text('{"schema_version": 4}')
    with pytest.raises(ResultsError, match="schema_version 4.*upgrade omni-loader"):
        check_results(tmp_path)


def test_writer_lock_refuses_a_second_writer_and_names_the_holder(tmp_path):
    import fcntl
    import os

    from omni_loader.results.lock import LOCK_FILE, lock_holder, writer_lock

    with writer_lock(tmp_path), writer_lock(tmp_path):  # re-entrant in one process
        holder = lock_holder(tmp_path)
        assert holder["pid"] == os.getpid() and holder["alive"] is True
    assert lock_holder(tmp_path) is None  # released: the record is emptied
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)  # another open file: as another process would hold it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, json.dumps({"pid": 1, "host": "elsewhere", "command": "omni-loader reproduce",
                                 "since": "then"}).encode())
        with pytest.raises(ResultsError) as err, writer_lock(tmp_path):
            pass
        assert str(err.value).startswith(f"{tmp_path} is being written by process 1 on elsewhere "
                                         "(omni-loader reproduce, since then); one writer per results directory")
    finally:
        os.close(fd)
    with writer_lock(tmp_path):  # the OS dropped the lock with the descriptor
        pass


@pytest.mark.subprocess
def test_deleting_writer_lock_does_not_let_a_second_writer_in(tmp_path):
    """The directory itself is locked: a writer.lock removed while a benchmark runs (a user's cleanup, a
    sync tool) leaves the first writer's lock in place, and a second writer is still refused."""
    import os

    from omni_loader.results.lock import LOCK_FILE, writer_lock

    probe = ("import sys, time; from omni_loader.results.lock import writer_lock\n"
             "with writer_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)")
    first = subprocess.Popen([sys.executable, "-c", probe, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        os.unlink(tmp_path / LOCK_FILE)
        with pytest.raises(ResultsError, match=r"is being written by another process; one writer"), \
                writer_lock(tmp_path):
            pass
    finally:
        first.kill()
        first.wait()
    with writer_lock(tmp_path):  # the first writer's death released the directory
        pass


def test_set_aside_moves_rejected_rows_and_keeps_the_rest(tmp_path):
    from omni_loader.results.rows import REJECTED_FILE
    from omni_loader.results.integrity import check_results, set_aside_rejected

    out = _results(tmp_path)
    append_rows(out, _run_rows(1))
    with (out / RUNS_FILE).open("a") as fh:
        fh.write("1,optimized")
    before = check_results(out)
    assert set_aside_rejected(before) == 5
    after = check_results(out)
    assert after.rejected_lines == () and after.frame.equals(before.frame)
    rejected = (out / REJECTED_FILE).read_text().splitlines()
    assert rejected[0] == ",".join(RUN_COLUMNS) and len(rejected) == 6
    # the rows moved are the rejected ones, as they were: run 1 twice (duplicated) and the torn line
    assert [r.split(",")[:5] for r in rejected[1:5]] == [["1", "optimized", "False", "1", p] for p in
                                                          ("total", "construct", "total", "construct")]
    assert rejected[5] == "1,optimized"
    assert set_aside_rejected(after) == 0 and len((out / REJECTED_FILE).read_text().splitlines()) == 6
    append_rows(out, _run_rows(1))  # the run again: now once
    assert check_results(out).ok
    with (out / RUNS_FILE).open("a") as fh:  # a second resume's torn line: set aside after the first's, not over it
        fh.write("2,baseline")
    moved = set_aside_rejected(check_results(out))  # the torn line, and run 2's rows it left incomplete
    assert (out / REJECTED_FILE).read_text().splitlines()[:6] == rejected and moved > 0
    assert (out / REJECTED_FILE).read_text().splitlines()[-1] == "2,baseline" and len(
        (out / REJECTED_FILE).read_text().splitlines()) == 6 + moved


def test_a_run_whose_last_row_was_cut_short_is_left_out_whole(tmp_path):
    from omni_loader.results.integrity import check_results, set_aside_rejected

    out = _results(tmp_path, n=4)
    rows = (out / RUNS_FILE).read_bytes().decode()
    (out / RUNS_FILE).write_bytes((rows[: rows.rindex("\r\n3,") + 2] + "3,optimized,False,2,con").encode())  # torn
    check = check_results(out)
    assert check.findings == ["1 torn row ignored", "1 incomplete run ignored", "1 planned run missing"]
    assert sorted(set(check.frame["run_id"])) == [0, 1, 2] and check.rejected_lines == (8, 9)
    append_rows(out, _run_rows(3))  # a writer that did not set the torn line aside first: the line stays apart
    check = check_results(out)
    assert check.findings == ["1 malformed row ignored", "1 duplicated run ignored", "1 planned run missing"]
    assert set_aside_rejected(check) == 4 and check_results(out).missing_runs == (3,)


# --------------------------------------------------------------------------- the suite (schema 3)


def _record(kind: str, plan: list[dict], status: str = "complete", **extra) -> dict:
    return {"kind": kind, "spec": {"x": 1}, "plan": plan, "status": status, **extra}


def _startup_plan(first: int, n: int = 2) -> list[dict]:
    return [{"run_id": first + i, "variant": ("baseline", "optimized")[i % 2], "warmup": False,
             "order": i // 2 + 1, "source": "server"} for i in range(n)]


def test_the_schema_3_file_is_pinned(tmp_path):
    """A results directory's metadata.json: the version, then its benchmarks by name, each its own record."""
    from omni_loader.results.suite import store_benchmark

    load = _record("reproduce", _plan(2))
    store_benchmark(tmp_path, "load", load)
    startup = _record("serve-ab", _startup_plan(2), status="running")
    store_benchmark(tmp_path, "startup", startup)  # the load benchmark is kept
    assert SCHEMA_VERSION == 3
    assert json.loads((tmp_path / METADATA_FILE).read_text()) == {
        "schema_version": 3, "benchmarks": {"load": load, "startup": startup}}
    store_benchmark(tmp_path, "startup", {**startup, "status": "complete"})  # replaced, in place
    assert list(read_metadata(tmp_path)["benchmarks"]) == ["load", "startup"]
    assert read_metadata(tmp_path)["benchmarks"]["startup"]["status"] == "complete"
    with pytest.raises(ValueError, match="load, startup"):
        store_benchmark(tmp_path, "throughput", load)


def test_every_schema_is_read_as_named_benchmarks(tmp_path):
    from omni_loader.results.suite import benchmark, benchmarks, store_benchmark

    load, startup = _record("reproduce", _plan(2)), _record("serve-ab", _startup_plan(2))
    schema_2 = {"schema_version": 2, **load, "serve_ab": startup}  # reproduce --with-startup before the suite
    assert benchmarks(schema_2) == {"load": load, "startup": startup}
    assert benchmarks({"schema_version": 2, **startup}) == {"startup": startup}  # serve-ab on its own
    assert benchmarks({"schema_version": 1, **load}) == {"load": load}
    assert benchmarks({"schema_version": 3, "benchmarks": {"startup": startup}}) == {"startup": startup}
    assert benchmark(schema_2, "startup") == startup and benchmark({"schema_version": 2, **load}, "startup") is None
    assert benchmarks({"schema_version": 2}) == {}
    (tmp_path / METADATA_FILE).write_text(json.dumps(schema_2))
    store_benchmark(tmp_path, "startup", {**startup, "status": "interrupted"})  # an old file is rewritten as schema 3
    assert read_metadata(tmp_path) == {"schema_version": 3, "benchmarks": {
        "load": load, "startup": {**startup, "status": "interrupted"}}}


def test_the_load_options_of_either_spec_shape():
    from dataclasses import asdict

    from omni_loader.results.suite import Record
    from omni_loader.token2wav.options import LoadOptions

    # every field LoadOptions has, each away from its default, as a benchmark of today records them
    options = asdict(LoadOptions(layout="transformers", device="cpu", dtype="bfloat16", construct="empty", read="eager",
                                 cache="cold"))
    assert options != asdict(LoadOptions()) and all(v != getattr(LoadOptions(), k) for k, v in options.items())
    nested = Record({"spec": {"checkpoint": "/c", "runs": 3, "load": options}})
    flat = Record({"spec": {"checkpoint": "/c", "layout": "transformers", "device": "cpu", "dtype": "float32",
                            "runs": 3}})
    assert nested.load_options == options
    assert nested.settings == {"checkpoint": "/c", "runs": 3, **options}  # what the report's tables read
    assert flat.load_options == {"layout": "transformers", "device": "cpu", "dtype": "float32"}


def test_a_record_is_started_and_moved_on_by_its_own_methods():
    from omni_loader.results.planner import PlannedRun
    from omni_loader.results.suite import Record

    record = Record.start("serve-ab", {"runs": 1}, [PlannedRun(0, "baseline", False, 1, "server")], "cpu",
                              warmup=0, repeats=1, order="alternate", model=None, checkpoint={"checkpoint_dir": "/c"})
    assert record["status"] == "running" and record["plan"] == [
        {"run_id": 0, "variant": "baseline", "warmup": False, "order": 1, "source": "server"}]
    for key in ("kind", "spec", "plan", "environment", "command_line", "started_at", "warmup", "repeats", "order",
                "model", "checkpoint"):
        assert key in record, key
    done = record.with_status("complete", runs_ok=1)
    assert done["status"] == "complete" and done["finished_at"] and done["runs_ok"] == 1
    assert record["status"] == "running" and "finished_at" not in record  # a new record: this one is as it was
    stopped = record.with_status("interrupted")
    assert stopped["interrupted_at"] and "finished_at" not in stopped
    again = stopped.resumed().resumed(3, ["1 torn row ignored"])
    assert again["status"] == "running" and len(again["resumed_at"]) == 2
    assert [(r["rows"], r["file"], r["why"]) for r in again["repairs"]] == [(3, "runs.rejected.csv",
                                                                             ["1 torn row ignored"])]


def test_check_results_reads_every_benchmark_of_a_suite(tmp_path):
    from omni_loader.results.integrity import check_results, resume_command
    from omni_loader.results.suite import Suite
    from omni_loader.results.suite import store_benchmark

    store_benchmark(tmp_path, "load", _record("reproduce", _plan(2)))
    store_benchmark(tmp_path, "startup", _record("serve-ab", [{k: v for k, v in e.items() if k != "source"}
                                                              for e in _startup_plan(2, n=4)], status="interrupted"))
    assert {i: e["source"] for i, e in Suite.read(tmp_path).plan.items()} == {
        0: "load", 1: "load", 2: "server", 3: "server", 4: "server", 5: "server"}  # serve-ab's default source
    append_rows(tmp_path, [row for i in range(2) for row in _run_rows(i)])
    append_rows(tmp_path, [_row(e["run_id"], variant=e["variant"], order=e["order"], phase="startup_to_health",
                                source="server") for e in _startup_plan(2)])
    append_rows(tmp_path, [_row(9, phase="startup_to_health", source="server")])  # on no plan of either
    check = check_results(tmp_path)
    assert check.findings == ["1 row off the plan ignored", "2 planned runs missing"]
    assert check.missing_runs == (4, 5) and sorted(set(check.frame["run_id"])) == [0, 1, 2, 3]
    assert f"(status interrupted: continue with omni-loader reproduce --resume --out {tmp_path})" in check.problems[1]
    assert check.benchmark("startup")["status"] == "interrupted" and check.benchmark("load")["kind"] == "reproduce"
    store_benchmark(tmp_path, "startup", _record("serve-ab", _startup_plan(2, n=4), status="running"))
    assert check_results(tmp_path).findings[-1] == "its writer died"  # a member still running, nobody writing
    alone = {"schema_version": 3, "benchmarks": {"startup": _record("serve-ab", [])}}
    assert resume_command(tmp_path, Suite(alone)) == f"omni-loader serve-ab --resume --out {tmp_path}"


def test_resume_benchmark_sets_bad_rows_aside_and_names_the_runs_done(tmp_path):
    from omni_loader.results.rows import REJECTED_FILE
    from omni_loader.results.integrity import check_results, resume_benchmark
    from omni_loader.results.suite import store_benchmark

    store_benchmark(tmp_path, "load", _record("reproduce", _plan(4), status="interrupted"))
    append_rows(tmp_path, [row for i in range(3) for row in _run_rows(i)])
    with (tmp_path / RUNS_FILE).open("a") as fh:
        fh.write("3,optimized,False,2,tot")  # torn
    resumption = resume_benchmark(tmp_path, "load")
    assert resumption.done == {0, 1, 2} and resumption.record["status"] == "running"
    assert resumption.record["repairs"][0]["rows"] == 1 and (tmp_path / REJECTED_FILE).is_file()
    assert resumption.record["repairs"][0]["why"] == ["1 torn row ignored"]
    assert resumption.check.directory == tmp_path and resumption.check.rejected_lines == (8,)
    assert check_results(tmp_path).rejected_lines == ()
    with pytest.raises(ResultsError, match="holds no startup benchmark"):
        resume_benchmark(tmp_path, "startup")


def test_rows_for_run_writes_one_row_per_phase_with_the_runs_counts():
    """A worker's result becomes one row per phase record: the phase's own seconds, parent and counters,
    and the run's counts, digest, memory and stamps on every row."""
    from omni_loader.results.planner import PlannedRun
    from omni_loader.results.rows import rows_for_run

    result = {"state_dict_calls": 219, "weights_loaded": 960, "persistent_buffers": ["a", "b", "c"],
              "digest": "xxh3-128:ab", "rss_peak_bytes": 2**31, "device_peak_bytes": 3 * 2**30,
              "checkpoint_residency": {"resident": 0.75, "bytes": 3 * 2**20},
              "phase_records": [
                  {"name": "total", "parent": None, "seconds": 1.5, "minor_faults": 10, "major_faults": 0,
                   "voluntary_switches": 2, "involuntary_switches": 3},
                  {"name": "construct", "parent": "total", "seconds": 0.5, "minor_faults": 7},
              ]}
    run = PlannedRun(4, "baseline", False, 2, "load")
    total, construct = rows_for_run(run, result, started="s0", ended="e0")
    assert (total.run_id, total.variant, total.order, total.phase, total.parent, total.seconds) == (
        4, "baseline", 2, "total", "", 1.5)
    assert (construct.phase, construct.parent, construct.seconds) == ("construct", "total", 0.5)
    for row in (total, construct):
        assert (row.state_dict_calls, row.weights_loaded, row.persistent_buffers, row.digest) == (
            219, 960, 3, "xxh3-128:ab")
        assert (row.rss_peak_bytes, row.device_peak_bytes, row.source, row.status) == (2**31, 3 * 2**30, "load", "ok")
        assert (row.run_started, row.run_ended, row.checkpoint_resident) == ("s0", "e0", 0.75)
    assert (total.minor_faults, total.major_faults, total.voluntary_switches, total.involuntary_switches) == (
        10, 0, 2, 3)
    assert (construct.minor_faults, construct.major_faults, construct.involuntary_switches) == (7, None, None)
    unstamped = rows_for_run(run, {**result, "digest": None, "checkpoint_residency": None}, source="aa")
    assert {(r.source, r.digest, r.run_started, r.run_ended, r.checkpoint_resident) for r in unstamped} == {
        ("aa", "", "", "", None)}



def test_write_metadata_puts_its_own_schema_version_first(tmp_path):
    """A record read from an older file (its own schema_version) is written under this kit's version."""
    write_metadata(tmp_path, {"benchmarks": {}, "schema_version": 1})
    record = json.loads((tmp_path / METADATA_FILE).read_text())
    assert list(record) == ["schema_version", "benchmarks"] and record["schema_version"] == SCHEMA_VERSION


def test_status_stamps_and_resumed_repairs_accumulate():
    from omni_loader.results.suite import Record

    running = Record({"kind": "reproduce"}).with_status("running")
    assert set(running) == {"kind", "status"}  # running has no stamp of its own
    done = running.with_status("complete", note="x")
    assert set(done) == {"kind", "status", "note", "finished_at"}
    once = done.resumed(2, ["1 torn row ignored"])
    twice = once.resumed(1, ("1 duplicated run ignored",))
    assert [r["rows"] for r in twice["repairs"]] == [2, 1] and len(twice["resumed_at"]) == 2
    assert [r["why"] for r in twice["repairs"]] == [["1 torn row ignored"], ["1 duplicated run ignored"]]
    assert all(set(r) == {"at", "rows", "file", "why"} and r["file"] == "runs.rejected.csv" for r in twice["repairs"])
    assert "repairs" not in done.resumed()  # nothing set aside: no repair noted


def test_benchmark_record_keeps_the_spec_as_plain_data():
    from dataclasses import dataclass

    from omni_loader.results.suite import Record

    @dataclass(frozen=True)
    class Spec:
        runs: int
        order: str

    record = Record.start("reproduce", Spec(10, "alternate"), [], "cpu", warmup=1, repeats=10, order="alternate",
                          model="synthetic")
    assert record["spec"] == {"runs": 10, "order": "alternate"} and record["status"] == "running"


def test_suite_status_is_the_first_unfinished_benchmark():
    from omni_loader.results.suite import Suite

    def suite(*statuses):
        names = ("load", "startup")
        return Suite({"schema_version": 3, "benchmarks": {n: {"status": s} for n, s in zip(names, statuses)}})

    assert suite("complete", "complete").status == "complete"
    assert suite("complete", "interrupted").status == "interrupted"
    assert suite().status is None


def test_run_id_lists_are_cut_after_twelve():
    from omni_loader.results.row_checks import run_ids_text

    assert run_ids_text(range(12)) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11"
    assert run_ids_text([13, *range(12)]) == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 1 more"
    assert run_ids_text(range(20), most=3) == "0, 1, 2 and 17 more"


def test_a_torn_line_cut_inside_a_character_is_set_aside_whole(tmp_path):
    """A crash can cut a row inside a multi-byte UTF-8 character: the line is still read (the broken
    byte replaced) and moved aside, not a UnicodeDecodeError at --resume."""
    from omni_loader.results.rows import REJECTED_FILE
    from omni_loader.results.integrity import check_results, set_aside_rejected

    out = _results(tmp_path)
    with (out / RUNS_FILE).open("ab") as fh:
        fh.write("4,baseline,False,3,total,,0.5,failed,caf\u00e9".encode()[:-1])  # é cut after its first byte
    check = check_results(out)
    assert check.rejected_lines == (10,)
    assert set_aside_rejected(check) == 1
    assert (out / REJECTED_FILE).read_text().splitlines()[1] == "4,baseline,False,3,total,,0.5,failed,caf\ufffd"
    assert check_results(out).ok


def test_a_running_benchmark_whose_writer_holds_the_lock_is_still_being_written(tmp_path):
    """status running + a live lock holder: 'still being written', naming the holder; without one, 'its writer died'."""
    import os

    from omni_loader.results.integrity import check_results
    from omni_loader.results.lock import writer_lock

    out = _results(tmp_path, n=2, status="running")
    with writer_lock(out):
        check = check_results(out)
        assert check.findings[-1] == "still being written"
        assert check.problems[-1].startswith(f"{out} is being written now by process {os.getpid()} on ")
        assert check.problems[-1].endswith(": more runs are to come")
    died = check_results(out)
    assert died.findings[-1] == "its writer died"
    assert died.problems[-1].endswith(f"continue with omni-loader reproduce --resume --out {out}")


def test_a_dead_writer_of_a_serve_ab_directory_is_continued_by_serve_ab(tmp_path):
    from omni_loader.results.integrity import check_results
    from omni_loader.results.suite import store_benchmark

    store_benchmark(tmp_path, "startup", _record("serve-ab", _startup_plan(0), status="running"))
    said = check_results(tmp_path).problems[-1]
    assert said.endswith(f"continue with omni-loader serve-ab --resume --out {tmp_path}")


def test_rows_set_aside_by_a_resume_are_noted_by_their_count(tmp_path):
    from omni_loader.results.integrity import check_results

    _results(tmp_path)
    record = json.loads((tmp_path / METADATA_FILE).read_text())
    record["repairs"] = [{"rows": 3}, {}]  # the second, hand-edited, says no count
    (tmp_path / METADATA_FILE).write_text(json.dumps(record))
    assert check_results(tmp_path).notes == ("3 rows set aside by --resume (runs.rejected.csv)",
                                             "0 rows set aside by --resume (runs.rejected.csv)")


# --------------------------------------------------------------------------- how runs.csv's lines are read


def _lines_after(out, *extra: str, header: str | None = None):
    """runs.csv of ``out`` with ``extra`` raw lines (each ended with \\r\\n unless it is the last and ends in '|')."""
    path = out / RUNS_FILE
    text = path.read_bytes().decode()
    if header is not None:
        text = header + text[text.index("\r\n"):]
    for line in extra:
        text += line[:-1] if line.endswith("|") else line + "\r\n"
    path.write_bytes(text.encode())
    return out


def test_an_absent_or_empty_or_header_only_runs_file_rejects_nothing(tmp_path):
    from omni_loader.results.integrity import check_results

    for name, content in (("absent", None), ("empty", ""), ("header", ",".join(RUN_COLUMNS) + "\r\n")):
        out = tmp_path / name
        write_metadata(out, {"kind": "reproduce", "plan": _plan(2), "status": "interrupted"})
        if content is not None:
            (out / RUNS_FILE).write_text(content)
        check = check_results(out)
        assert check.rejected_lines == () and len(check.frame) == 0, name
        assert list(check.frame.columns) == list(RUN_COLUMNS) and check.missing_runs == (0, 1), name


def test_columns_a_newer_version_added_are_named_and_ignored(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=2)
    lines = (out / RUNS_FILE).read_bytes().decode().split("\r\n")
    widened = [lines[0] + ",gpu_temp,fan"] + [line + ",71,on" for line in lines[1:-1]] + [""]
    (out / RUNS_FILE).write_bytes("\r\n".join(widened).encode())
    check = check_results(out)
    assert check.findings == ["2 unknown columns ignored"]
    assert check.problems == ["runs.csv has columns this omni-loader does not know (gpu_temp, fan): written by a "
                              "newer version? they are ignored"]
    assert len(check.frame) == 4 and "gpu_temp" not in check.frame


def test_a_runs_file_without_the_core_columns_is_refused_in_one_line(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _lines_after(_results(tmp_path, n=2), header=",".join(c for c in RUN_COLUMNS if c != "phase"))
    with pytest.raises(ResultsError) as err:
        check_results(out)
    assert str(err.value) == (f"{out / RUNS_FILE} lacks columns ['phase']; it was not written by omni-loader (or its "
                              "header is damaged): restore it from a copy")


def test_a_last_line_cut_inside_its_last_field_is_torn(tmp_path):
    """A crash can cut the last line after its last comma: every field is there, the line has no end."""
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=3)
    write_metadata(out, {"kind": "reproduce", "plan": _plan(4), "status": "complete"})
    append_rows(out, [{**row, "run_ended": "2026-11-30T05:00:00"} for row in _run_rows(3)])
    text = (out / RUNS_FILE).read_bytes().decode()
    assert text.endswith(",2026-11-30T05:00:00\r\n")
    (out / RUNS_FILE).write_bytes(text[: -len("\r\n") - 2].encode())  # run 3's last row loses the end of its last field
    check = check_results(out)
    assert check.findings == ["1 torn row ignored", "1 incomplete run ignored", "1 planned run missing"]
    assert check.missing_runs == (3,) and sorted(set(check.frame["run_id"])) == [0, 1, 2]
    assert check.problems[0] == ("the last line of runs.csv (line 9) is torn, cut short by a crash or a full disk: "
                                 "ignored")


def test_short_lines_blank_lines_and_long_lines_in_the_middle(tmp_path):
    """A short line whose run id was written whole makes that run incomplete; a line of one field or with no
    run id does not; a blank line is skipped and reading goes on; a long line is named by its line number."""
    from omni_loader.results.integrity import check_results

    out = _lines_after(_results(tmp_path, n=4), "1,optimized", "2", "", "x,y,z", ",".join(["0"] * (len(RUN_COLUMNS) + 1)))
    append_rows(out, [_row(9, phase="total")])  # off the plan: still read after the blank line
    check = check_results(out)
    assert check.missing_runs == (1,)  # run 1's rows are left out; run 2's stay
    assert sorted(set(check.frame["run_id"])) == [0, 2, 3]
    assert "3 malformed rows ignored" in check.findings and "1 row of a newer schema ignored" in check.findings
    assert "3 rows of runs.csv have too few fields (lines 10, 11, 13): ignored" in check.problems
    assert ("1 row of runs.csv has more fields than its header (line 14): written by a newer omni-loader or "
            "two writers interleaved; ignored") in check.problems
    assert "1 row off the plan ignored" in check.findings  # line 15, after the blank line 12


def test_a_short_last_line_that_was_ended_is_still_torn(tmp_path):
    """append_rows ends a torn line before it writes on; a short line left last, ended, is the same crash."""
    from omni_loader.results.integrity import check_results

    out = _lines_after(_results(tmp_path, n=4), "3,optimized,False,2,con")
    assert check_results(out).findings[0] == "1 torn row ignored"


def test_rows_with_unreadable_run_ids_or_sources_are_ignored(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=2)
    append_rows(out, [_row("x1"), _row(1.5), _row(0, source="gpu", phase="other")])
    check = check_results(out)
    assert check.findings[0] == "3 rows with unreadable values ignored"
    assert check.problems[0] == "3 rows of runs.csv have no integer run_id or an unknown source: ignored"
    assert len(check.frame) == 4


# --------------------------------------------------------------------------- what a check says, word for word


def test_a_planned_run_missing_from_a_complete_benchmark_gets_no_resume_hint(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=2)
    write_metadata(out, {"kind": "reproduce", "plan": _plan(3), "status": "complete"})
    assert check_results(out).problems == ["1 of 3 planned runs has no usable rows: 2"]


def test_rows_set_aside_by_an_earlier_resume_are_notes_not_problems(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=2)
    write_metadata(out, {"kind": "reproduce", "plan": _plan(2), "status": "complete",
                         "repairs": [{"rows": 3, "file": "runs.rejected.csv"}, {"rows": 1, "file": "runs.rejected.csv"}]})
    check = check_results(out)
    assert check.ok and check.notes == ("3 rows set aside by --resume (runs.rejected.csv)",
                                        "1 row set aside by --resume (runs.rejected.csv)")


def test_a_bad_first_row_is_rejected_as_line_two(tmp_path):
    from omni_loader.results.integrity import check_results

    write_metadata(tmp_path, {"kind": "reproduce", "plan": _plan(2), "status": "complete"})
    append_rows(tmp_path, [_row(0, source="gpu", phase="other")] + _run_rows(0) + _run_rows(1))
    check = check_results(tmp_path)
    assert check.rejected_lines == (2,) and len(check.frame) == 4  # the header is line 1


def test_off_plan_and_incomplete_runs_are_explained_word_for_word(tmp_path):
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path, n=4)
    append_rows(out, [_row(9, phase="total")])
    lines = (out / RUNS_FILE).read_text().splitlines(keepends=True)
    (out / RUNS_FILE).write_text("".join(line for line in lines
                                         if not (line.startswith("1,") and ",construct," in line)))
    assert check_results(out).problems[:2] == [
        "1 row of run ids 9 does not match the plan in metadata.json (run id, variant, warm-up, order or source): "
        "from another benchmark? ignored",
        "1 run lost phase rows, cut short by a crash (run ids 1): ignored; --resume repeats them",
    ]


def test_rows_match_their_planned_run_on_variant_warm_up_and_order(tmp_path):
    from omni_loader.results.integrity import check_results

    plan = [{"run_id": 0, "variant": "baseline", "warmup": True, "order": 1, "source": "load"},
            {"run_id": 1, "variant": "optimized", "warmup": True, "order": None, "source": "load"},
            {"run_id": 2, "variant": "baseline", "warmup": False, "order": 2, "source": "load"},
            {"run_id": 3, "variant": "optimized", "warmup": False, "order": 2, "source": "load"}]
    write_metadata(tmp_path, {"kind": "reproduce", "plan": plan, "status": "complete"})
    append_rows(tmp_path, [_row(0, warmup=True), _row(1, variant="optimized", warmup=True, order=""),
                           _row(2, order="2.0"), _row(3, variant="optimized", order=2)])
    check = check_results(tmp_path)
    assert check.ok and sorted(check.frame["run_id"]) == [0, 1, 2, 3]  # no order; an order written as a float
    # Run 3 is planned as optimized: a row naming baseline is off the plan although the rest matches.
    append_rows(tmp_path, [_row(3, phase="construct", parent="total", order=2)])
    assert check_results(tmp_path).findings == ["1 row off the plan ignored"]


def test_an_aa_run_that_lost_a_phase_is_incomplete(tmp_path):
    from omni_loader.results.integrity import check_results

    plan = [{"run_id": i, "variant": "optimized", "warmup": False, "order": i + 1, "source": "aa"} for i in range(2)]
    write_metadata(tmp_path, {"kind": "reproduce", "plan": plan, "status": "complete"})
    rows = [_row(0, variant="optimized", order=1, source="aa", phase=p, parent="" if p == "total" else "total")
            for p in ("total", "construct")]
    append_rows(tmp_path, rows + [_row(1, variant="optimized", order=2, source="aa")])
    check = check_results(tmp_path)
    assert check.findings == ["1 incomplete run ignored", "1 planned run missing"]
    assert set(check.frame["run_id"]) == {0}


def test_typed_runs_reads_empty_numbers_as_missing_and_fills_a_schema_1_file(tmp_path):
    import csv

    from omni_loader.results.rows import PHASE_COUNTERS, typed_runs

    old = RUN_COLUMNS[:RUN_COLUMNS.index("minor_faults")]  # what a schema-1 runs.csv has
    path = tmp_path / RUNS_FILE
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, old, restval="")
        writer.writeheader()
        writer.writerow({**_row(0), "seconds": "n/a", "device_peak_bytes": ""})
        writer.writerow({**_row(1), "device_peak_bytes": 7})
    frame = typed_runs(path, path)
    assert math.isnan(frame["seconds"][0]) and frame["seconds"][1] == 0.5  # unreadable seconds: missing
    assert math.isnan(frame["device_peak_bytes"][0]) and frame["device_peak_bytes"][1] == 7
    assert all(frame[c].dtype == float and frame[c].isna().all() for c in PHASE_COUNTERS)
    assert list(frame["run_started"]) == ["", ""] and list(frame["run_ended"]) == ["", ""]
    assert list(frame.columns) == list(RUN_COLUMNS)


def test_a_schema_1_record_with_only_a_plan_is_the_load_benchmark():
    from omni_loader.results.suite import benchmarks

    assert benchmarks({"schema_version": 1, "plan": [{"run_id": 0}]}) == {"load": {"plan": [{"run_id": 0}]}}


@pytest.mark.parametrize("content, version", [("[]", "None"), ('{"schema_version": 0}', "0"),
                                              (json.dumps({"schema_version": SCHEMA_VERSION + 1}), "4")])
def test_an_unreadable_schema_version_is_named_exactly(tmp_path, content, version):
    (tmp_path / METADATA_FILE).write_text(content)
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    hint = " (upgrade omni-loader to read it)" if version == "4" else ""
    assert str(caught.value) == (f"{tmp_path / METADATA_FILE} has schema_version {version}; "
                                 f"this omni-loader reads versions 1, 2, 3{hint}")


def test_a_recording_ends_complete_or_interrupted_however_its_block_ends(tmp_path) -> None:
    """The one lifecycle of both A/Bs: running while the block runs (rows appended as runs end, fields stored
    with them), complete at its end, interrupted when anything stops it, with the fields kept up to date."""
    from omni_loader.results.lifecycle import recording
    from omni_loader.results.suite import Record, benchmark, read_metadata

    record = Record({"kind": "test", "plan": [{"run_id": 0, "variant": "baseline", "warmup": False, "order": 1}]})
    with recording(tmp_path / "a", "load", record, runs_ok=0) as rec:
        assert benchmark(read_metadata(tmp_path / "a"), "load")["status"] == "running"
        rec.ran([_row(0)], runs_ok=1)
        assert benchmark(read_metadata(tmp_path / "a"), "load")["runs_ok"] == 1
        rec.update(activity={"cpu": 0.5})
    done = benchmark(read_metadata(tmp_path / "a"), "load")
    assert done["status"] == "complete" and done["finished_at"] and done["activity"] == {"cpu": 0.5}
    assert len(read_runs(tmp_path / "a")) == 1
    with pytest.raises(KeyboardInterrupt), recording(tmp_path / "b", "load", record) as rec:
        rec.update(runs_ok=3)
        raise KeyboardInterrupt
    stopped = benchmark(read_metadata(tmp_path / "b"), "load")
    assert stopped["status"] == "interrupted" and stopped["interrupted_at"] and stopped["runs_ok"] == 3


def test_append_rows_refuses_a_runs_csv_that_is_not_the_one_the_writer_started_with(tmp_path):
    """``expect`` (from runs_file) names the file a benchmark appends to: a runs.csv replaced meanwhile is refused in
    one line that names it, nothing appended to it, and its descriptor closed (no ResourceWarning left behind)."""
    import gc
    import os
    import warnings

    from omni_loader.results.rows import runs_file

    with runs_file(tmp_path) as started:
        append_rows(tmp_path, [_row(0)], expect=started)  # the same file: appended
        os.replace(tmp_path / RUNS_FILE, tmp_path / "moved.csv")
        (tmp_path / RUNS_FILE).write_text(",".join(RUN_COLUMNS) + "\r\n")
        before = (tmp_path / RUNS_FILE).read_bytes()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            with pytest.raises(ResultsError) as exc:
                append_rows(tmp_path, [_row(1)], expect=started)
            gc.collect()
    assert str(exc.value) == (f"{tmp_path / RUNS_FILE} is no longer the file this benchmark appends to: it was "
                              "replaced while the benchmark ran (by another writer, or by hand), so its rows so far are "
                              "gone from it; nothing more is appended. Start the benchmark again with a new --out")
    assert (tmp_path / RUNS_FILE).read_bytes() == before
    assert len(read_runs(tmp_path)) == 0 and len((tmp_path / "moved.csv").read_text().splitlines()) == 2


def test_append_rows_keeps_an_older_writers_header(tmp_path):
    """A runs.csv an older omni-loader began (fewer columns, in RUN_COLUMNS' order, the first five the same) is
    appended to in its own shape when resumed: one table, the newer columns left out."""
    import csv

    older = [c for c in RUN_COLUMNS if c not in ("checkpoint_resident", "read_bytes")]
    (tmp_path / RUNS_FILE).write_text(",".join(older) + "\r\n")
    append_rows(tmp_path, [_row(0, checkpoint_resident=0.5, read_bytes=7, digest="xxh3-128:ab")])
    with open(tmp_path / RUNS_FILE, newline="", encoding="utf-8") as fh:
        header, *rows = list(csv.reader(fh))
    assert header == older and len(rows) == 1 and len(rows[0]) == len(older)
    row = dict(zip(header, rows[0]))
    assert (row["run_id"], row["variant"], row["digest"], row["seconds"]) == ("0", "baseline", "xxh3-128:ab", "0.5")


@pytest.mark.parametrize("first_line", [
    ",".join(RUN_COLUMNS).encode(),  # this version's own
    ",".join(("variant", "run_id", *RUN_COLUMNS[2:-3])).encode(),  # the first five in another order
    ",".join((*RUN_COLUMNS[:5], "seconds", "parent", *RUN_COLUMNS[7:-3])).encode(),  # fewer, out of order after them
    ",".join(RUN_COLUMNS[:5]).encode() + b",\xff",  # not UTF-8
    ",".join(RUN_COLUMNS[:7]).encode() + b" x",  # an older header up to its space: the whole line is not one
], ids=["current", "first-five-reordered", "out-of-order", "not-utf8", "space"])
def test_append_rows_writes_this_versions_columns_under_any_other_header(tmp_path, first_line):
    """Only an older writer's header (see above) is followed; under any other first line the rows are written with
    RUN_COLUMNS (check_results then says what is wrong with the file), and bytes that are not UTF-8 are read as
    such, not raised on."""
    import csv

    (tmp_path / RUNS_FILE).write_bytes(first_line + b"\r\n")
    append_rows(tmp_path, [_row(0)])
    with open(tmp_path / RUNS_FILE, newline="", encoding="utf-8", errors="replace") as fh:
        rows = list(csv.reader(fh))
    assert len(rows) == 2 and len(rows[1]) == len(RUN_COLUMNS) and rows[1][:2] == ["0", "baseline"]


def test_the_reports_drawing_is_recorded_beside_the_benchmarks(tmp_path):
    """``report.status`` goes from "not drawn" (stamped when the drawing began) to "drawn" (stamped again), and the
    suite written each time is the one on disk, its benchmarks untouched."""
    from omni_loader.results.suite import Record, Suite, store_benchmark, store_report

    store_benchmark(tmp_path, "load", Record({"kind": "reproduce", "status": "complete"}))
    begun = store_report(tmp_path, "not drawn")
    assert Suite.read(tmp_path).raw == {"schema_version": SCHEMA_VERSION, **begun.raw}
    assert begun.members == {"load": {"kind": "reproduce", "status": "complete"}}
    report = begun.raw["report"]
    assert set(report) == {"status", "started_at"} and report["status"] == "not drawn"
    began = "2026-01-01T00:00:00+00:00"  # an earlier drawing's start, kept when it is drawn
    drawn = store_report(tmp_path, "drawn", Suite({**begun.raw, "report": {**report, "started_at": began}}))
    assert Suite.read(tmp_path).raw == {"schema_version": SCHEMA_VERSION, **drawn.raw}
    assert drawn.raw["report"] == {"status": "drawn", "started_at": began,
                                   "drawn_at": drawn.raw["report"]["drawn_at"]} and drawn.members == begun.members
    assert drawn.raw["report"]["drawn_at"] > began
    store_benchmark(tmp_path, "startup", Record({"kind": "serve-ab", "status": "running"}))  # a member stored later
    assert Suite.read(tmp_path).report == drawn.report and set(Suite.read(tmp_path).members) == {"load", "startup"}
    with pytest.raises(ValueError, match="a report is not drawn or drawn, not 'done'"):
        store_report(tmp_path, "done")


@pytest.mark.parametrize(("value", "shown"), [
    ("x" * 38, '"' + "x" * 38 + '"'),  # 40 characters: shown whole
    ("x" * 39, '"' + "x" * 36 + "..."),  # 41: cut to 37 and marked
    (1.5, "1.5"),
])
def test_a_field_of_the_wrong_type_is_refused_with_its_value_shown_short(tmp_path, value, shown):
    write_metadata(tmp_path, {"benchmarks": {"load": {"kind": "reproduce", "warmup": value}}})
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    kind = "a string" if isinstance(value, str) else "a number"
    assert str(caught.value) == (f"{tmp_path / METADATA_FILE}: benchmarks.load.warmup is {kind} ({shown}), not an "
                                 "integer: not written by omni-loader (or edited by hand); restore it from a copy")


@pytest.mark.parametrize("key", ["status", "started_at", "drawn_at"])
def test_a_report_stamp_of_the_wrong_type_is_refused(tmp_path, key):
    write_metadata(tmp_path, {"benchmarks": {}, "report": {"status": "drawn", key: 5}})
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / METADATA_FILE}: report.{key} is an integer (5), not a string")


def test_a_suite_is_itself_as_a_suite_and_a_dict_is_read_as_one():
    from omni_loader.results.suite import Suite, benchmark

    suite = Suite({"schema_version": 3, "benchmarks": {"load": {"kind": "reproduce"}}})
    assert Suite.of(suite) is suite and Suite.of(suite.raw) == suite
    assert benchmark(suite, "load") == benchmark(suite.raw, "load") == {"kind": "reproduce"}


@pytest.mark.parametrize(("metadata", "said"), [
    ({"schema_version": 2, "kind": "reproduce", "warmup": "1"}, 'load.warmup is a string ("1")'),  # no "benchmarks."
    ({"benchmarks": {"load": {"spec": {"runs": 3}, "warmup": "1"}}}, 'benchmarks.load.warmup is a string ("1")'),
    ({"benchmarks": {"load": {"spec": {"variants": ["a"], "runs": "3"}}}}, 'benchmarks.load.spec.runs is a string'),
    ({"benchmarks": {"load": {"warmup": True}}}, "benchmarks.load.warmup is true or false (true), not an integer"),
])
def test_every_field_is_checked_whatever_else_the_record_holds(tmp_path, metadata, said):
    """A record's own fields are checked beside its spec's, and a spec's beside its variants; true is not a number
    here; a schema-2 record's fields are named without ``benchmarks.``."""
    write_metadata(tmp_path, metadata)
    raw = json.loads((tmp_path / METADATA_FILE).read_text())
    (tmp_path / METADATA_FILE).write_text(json.dumps({**raw, **metadata}))  # schema 2 kept as given
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / METADATA_FILE}: {said}")


def test_metadata_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    (tmp_path / METADATA_FILE).write_bytes(b'{"schema_version": 3, "x": "\xff"}')
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    assert str(caught.value) == (f"{tmp_path / METADATA_FILE} is not UTF-8 text (byte 0xff at offset 28): it was not "
                                 "written by omni-loader or is damaged; restore it from a copy")
    (tmp_path / METADATA_FILE).write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ResultsError) as caught:
        read_metadata(tmp_path)
    assert str(caught.value) == (f"{tmp_path / METADATA_FILE} is nested too deeply to be read: it was not written by "
                                 "omni-loader")


def test_a_report_not_drawn_is_recorded_drawn_by_report_unless_a_live_writer_will(tmp_path):
    """``omni-loader report`` records the drawing (once) when metadata.json says it was not drawn, and leaves it to a
    writer that holds the lock; the check a report is drawn from has no "report not drawn" finding, and only that
    one is dropped."""
    from omni_loader.results.integrity import REPORT_NOT_DRAWN, check_results
    from omni_loader.results.lifecycle import report_check, report_drawn
    from omni_loader.results.lock import writer_lock
    from omni_loader.results.suite import Suite

    out = _results(tmp_path, n=2)
    assert not report_drawn(out)  # an older kit's directory: nothing recorded, nothing to record
    write_metadata(out, {**read_metadata(out), "plan": _plan(3), "report": {"status": "not drawn"}})
    check = check_results(out)
    assert [f.short for f in check.found] == ["1 planned run missing", REPORT_NOT_DRAWN]
    for drawn_from in (report_check(out), report_check(out, check)):
        assert [f.short for f in drawn_from.found] == ["1 planned run missing"] and drawn_from.suite == check.suite
    with writer_lock(out):
        assert not report_drawn(out)  # the writer holding the lock draws it and says so
    assert Suite.read(out).raw["report"]["status"] == "not drawn"
    assert report_drawn(out) and Suite.read(out).raw["report"]["status"] == "drawn"
    assert not report_drawn(out)  # drawn already


def test_a_recording_is_stored_running_and_refuses_rows_once_its_runs_file_is_replaced(tmp_path):
    from omni_loader.results.lifecycle import recording
    from omni_loader.results.suite import Record

    with pytest.raises(ResultsError, match="runs.csv"), recording(tmp_path, "load", Record({"kind": "test"})) as rec:
        rec.update(runs_ok=1)
        rec.store()
        assert read_metadata(tmp_path)["benchmarks"]["load"] == {"kind": "test", "status": "running", "runs_ok": 1}
        rec.ran(_run_rows(0))
        (tmp_path / RUNS_FILE).unlink()  # replaced by another writer: its rows are not this benchmark's to extend
        append_rows(tmp_path, _run_rows(1))
        rec.ran(_run_rows(2))


@pytest.mark.parametrize("rows_before", [0, 1])
def test_a_runs_file_deleted_and_made_again_at_once_is_not_taken_for_the_one_a_recording_began(tmp_path, rows_before):
    """A file system hands a deleted file's inode to the next file made (ext4 does so at once): a runs.csv deleted
    and made again while a benchmark runs is refused all the same, whether or not the benchmark had appended."""
    from omni_loader.results.lifecycle import recording
    from omni_loader.results.suite import Record

    with pytest.raises(ResultsError, match="no longer the file"), recording(tmp_path, "load", Record({})) as rec:
        for run in range(rows_before):
            rec.ran(_run_rows(run))
        (tmp_path / RUNS_FILE).unlink()
        (tmp_path / RUNS_FILE).touch()
        rec.ran(_run_rows(rows_before))
    assert (tmp_path / RUNS_FILE).read_bytes() == b""


def test_a_complete_suite_whose_report_was_not_drawn_from_its_runs_says_why_and_how_to_draw_it(tmp_path):
    """Drawn and on disk: nothing to say. Drawn, then removed by hand: said. Begun and never ended: said with when it
    began, and an older report.md left there named as older. A suite still running, or one that records no drawing
    (an older kit's), has no such finding."""
    from omni_loader.results.integrity import REPORT_NOT_DRAWN, check_results

    out = _results(tmp_path)
    how = f"; draw it with: omni-loader report {out}"
    head = f"every benchmark of {out} is complete, but its report was not drawn from their runs: "

    def said(report: dict | None, status: str = "complete", on_disk: bool = False) -> list[str]:
        write_metadata(out, {"kind": "reproduce", "plan": _plan(4), "status": status,
                             **({} if report is None else {"report": report})})
        (out / "report.md").unlink(missing_ok=True)
        if on_disk:
            (out / "report.md").write_text("# report\n")
        check = check_results(out)
        return [p for f, p in zip(check.found, check.problems) if f.short == REPORT_NOT_DRAWN]

    assert said({"status": "drawn", "drawn_at": "2026-12-06T10:00:00Z"}, on_disk=True) == []
    assert said({"status": "drawn"}) == [f"{head}report.md was removed after it was drawn{how}"]
    begun = {"status": "not drawn", "started_at": "2026-12-06T10:00:00Z"}
    never = f"{head}drawing it began at 2026-12-06T10:00:00Z and never ended (out of memory, or the process was killed)"
    assert said(begun) == [f"{never}{how}"]
    assert said(begun, on_disk=True) == [f"{never}; the report.md there is an older one{how}"]
    assert said({"status": "not drawn"}) == [f"{head}drawing it began at ? and never ended (out of memory, or the "
                                             f"process was killed){how}"]
    assert said(begun, status="running") == [] and said(None) == []


def test_a_benchmark_member_that_is_not_a_record_is_a_finding_naming_it(tmp_path):
    """A suite whose ``benchmarks`` holds text where a record belongs: the other member's rows are still checked,
    and the damaged one is named in one line with what it holds (its first 40 characters)."""
    from omni_loader.results.integrity import check_results

    out = _results(tmp_path)
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "plan": _plan(4), "status": "complete"},
                                        "startup": "y" * 50}})
    check = check_results(out)
    assert [f.short for f in check.found] == ["benchmark startup unreadable"]
    assert check.problems == [f"{METADATA_FILE} holds str {'y' * 40!r} for benchmark 'startup', not a record: it was "
                              "not written by omni-loader; restore it from a copy"]
    assert len(check.frame) == 8
