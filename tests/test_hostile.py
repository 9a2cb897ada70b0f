"""Results that survive hostile input (issue 23): nothing written outside the results directory, no number
the kit cannot stand behind, one line (exit 2) instead of a traceback.

Each test was watched failing with the fix planted back once.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from omni_loader.cli import main
from omni_loader.errors import ResultsError
from omni_loader.results.lock import LOCK_FILE, writer_lock
from omni_loader.results.suite import METADATA_FILE, read_metadata, write_metadata
from omni_loader.results.rows import RUNS_FILE, append_rows
from omni_loader.results.integrity import check_results

DIGEST = "d" * 64
SECRET = "precious: not the kit's to write\n"


def _plan(n: int) -> list[dict]:
    return [{"run_id": i, "variant": ("baseline", "optimized")[i % 2], "warmup": False, "order": i // 2 + 1,
             "source": "load"} for i in range(n)]


def _rows(run_id: int, status: str = "ok", digest: str = DIGEST, seconds=None, error: str = "") -> list[dict]:
    entry = _plan(run_id + 1)[run_id]
    common = {"run_id": run_id, "variant": entry["variant"], "warmup": False, "order": entry["order"],
              "status": status, "error": error, "source": "load", "digest": digest, "weights_loaded": 187,
              "persistent_buffers": 1, "state_dict_calls": 51 if entry["variant"] == "baseline" else 0}
    if status == "failed":
        return [{**common, "phase": "total", "parent": "", "seconds": 0.1, "digest": ""}]
    total = 0.5 + 0.01 * run_id
    return [{**common, "phase": "total", "parent": "", "seconds": total if seconds is None else seconds},
            {**common, "phase": "buffer_discovery", "parent": "total", "seconds": 0.1}]


def _results(out: Path, n: int = 4, **record) -> Path:
    """A complete results directory of ``n`` runs (no model loaded): plan, rows, status complete."""
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "warmup": 0, "repeats": n // 2,
                                                 "order": "alternate", "plan": _plan(n), "status": "complete",
                                                 **record}}})
    append_rows(out, [row for i in range(n) for row in _rows(i)])
    return out


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("omni-loader: error: "), err
    return lines[0]


@pytest.fixture
def one_figure(monkeypatch):
    """write_report with one small real figure (``phases``), so that the plots' writing is exercised fast."""
    import omni_loader.reporting.report as report
    from omni_loader.reporting.figures import ShownFigure

    def figures(check, comps):
        fig = ShownFigure(figsize=(2, 2))
        fig.subplots().bar([0, 1], [1, 2])
        return {"phases": fig}

    monkeypatch.setattr(report, "_figures", figures)


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside every results directory that a link points at: it must never change."""
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def _link_refusal(link: Path, target: Path) -> str:
    return (f"omni-loader: error: {link} is a symbolic link (to {target}): omni-loader writes a results "
            "directory's files only in place, never through a link; remove the link (or replace it with a copy) "
            "and run again")


# --------------------------------------------------------------------------- writes outside the results directory


def test_report_refuses_a_symlinked_report_md(tmp_path, secret, capsys, one_figure):
    out = _results(tmp_path / "res")
    (out / "report.md").symlink_to(secret)
    code, _, err = _cli(capsys, "report", out, "--quiet")
    assert code == 2 and _one_line(err) == _link_refusal(out / "report.md", secret)
    assert secret.read_text() == SECRET and not (out / "plots").exists()  # refused before anything is written


def test_report_refuses_a_symlinked_plots_folder(tmp_path, capsys, one_figure):
    out = _results(tmp_path / "res")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "plots").symlink_to(elsewhere)
    code, _, err = _cli(capsys, "report", out, "--quiet")
    assert code == 2 and _one_line(err) == _link_refusal(out / "plots", elsewhere)
    assert list(elsewhere.iterdir()) == [] and not (out / "report.md").exists()


@pytest.mark.parametrize("name", ["phases.png", "phases.svg", "phases.csv"])
def test_report_refuses_a_symlinked_file_in_plots(tmp_path, secret, capsys, one_figure, name):
    out = _results(tmp_path / "res")
    (out / "plots").mkdir()
    (out / "plots" / name).symlink_to(secret)
    code, _, err = _cli(capsys, "report", out, "--quiet")
    assert code == 2 and _one_line(err) == _link_refusal(out / "plots" / name, secret)
    assert secret.read_text() == SECRET


def test_report_writes_report_and_plots_in_place(tmp_path, capsys, one_figure):
    out = _results(tmp_path / "res")
    code, stdout, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 0, err
    assert stdout == f"report: {out / 'report.md'}\n"
    assert sorted(p.name for p in (out / "plots").iterdir()) == ["phases.csv", "phases.png", "phases.svg"]
    assert (out / "plots" / "phases.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "plots" / "phases.svg").read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize("name", [LOCK_FILE, RUNS_FILE, METADATA_FILE, "runs.rejected.csv", "report.md"])
def test_a_writer_refuses_a_directory_holding_a_link(tmp_path, secret, name):
    out = _results(tmp_path / "res")
    (out / name).unlink(missing_ok=True)
    (out / name).symlink_to(secret)
    with pytest.raises(ResultsError) as exc:
        with writer_lock(out):
            pytest.fail("the lock was taken")
    assert f"omni-loader: error: {exc.value}" == _link_refusal(out / name, secret)
    assert secret.read_text() == SECRET  # not truncated, not appended to


def test_append_rows_never_appends_through_a_link(tmp_path, secret):
    out = tmp_path / "res"
    out.mkdir()
    (out / RUNS_FILE).symlink_to(secret)
    with pytest.raises(ResultsError, match="is a symbolic link"):
        append_rows(out, _rows(0))
    assert secret.read_text() == SECRET


def test_write_metadata_refuses_a_symlinked_metadata_json_and_its_temporary_file(tmp_path, secret):
    out = _results(tmp_path / "res")
    (out / "metadata.json.tmp").symlink_to(secret)
    with pytest.raises(ResultsError, match="metadata.json.tmp is a symbolic link"):
        write_metadata(out, {"benchmarks": {}})
    (out / "metadata.json.tmp").unlink()
    (out / METADATA_FILE).unlink()
    (out / METADATA_FILE).symlink_to(secret)
    with pytest.raises(ResultsError, match="metadata.json is a symbolic link"):
        write_metadata(out, {"benchmarks": {}})
    assert secret.read_text() == SECRET


def test_resume_refuses_a_symlinked_writer_lock_or_runs_csv(finished_results, tmp_path, secret, capsys):
    out = Path(shutil.copytree(finished_results, tmp_path / "res"))
    rows = (out / RUNS_FILE).read_text()
    for name in (LOCK_FILE, RUNS_FILE):
        saved = out / f"{name}.saved"
        (out / name).rename(saved)
        (out / name).symlink_to(secret)
        code, _, err = _cli(capsys, "reproduce", "--resume", "--out", out)
        assert code == 2 and _one_line(err) == _link_refusal(out / name, secret)
        assert secret.read_text() == SECRET
        (out / name).unlink()
        saved.rename(out / name)
    assert (out / RUNS_FILE).read_text() == rows


def test_a_writer_removes_the_directory_it_made_when_it_wrote_nothing(tmp_path):
    out = tmp_path / "new" / "res"
    with pytest.raises(ResultsError, match="^planned failure$"):
        with writer_lock(out):
            assert (out / LOCK_FILE).is_file()
            raise ResultsError("planned failure")
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    with writer_lock(kept):
        write_metadata(kept, {"benchmarks": {}})
    assert sorted(p.name for p in kept.iterdir()) == [METADATA_FILE, LOCK_FILE]


# --------------------------------------------------------------------------- numbers the kit cannot stand behind


@pytest.mark.parametrize("seconds", ["nan", "inf", "-5", "-0.5", "abc", "-inf", "1e999"])
def test_seconds_no_clock_gives_are_an_integrity_problem(tmp_path, seconds):
    out = _results(tmp_path / "res")
    text = (out / RUNS_FILE).read_text()
    (out / RUNS_FILE).write_text(text.replace("2,baseline,False,2,total,,0.52,", f"2,baseline,False,2,total,,{seconds},"))
    assert (out / RUNS_FILE).read_text() != text
    check = check_results(out)
    assert check.findings == ["1 row with impossible seconds ignored", "1 planned run missing"]
    assert check.problems[0] == (f"1 row of runs.csv has seconds that no clock gives ({seconds!r}: not a finite "
                                 "number >= 0; run ids 2): those runs are ignored; --resume repeats them")
    assert sorted(set(check.frame["run_id"])) == [0, 1, 3] and check.missing_runs == (2,)
    assert check.rejected_lines == (6, 7)  # both rows of run 2: the run cannot be trusted


def test_report_strict_exits_1_on_a_nan_duration(tmp_path, capsys, one_figure):
    out = _results(tmp_path / "res")
    (out / RUNS_FILE).write_text((out / RUNS_FILE).read_text().replace(",total,,0.5,", ",total,,nan,"))
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1
    assert _one_line(err).startswith(f"omni-loader: error: {out}: 2 integrity problems: 1 row of runs.csv has "
                                     "seconds that no clock gives ('nan'")
    assert "1 row with impossible seconds ignored" in (out / "report.md").read_text().splitlines()[2]


def test_a_failed_run_without_a_duration_is_not_impossible(tmp_path):
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "plan": _plan(6), "status": "complete"}}})
    append_rows(out, [*(row for i in range(5) for row in _rows(i)),
                      {**_rows(5, "failed", error="boom")[0], "seconds": None}])
    assert (out / RUNS_FILE).read_text().splitlines()[-1].startswith("5,optimized,False,3,total,,,failed,boom,")
    assert check_results(out).ok


def test_metadata_without_a_benchmark_is_a_problem(tmp_path):
    out = _results(tmp_path / "res")
    write_metadata(out, {"benchmarks": {}})
    check = check_results(out)
    assert check.findings[0] == "no benchmark recorded" and not check.ok
    assert check.problems[0] == ("metadata.json records no benchmark: no plan to check runs.csv against, so none "
                                 "of its rows can be trusted; restore it from a copy")


@pytest.mark.parametrize("plan", [None, [], {}, "abc", {"run_id": 1, "variant": "baseline", "repeat": 1}])
def test_a_benchmark_without_a_plan_is_a_problem(tmp_path, plan):
    """The plan is quoted, but only its first 40 characters: a damaged plan can be any size."""
    out = _results(tmp_path / "res", plan=plan)
    check = check_results(out)
    assert check.findings == ["benchmark load has no plan"]
    assert check.problems == [f"benchmark load in metadata.json has no plan (plan: {json.dumps(plan)[:40]}): its "
                              "rows cannot be checked against the runs it planned; restore the file from a copy"]


def test_plan_entries_without_a_run_id_are_a_problem_not_a_traceback(tmp_path):
    out = _results(tmp_path / "res", plan=[*_plan(4), {"variant": "baseline"}, "x"])
    check = check_results(out)
    assert check.findings == ["2 unreadable plan entr(ies)"] and len(check.frame) == 8
    assert check.problems == ["2 of the 6 plan entries of benchmark load in metadata.json have no integer run_id: "
                              "ignored, with the rows of those runs"]


@pytest.mark.parametrize("status", [None, "finished", "complete " * 6])
def test_a_benchmark_without_a_status_is_a_problem(tmp_path, status):
    check = check_results(_results(tmp_path / "res", status=status))
    assert check.findings == ["benchmark load has no status"]
    assert check.problems == [f"benchmark load in metadata.json has status {json.dumps(status)[:40]}, not one of "
                              "running, complete, interrupted: whether it finished is unknown"]


def test_a_run_whose_rows_disagree_on_its_digest_is_left_out_and_strict_fails(tmp_path, capsys, one_figure):
    """A load writes its digest on every row of its run: a run whose rows disagree (one edited by hand) is an
    integrity problem, named and left out; and a directory whose runs loaded other tensors fails --strict."""
    from omni_loader.reporting.stats import equivalence

    out = _results(tmp_path / "res")
    text = (out / RUNS_FILE).read_text()
    assert check_results(out).ok and equivalence(check_results(out).frame)["equivalent"]
    # run 3's second row (buffer_discovery) holds another digest: the load was not the same
    lines = text.splitlines(keepends=True)
    lines[-1] = lines[-1].replace(DIGEST, "e" * 64)
    (out / RUNS_FILE).write_text("".join(lines))
    check = check_results(out)
    assert check.findings == ["1 inconsistent run ignored", "1 planned run missing"]
    assert check.problems[0].startswith("1 run has rows that disagree on digest (run ids 3)")
    assert sorted(set(check.frame["run_id"])) == [0, 1, 2]
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and "inconsistent" not in err and "1 run has rows that disagree on digest" in _one_line(err)
    # every row of run 3 holds the other digest: a consistent run that loaded other tensors
    (out / RUNS_FILE).write_text(text.replace(DIGEST, "e" * 64).replace("e" * 64, DIGEST, 6))
    assert check_results(out).ok and not equivalence(check_results(out).frame)["equivalent"]
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and _one_line(err).startswith(f"omni-loader: error: {out}: NOT equivalent: digests differ")


def test_a_benchmark_whose_every_run_failed_is_a_problem(tmp_path, capsys, one_figure):
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "plan": _plan(4), "status": "complete"}}})
    append_rows(out, [row for i in range(4) for row in _rows(i, "failed", error="shape mismatch for token2wav.x")])
    check = check_results(out)
    assert check.problems == ["every run of benchmark load failed (4 runs; run 0 baseline: shape mismatch for "
                              "token2wav.x): it measured nothing"]
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and "every run of benchmark load failed" in _one_line(err)


def test_a_variant_whose_every_run_failed_is_a_problem(tmp_path):
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "plan": _plan(4), "status": "complete"}}})
    append_rows(out, [*_rows(0), *_rows(1, "failed", error="boom"), *_rows(2), *_rows(3, "failed", error="boom")])
    assert check_results(out).problems == ["every run of variant optimized in benchmark load failed (2 runs; run 1: "
                                           "boom): it has no number to compare"]


def _as(rows: list[dict], **values) -> list[dict]:
    return [{**r, **values} for r in rows]


def _failed(run_id: int, error: str, **values) -> list[dict]:
    """A failed run that wrote two rows (its total and the phase it failed in)."""
    total = _as(_rows(run_id, "failed", error=error), **values)
    return [*total, *_as(total, phase="construct", parent="total")]


_UNPLANNED = {"load": {"kind": "reproduce", "status": "complete"},
              "startup": {"kind": "serve-ab", "status": "complete"}}


@pytest.mark.parametrize("benchmarks, rows, findings, problems", [
    ({"load": _UNPLANNED["load"]},
     [*_rows(0), *_failed(1, "boom"), *_rows(2), *_failed(3, "boom"), *_failed(4, "", variant="aa-1", source="aa"),
      *_as(_rows(5), variant="aa-2", source="aa"), *_failed(6, "", variant="aa-1", source="aa"),
      *_as(_rows(7), variant="aa-2", source="aa")],
     ["every run of optimized failed", "every run of aa-1 failed"],
     ["every run of variant optimized in benchmark load failed (2 runs; run 1: boom): it has no number to compare",
      "every run of variant aa-1 in benchmark load failed (2 runs; run 4: no reason recorded): it has no number to "
      "compare"]),
    (_UNPLANNED, [*_failed(0, "", source="server"), *_failed(1, "", source="server")],
     ["every run of benchmark startup failed"],
     ["every run of benchmark startup failed (2 runs; run 0 baseline: no reason recorded): it measured nothing"]),
    (_UNPLANNED,
     [*_failed(0, "x"), *_failed(1, "x"), *_failed(2, "", source="server"), *_failed(3, "", source="server")],
     ["every run of benchmark load failed", "every run of benchmark startup failed"],
     ["every run of benchmark load failed (2 runs; run 0 baseline: x): it measured nothing",
      "every run of benchmark startup failed (2 runs; run 2 baseline: no reason recorded): it measured nothing"]),
], ids=["variants in the order they ran", "a benchmark without runs, then one", "two benchmarks"])
def test_without_a_plan_a_benchmarks_runs_are_those_of_its_source(tmp_path, benchmarks, rows, findings, problems):
    """A hand-made record without a plan is read unchecked: its runs are those of its source (load and A/A, or a
    server's), each failed run counted once however many rows it wrote."""
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": benchmarks})
    append_rows(out, rows)
    check = check_results(out)
    assert (check.findings, check.problems) == (findings, problems)


def test_an_impossible_checkpoint_residency_ignores_its_run_and_a_file_without_the_column_reads_whole(tmp_path):
    """checkpoint_resident is a share of the checkpoint's bytes (empty: not measured); an older runs.csv has no
    such column, and each of its runs counts."""
    import csv

    out = _results(tmp_path / "res")
    with (out / RUNS_FILE).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows = [{**r, "checkpoint_resident": {"1": "1.7", "2": "0.5"}.get(r["run_id"], "")} for r in rows]

    def rewrite(columns: list[str]) -> None:
        with (out / RUNS_FILE).open("w", newline="") as fh:
            writer = csv.DictWriter(fh, columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    rewrite(list(rows[0]))
    check = check_results(out)
    assert check.findings == ["1 run with an impossible checkpoint residency ignored", "1 planned run missing"]
    assert check.problems[0] == ("1 run of runs.csv has a checkpoint_resident that no measurement gives ('1.7': not "
                                 "a share from 0 to 1; run ids 1): those runs are ignored; --resume repeats them")
    rewrite([c for c in rows[0] if c != "checkpoint_resident"])
    check = check_results(out)
    assert check.ok and sorted(set(check.frame["run_id"])) == [0, 1, 2, 3]


def test_a_benchmarks_runs_are_the_runs_of_its_plan(tmp_path):
    """A benchmark's failures are counted on its own planned runs, not on every run of its source: here a second
    benchmark of load runs failed whole beside one that did not."""
    out = tmp_path / "res"
    plan = _plan(8)
    write_metadata(out, {"benchmarks": {"load": {"kind": "reproduce", "plan": plan[:4], "status": "complete"},
                                        "again": {"kind": "reproduce", "plan": plan[4:], "status": "complete"}}})
    append_rows(out, [*(row for i in range(4) for row in _rows(i)),
                      *(row for i in range(4, 8) for row in _rows(i, "failed", error="boom"))])
    assert check_results(out).problems == ["every run of benchmark again failed (4 runs; run 4 baseline: boom): it "
                                           "measured nothing"]


# --------------------------------------------------------------------------- one line, exit 2, nothing left behind


ONE_LINERS = [
    (["--variant", "x"], "--variant 'x' is not NAME=STEP:REF[,STEP:REF] (steps: discovery, parameters)"),
    (["--variant", "baseline=discovery:m:f"], "--variant 'baseline': that name is a built-in variant; choose another"),
    (["--variant", "x=bogus:ref"],
     "--variant 'x=bogus:ref': 'bogus:ref' is not STEP:REF with STEP one of discovery, parameters, or "
     "installed[:PATH]"),
    (["--worker-timeout", "nan"], "--worker-timeout nan: must be a finite number of seconds above 0"),
    (["--worker-timeout", "0"], "--worker-timeout 0: must be a finite number of seconds above 0"),
    (["--worker-timeout", "-1"], "--worker-timeout -1: must be a finite number of seconds above 0"),
    (["--threads", "-1"], "--threads -1: must be a whole number from 0 to 4,096 (0: torch's default)"),
    (["--runs", "100000000"], "--runs 100000000: must be a whole number from 1 to 10,000"),
    (["--runs", "0"], "--runs 0: must be a whole number from 1 to 10,000"),
    (["--warmup", "-1"], "--warmup -1: must be a whole number from 0 to 10,000"),
]


@pytest.mark.parametrize(("options", "line"), ONE_LINERS, ids=[" ".join(o) for o, _ in ONE_LINERS])
def test_reproduce_refuses_a_bad_option_in_one_line(tmp_path, capsys, options, line):
    out = tmp_path / "res"
    code, stdout, err = _cli(capsys, "reproduce", "--size", "tiny", *options, "--out", out)
    assert (code, stdout, _one_line(err)) == (2, "", f"omni-loader: error: {line}")
    assert not out.exists()


@pytest.mark.parametrize(("options", "line"), [
    (["--runs", "0"], "--runs 0: must be a whole number from 1 to 10,000"),
    (["--timeout", "nan"], "--timeout nan: must be a finite number of seconds above 0"),
])
def test_serve_ab_refuses_a_bad_option_in_one_line(tmp_path, capsys, options, line):
    out = tmp_path / "res"
    code, _, err = _cli(capsys, "serve-ab", "--baseline-cmd", "true", "--optimized-cmd", "true", "--health-url",
                        "http://127.0.0.1:9/health", *options, "--out", out)
    assert (code, _one_line(err)) == (2, f"omni-loader: error: {line}")
    assert not out.exists()


@pytest.mark.subprocess
def test_serve_ab_where_no_run_succeeds_exits_1_with_the_first_reason(tmp_path, capsys):
    from omni_loader.startup.one_run import free_port

    dead = f"{sys.executable} -c 'raise SystemExit(3)'"
    out = tmp_path / "res"
    code, stdout, err = _cli(capsys, "serve-ab", "--baseline-cmd", dead, "--optimized-cmd", dead, "--health-url",
                             f"http://127.0.0.1:{free_port()}/health", "--warmup", "0", "--runs", "1",
                             "--timeout", "30", "--out", out)
    assert code == 1, (stdout, err)
    errors = [ln for ln in err.splitlines() if "error" in ln]  # under the progress lines
    assert len(errors) == 1 and "Traceback" not in err, err
    line = errors[0]
    assert line.startswith("omni-loader: error: no measured run of serve-ab succeeded; run 0 (baseline): "), line
    assert "3" in line and line.endswith(f"each run's log is in {out / 'logs'}")
    assert "measured runs, status ok" not in stdout


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_stage_server_refuses_a_port_out_of_range(capsys, port):
    code, _, err = _cli(capsys, "stage-server", "--variant", "baseline", "--port", port)
    assert (code, _one_line(err)) == (2, f"omni-loader: error: --port {port}: must be a whole number from 1 to 65,535")


@pytest.mark.parametrize("name", ["model.safetensors.index.json", "config.json"])
def test_a_snapshot_json_holding_a_list_is_one_line(tiny_snapshot, tmp_path, capsys, name):
    snap = Path(shutil.copytree(tiny_snapshot, tmp_path / "snap"))
    (snap / name).write_text("[1, 2]")
    out = tmp_path / "res"
    code, _, err = _cli(capsys, "reproduce", "--checkpoint", snap, "--out", out)
    assert code == 2
    assert _one_line(err) == (f"omni-loader: error: {snap / name} holds a JSON list, not an object: it is not a "
                              f"Hugging Face {name}")
    assert not out.exists()


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_a_50_mb_line_in_runs_csv_is_one_row_ignored(tmp_path, capsys, one_figure):
    out = _results(tmp_path / "res")
    with (out / RUNS_FILE).open("a") as fh:
        fh.write("3,optimized,False,2,total,," + "9" * 50_000_000 + "\r\n")
    check = check_results(out)
    # cut short of its fields too, like a torn row: run 3's rows are not trusted either
    assert check.findings == ["1 oversized row ignored", "1 incomplete run ignored", "1 planned run missing"]
    assert check.problems[0] == ("1 row of runs.csv has a field longer than 131072 characters (line 10): not "
                                 "written by omni-loader; ignored")
    assert check.rejected_lines == (8, 9, 10) and len(check.frame) == 6
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and "has a field longer than 131072 characters" in _one_line(err)
    import csv

    assert csv.field_size_limit() == 131072  # lifted only while the kit reads runs.csv


def test_non_utf8_metadata_is_one_line(tmp_path, capsys):
    out = _results(tmp_path / "res")
    raw = (out / METADATA_FILE).read_bytes()
    (out / METADATA_FILE).write_bytes(raw.replace(b'"complete"', b'"compl\xe9te"'))
    with pytest.raises(ResultsError):
        read_metadata(out)
    code, _, err = _cli(capsys, "report", out, "--quiet")
    offset = raw.index(b'"complete"') + 6
    assert code == 2 and _one_line(err) == (f"omni-loader: error: {out / METADATA_FILE} is not UTF-8 text (byte 0xe9 "
                                            f"at offset {offset}): it was not written by omni-loader or is damaged; "
                                            "restore it from a copy")
    assert not (out / "report.md").exists()


# --------------------------------------------------------------------------- smaller


def test_synthetic_shards_are_readable_by_everyone(tiny_snapshot):
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tiny_snapshot.iterdir()}
    assert modes and all(mode == 0o644 for mode in modes.values()), modes
    assert stat.S_IMODE(tiny_snapshot.stat().st_mode) == 0o755


def test_a_benchmark_whose_runs_all_fail_alike_stops_with_the_reason(tiny_snapshot, tmp_path, capsys):
    """A checkpoint of the wrong shape fails every run the same way: after one run of each variant the
    benchmark stops with that reason in one line (not the whole plan, ending in "no successful run")."""
    import safetensors.torch

    from omni_loader.results.rows import read_runs
    from omni_loader.results.suite import benchmark
    from omni_loader.token2wav.checkpoint import open_snapshot

    copy = Path(shutil.copytree(tiny_snapshot, tmp_path / "snap"))
    snap = open_snapshot(copy)
    key = next(k for k in sorted(snap.weight_map) if k.endswith(".weight") and "code2wav_dit_model" in k)
    shard = copy / snap.weight_map[key]
    tensors = safetensors.torch.load_file(str(shard))
    tensors[key] = tensors[key][:-1]
    safetensors.torch.save_file(tensors, str(shard), metadata={"format": "pt"})
    out = tmp_path / "res"
    code, _, err = _cli(capsys, "reproduce", "--checkpoint", copy, "--warmup", "0", "--runs", "3", "--in-process",
                        "--out", out)
    line = err.strip().splitlines()[-1]  # after the progress bar's lines: one line of error
    assert code == 2 and line.startswith("omni-loader: error: stopped: every run so far (baseline, optimized) failed "
                                         "with the same error, which the runs left would share: ")
    assert key in line and line.endswith("; fix its cause and continue with --resume")
    frame = read_runs(out)
    assert len(frame) == 2 and set(frame["status"]) == {"failed"}  # one run of each variant, not all six
    assert benchmark(read_metadata(out), "load")["status"] == "interrupted"


@pytest.fixture(scope="module")
def finished_results(tiny_snapshot, tmp_path_factory) -> Path:
    """The module's one finished benchmark: two runs a side, in-process, its report text only. Never written to
    after: a test that writes works on a copy (one benchmark instead of one per test that needs one)."""
    out = tmp_path_factory.mktemp("finished") / "res"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMNI_LOADER_PLOTS", "off")
        assert main(["reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "0", "--runs", "2", "--in-process",
                     "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def capped_results(finished_results, tmp_path_factory) -> Path:
    """A copy of the finished benchmark for the tests that draw its report under a memory cap (they draw it
    themselves, into it)."""
    return Path(shutil.copytree(finished_results, tmp_path_factory.mktemp("capped") / "res"))


@pytest.mark.slow
@pytest.mark.subprocess
def test_running_out_of_memory_while_drawing_the_report_is_one_line(capped_results):
    """report under an address-space cap a little above what the process holds, at several caps: wherever
    the allocation fails (matplotlib's renderer, numpy), the command ends in one line naming memory, never a
    traceback; at least one cap is hit in Python (a native library that exits by itself is not ours to word)."""
    import subprocess

    out = capped_results
    code = ("import resource, sys\n"
            "import matplotlib, matplotlib.pyplot, pandas, scipy.stats  # imported before the cap\n"
            "import omni_loader.reporting.report, omni_loader.reporting.plots\n"
            "from omni_loader.cli import main\n"
            "vm = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024\n"
            "resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[2]) * 2**20, resource.RLIM_INFINITY))\n"
            "sys.exit(main(['report', sys.argv[1], '--quiet']))\n")
    worded = 0
    for cap_mib in (48, 56, 64, 72, 80):
        proc = subprocess.run([sys.executable, "-c", code, str(out), str(cap_mib)], capture_output=True, text=True,
                              timeout=120, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        assert "Traceback" not in proc.stderr, (cap_mib, proc.stderr[-3000:])
        if proc.returncode == 2:
            line = _one_line(proc.stderr)  # at 48 MiB, now and then, a C call returns NULL with no MemoryError set
            assert line.startswith(("omni-loader: error: out of memory", NATIVE_FAILURE)), proc.stderr
            worded += line.startswith("omni-loader: error: out of memory")
    assert worded, "no cap made an allocation fail in Python"


NATIVE_FAILURE = "omni-loader: error: a native library failed without saying why (SystemError"


def test_a_native_call_that_fails_without_an_exception_is_one_line(monkeypatch, capsys):
    """Seen in CI at a 48 MiB cap: matplotlib's C code returned NULL with no exception set, and Python raised
    ``SystemError: error return without exception set`` out of ``main`` as a traceback. Now one line that names
    both causes and exit 2; under --debug the traceback."""
    import argparse

    import omni_loader.cli as cli

    def func(args):
        raise SystemError("error return without exception set")

    monkeypatch.setattr(cli, "parse_args", lambda argv: argparse.Namespace(func=func))
    assert main(["report"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(NATIVE_FAILURE) and "memory running out" in line and "--debug" in line
    with pytest.raises(SystemError):
        main(["report", "--debug"])


class _DiesOutOfMemory:
    """An object whose finalizer runs out of memory: Python cannot raise that to anyone, so it is "unraisable",
    as a MemoryError in matplotlib's font-reading callback is (FreeType calls it from C++)."""

    def __init__(self, message: str, kind: type[BaseException] = MemoryError) -> None:
        self.message, self.kind = message, kind

    def __del__(self) -> None:
        raise self.kind(self.message)


def _command(monkeypatch, *, then, kind: type[BaseException] = MemoryError):
    """``main`` runs a command that first loses an unraisable error of ``kind``, then does ``then``."""
    import argparse

    import omni_loader.cli as cli

    def func(args):
        _DiesOutOfMemory("std::bad_alloc", kind)  # dropped at once: its finalizer's error is unraisable
        return then()

    monkeypatch.setattr(cli, "parse_args", lambda argv: argparse.Namespace(func=func))


def test_memory_lost_where_a_library_could_not_raise_it_is_not_a_traceback(monkeypatch, capsys):
    """Seen in CI: `report` under a memory cap printed matplotlib's "Exception ignored in:
    'read_from_file_callback'" and a MemoryError traceback three times before its one line. Now the command
    that then fails says one line; the one that succeeds says, in one warning line, that its drawing may be
    incomplete; and the hook that was there before is back afterwards."""
    before = sys.unraisablehook

    def fails():
        raise MemoryError("std::bad_alloc")

    _command(monkeypatch, then=fails)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert _one_line(err).startswith("omni-loader: error: out of memory") and "Exception ignored" not in err
    assert sys.unraisablehook is before

    _command(monkeypatch, then=lambda: 0)
    assert main(["report"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("omni-loader: warning: memory ran out"), lines
    assert "may be incomplete" in lines[0]
    assert sys.unraisablehook is before


def test_other_unraisable_errors_and_debug_go_to_the_hook_that_was_there(monkeypatch, capsys):
    """Only a MemoryError is held back, and not under --debug: anything else lost in a finalizer or a
    callback is the earlier hook's to show (Python's prints "Exception ignored in:" and the traceback)."""
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))
    _command(monkeypatch, then=lambda: 0, kind=ValueError)
    assert main(["report"]) == 0 and seen == [ValueError]
    _command(monkeypatch, then=lambda: 0)
    assert main(["--debug", "report"]) == 0 and seen == [ValueError, MemoryError]
    assert capsys.readouterr().err == ""


# `report` whose memory runs out as the report begins: an address-space cap set when write_report is called, a few
# MiB above what the process holds then (argv: the results directory, the cap in MiB).
CAPPED_AT_THE_REPORT = """
import resource, sys
import matplotlib, matplotlib.pyplot, matplotlib.backends.backend_agg, pandas, scipy.stats  # imported before the cap
import omni_loader.reporting.report as report, omni_loader.reporting.plots
from omni_loader.cli import main
drawn = report.write_report
def capped(results):
    vm = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + int(sys.argv[2]) * 2**20, resource.RLIM_INFINITY))
    return drawn(results)
report.write_report = capped
sys.exit(main(['report', sys.argv[1], '--quiet']))
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_out_of_memory_inside_openblas_is_the_kits_one_line(capped_results):
    """Memory that ran out as the report began struck where OpenBLAS (numpy's) maps its buffer, at the report's first
    matrix product: OpenBLAS printed its own line and called exit(1), so no handler of the kit's ran (exit status
    1; in reproduce the fork server's temporary directory was left behind). The kit now has the buffer mapped
    before the report: at none of these caps (where OpenBLAS exited at each before) does OpenBLAS end the process;
    they strike in numpy or matplotlib instead, whose MemoryError and std::bad_alloc are the kit's one line (or a C
    call that fails without setting one: SystemError, the one line of a native failure)."""
    import subprocess

    out = capped_results
    worded = 0
    for cap_mib in (4, 8, 24, 32):
        done = subprocess.run([sys.executable, "-c", CAPPED_AT_THE_REPORT, str(out), str(cap_mib)],
                              capture_output=True, text=True, timeout=120)
        assert "OpenBLAS" not in done.stderr, (cap_mib, done.stderr[-3000:])  # its exit(1): the fix planted back
        if done.returncode == 2:
            line = _one_line(done.stderr)
            assert line.startswith(("omni-loader: error: out of memory", NATIVE_FAILURE)), done.stderr[-3000:]
            worded += 1
    assert worded >= 3, "the caps no longer strike in the report: choose others"


def test_memory_running_out_while_an_error_is_worded_is_the_line_made_in_advance(monkeypatch, capfd):
    """CI: `report` under a memory cap ended in a chain of MemoryError tracebacks out of ``main``: the memory ran out
    again while an error was being worded. The line made in advance is said then; --debug still raises."""
    import omni_loader.cli as cli
    from omni_loader.errors import OmniLoaderError

    def fails():
        raise OmniLoaderError("the results could not be read")

    def no_memory(*args, **kwargs):
        raise MemoryError

    _command(monkeypatch, then=fails, kind=ValueError)
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)  # the helper's ValueError: not this test's
    monkeypatch.setattr(cli, "one_line", no_memory)
    assert main(["report"]) == 2
    err = capfd.readouterr().err  # written to descriptor 2 itself: nothing left to build a Python string with
    assert err == cli.OUT_OF_MEMORY_LINE.decode() and "Traceback" not in err
    with pytest.raises(MemoryError):
        main(["report", "--debug"])
