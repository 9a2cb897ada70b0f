"""Hostile input, round two (issue 37): files and results.

Every file the kit writes goes through :mod:`omni_loader.safe_files` (no symbolic link, no hard
link, checked before the first byte); a benchmark notices that its runs.csv was replaced; rows from outside
a benchmark's time span, absurd durations and totals below their phases are integrity problems; compare
names what it cannot compare; pack and compare agree; metadata.json of the wrong types is one line.
Results directories are written by hand here (no model is loaded): these tests run in-process, in seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_hostile import _cli, _one_line

from omni_loader.errors import ResultsError
from omni_loader.results.integrity import check_results
from omni_loader.results.lock import LOCK_FILE, writer_lock
from omni_loader.results.rows import RUNS_FILE, append_rows
from omni_loader.results.suite import METADATA_FILE, write_metadata

DIGEST = "d" * 64
SECRET = "precious: not the kit's to write\n"
STARTED = "2025-03-14T10:00:00+00:00"
FINISHED = "2025-03-14T10:05:00+00:00"


def _plan(n: int) -> list[dict]:
    return [{"run_id": i, "variant": ("baseline", "optimized")[i % 2], "warmup": False, "order": i // 2 + 1,
             "source": "load"} for i in range(n)]


def _stamp(run_id: int, second: int) -> str:
    return f"2025-03-14T10:0{1 + run_id // 6}:{(run_id % 6) * 10 + second:02d}.000+00:00"


def _rows(run_id: int, phases: dict[str, tuple[str, float]] | None = None) -> list[dict]:
    """A run's rows: ``total`` and the phases ``{name: (parent, seconds)}`` (default: one 0.1 s phase)."""
    entry = _plan(run_id + 1)[run_id]
    common = {"run_id": run_id, "variant": entry["variant"], "warmup": False, "order": entry["order"],
              "status": "ok", "error": "", "source": "load", "digest": DIGEST, "weights_loaded": 187,
              "persistent_buffers": 1, "state_dict_calls": 51 if entry["variant"] == "baseline" else 0,
              "run_started": _stamp(run_id, 0), "run_ended": _stamp(run_id, 1)}
    phases = phases or {"buffer_discovery": ("total", 0.1)}
    return [{**common, "phase": "total", "parent": "", "seconds": 0.5 + 0.01 * run_id},
            *({**common, "phase": name, "parent": parent, "seconds": seconds}
              for name, (parent, seconds) in phases.items())]


def _record(n: int = 4, **fields) -> dict:
    return {"kind": "reproduce", "warmup": 0, "repeats": n // 2, "order": "alternate", "plan": _plan(n),
            "status": "complete", "started_at": STARTED, "finished_at": FINISHED, "model": "tiny", **fields}


def _results(out: Path, n: int = 4, **fields) -> Path:
    """A complete results directory of ``n`` runs written by hand: plan, rows, status complete."""
    write_metadata(out, {"benchmarks": {"load": _record(n, **fields)}})
    append_rows(out, [row for i in range(n) for row in _rows(i)])
    return out


@pytest.fixture
def secret(tmp_path) -> Path:
    """A file outside every directory the kit writes: a link to it must never change it."""
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.fixture
def one_figure(monkeypatch):
    """write_report with one small real figure, so that the plots' writing is exercised fast."""
    import omni_loader.reporting.report as report
    from omni_loader.reporting.figures import ShownFigure

    def figures(check, comps):
        fig = ShownFigure(figsize=(2, 2))
        fig.subplots().bar([0, 1], [1, 2])
        return {"phases": fig}

    monkeypatch.setattr(report, "_figures", figures)


LOG = ("(APIServer pid=10) INFO 03-14 10:00:00 [x.py:1] vLLM-Omni API server version 9.9\n"
       "(EngineCore_DP0 pid=40) [Stage-0] INFO 03-14 10:00:03 [default_loader.py:293] Loading weights took 1.51 "
       "seconds\n"
       "(APIServer pid=10) INFO 03-14 10:00:09 [x.py:1] Starting vLLM API server 0 on http://0.0.0.0:8091\n")


# --------------------------------------------------------------------------- writes outside the directory named


def _hard_link(path: Path, secret: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    os.link(secret, path)


def _report(tmp_path, capsys):
    return _cli(capsys, "report", tmp_path / "res", "--quiet")


def _resume_append(tmp_path, capsys):  # what reproduce --resume does under its lock: rows appended
    with writer_lock(tmp_path / "res"):
        append_rows(tmp_path / "res", _rows(0))


def _lock(tmp_path, capsys):
    with writer_lock(tmp_path / "res"):
        pytest.fail("the lock was taken")


def _timeline(tmp_path, capsys):
    (tmp_path / "three.log").write_text(LOG)
    return _cli(capsys, "timeline", tmp_path / "three.log", "--out", tmp_path / "tl")


def _compare(tmp_path, capsys):
    return _cli(capsys, "compare", tmp_path / "res", tmp_path / "res", "--out", tmp_path / "cmp")


def _pack(tmp_path, capsys):
    return _cli(capsys, "pack", tmp_path / "res", "--out", tmp_path / "sent" / "res.tar.gz", "--force")


def _audit(tmp_path, capsys):
    from omni_loader.sweep.audit import write_audit

    write_audit([], tmp_path / "audit")


def _traversal(tmp_path, capsys):
    from omni_loader.sweep.traversal import write_sweep

    write_sweep(tmp_path / "sweep", object())  # refused before the result is read


def _notebook(tmp_path, capsys):
    from omni_loader.notebook.files import execute

    execute("01", tmp_path / "nb" / "out.ipynb", {})  # refused before papermill runs


def _profile(tmp_path, capsys):
    from omni_loader.profiling.result import VariantProfile
    from omni_loader.profiling.run import keep_reference

    keep_reference(VariantProfile("baseline", tmp_path / "prof" / "baseline"), {"phases": {"total": 1.0}})


def _py_spy(tmp_path, capsys):
    from omni_loader.profiling.pyspy import PySpyJob, record_py_spy
    from omni_loader.profiling.settings import ProfileSettings
    from omni_loader.token2wav.options import LoadOptions

    job = PySpyJob("py-spy", str(tmp_path / "snap"), "baseline", tmp_path / "prof" / "baseline", LoadOptions(),
                   ProfileSettings(repeat=1))
    record_py_spy(job)  # refused before py-spy starts (a process started here fails the test: see conftest)


# (name, the file planted as a hard link of the secret, the writer)
WRITERS = [
    ("report", "res/report.md", _report),
    ("report-plot", "res/plots/phases.svg", _report),
    ("resume-runs", f"res/{RUNS_FILE}", _resume_append),
    ("lock", f"res/{LOCK_FILE}", _lock),
    ("metadata", f"res/{METADATA_FILE}", _lock),
    ("timeline-csv", "tl/timeline.csv", _timeline),
    ("timeline-png", "tl/gantt.png", _timeline),
    ("compare", "cmp/compare.json", _compare),
    ("pack", "sent/res.tar.gz", _pack),
    ("audit", "audit/audit.md", _audit),
    ("traversal", "sweep/fits.json", _traversal),
    ("notebook", "nb/out.ipynb", _notebook),
    ("profile", "prof/baseline/load.json", _profile),
    ("profile-py-spy", "prof/baseline/speedscope.json", _py_spy),
]


@pytest.mark.parametrize(("planted", "write"), [w[1:] for w in WRITERS], ids=[w[0] for w in WRITERS])
def test_no_writer_writes_through_a_hard_link(tmp_path, secret, capsys, one_figure, planted, write):
    _results(tmp_path / "res")
    _hard_link(tmp_path / planted, secret)
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / planted).parent.iterdir()}
    try:
        code, _, err = write(tmp_path, capsys)
        assert code == 2
        line = _one_line(err)
    except ResultsError as exc:
        line = f"omni-loader: error: {exc}"
    assert line.startswith(f"omni-loader: error: {tmp_path / planted} is a hard link (one of 2 names of one file"), line
    assert secret.read_text() == SECRET
    after = {p: p.stat().st_mtime_ns for p in (tmp_path / planted).parent.iterdir()}
    assert {p: t for p, t in after.items() if p in before} == before  # refused before the first byte of any file
    assert all(p.stat().st_size == 0 for p in set(after) - set(before))  # at most an empty lock file was made


def test_a_file_a_tool_writes_by_name_is_moved_into_place_never_through_a_link(tmp_path, secret):
    """py-spy, torch.profiler and pstats write by name: into a private folder, moved into place; a link planted at
    the name while the tool writes is refused at the move, and the file it names is untouched."""
    from omni_loader.safe_files import replaced

    target = tmp_path / "prof" / "baseline" / "speedscope.json"
    target.parent.mkdir(parents=True)
    with pytest.raises(ResultsError, match=f"^{target} is a hard link"):
        with replaced(target) as written:
            assert written.name == target.name and oct(written.parent.stat().st_mode & 0o777) == "0o700"
            written.write_text("{}")  # the tool writes
            _hard_link(target, secret)  # planted meanwhile
    assert secret.read_text() == SECRET and os.listdir(target.parent) == [target.name]  # no private folder left
    target.unlink()
    with replaced(target) as written:
        written.write_text("{}")
    assert target.read_text() == "{}" and os.listdir(target.parent) == [target.name]
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_timeline_refuses_a_linked_out_folder_before_writing(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "tl").symlink_to(elsewhere)
    code, _, err = _timeline(tmp_path, capsys)
    assert code == 2 and _one_line(err).startswith(f"omni-loader: error: {tmp_path / 'tl'} is a symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_the_writers_still_write_in_place(tmp_path, capsys, one_figure):
    _results(tmp_path / "res")
    assert _report(tmp_path, capsys)[0] == 0
    assert _timeline(tmp_path, capsys)[0] == 0 and (tmp_path / "tl" / "gantt.png").stat().st_size > 1000
    assert _compare(tmp_path, capsys)[0] in (0, 1) and (tmp_path / "cmp" / "compare.json").is_file()
    assert _pack(tmp_path, capsys)[0] == 0
    assert oct((tmp_path / "sent" / "res.tar.gz").stat().st_mode & 0o777) == "0o644"
    _audit(tmp_path, capsys)
    assert (tmp_path / "audit" / "audit.md").is_file()


# --------------------------------------------------------------------------- lost results


def test_a_runs_csv_replaced_while_a_benchmark_runs_is_noticed_and_its_rows_refused(tmp_path, capsys, one_figure):
    from omni_loader.results.lifecycle import recording
    from omni_loader.results.metadata import now_iso
    from omni_loader.results.suite import Record

    def now(rows):
        return [{**row, "run_started": now_iso(precise=True), "run_ended": now_iso(precise=True)} for row in rows]

    other = _results(tmp_path / "other")  # an earlier benchmark of the same plan: its rows match it
    out = tmp_path / "res"
    with writer_lock(out):
        with pytest.raises(ResultsError) as exc:
            with recording(out, "load", Record(_record(status="running", started_at=now_iso()))) as rec:
                rec.ran(now(_rows(0)))
                os.replace(other / RUNS_FILE, out / RUNS_FILE)  # the other benchmark's runs.csv moved over ours
                rec.ran(now(_rows(1)))
    assert str(exc.value).startswith(f"{out / RUNS_FILE} is no longer the file this benchmark appends to: it was "
                                     "replaced while the benchmark ran")
    check = check_results(out)
    assert check.findings[0] == "4 runs from outside the benchmark's time ignored"
    assert check.problems[0].startswith("4 runs of runs.csv were not run by the benchmark that planned them (run 0 "
                                        "started at 2025-03-14T10:01:00.000+00:00, before benchmark load did (")
    assert len(check.frame) == 0 and check.missing_runs == (0, 1, 2, 3)
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and "integrity problem" in _one_line(err)


@pytest.mark.slow
def test_out_of_memory_while_drawing_the_report_leaves_it_not_drawn_until_report_draws_it(tiny_snapshot, tmp_path,
                                                                                          capsys, one_figure):
    """The report's drawing is recorded: out of memory in it (matplotlib, OpenBLAS) left metadata.json "complete"
    without report.md and nothing said so; now metadata.json says the report was not drawn, the integrity check
    names it, and ``omni-loader report DIR`` draws it and records it drawn."""
    import omni_loader.reporting.report as report
    from omni_loader.results.suite import benchmark, read_metadata

    drawn = report._figures

    def out_of_memory(check, comps):
        raise MemoryError

    report._figures = out_of_memory  # restored by one_figure's monkeypatch when the test ends
    out = tmp_path / "res"
    code, _, err = _cli(capsys, "reproduce", "--checkpoint", tiny_snapshot, "--warmup", "0", "--runs", "2",
                        "--in-process", "--out", out)
    line = err.strip().splitlines()[-1]
    assert code == 2 and line.startswith("omni-loader: error: out of memory in test_hostile_writes (MemoryError; "
                                         f"report.md was not drawn: draw it with omni-loader report {out}): "), err
    metadata = read_metadata(out)
    assert benchmark(metadata, "load")["status"] == "complete" and not (out / "report.md").exists()
    assert metadata["report"]["status"] == "not drawn"
    check = check_results(out)
    assert check.findings == ["report not drawn"]
    assert check.problems[0].startswith(f"every benchmark of {out} is complete, but its report was not drawn from "
                                        "their runs: drawing it began at ")
    assert check.problems[0].endswith(f"never ended (out of memory, or the process was killed); draw it with: "
                                      f"omni-loader report {out}")
    report._figures = drawn
    code, stdout, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 0 and stdout == f"report: {out / 'report.md'}\n", err
    assert "report not drawn" not in (out / "report.md").read_text()  # the report does not say it is missing
    assert read_metadata(out)["report"]["status"] == "drawn" and check_results(out).ok
    (out / "report.md").unlink()  # removed by hand: named too
    assert check_results(out).problems[0].endswith(f"report.md was removed after it was drawn; draw it with: "
                                                   f"omni-loader report {out}")


@pytest.mark.parametrize(("started", "ended", "why"), [
    ("2025-03-14T09:59:00.000+00:00", None, "before benchmark load did"),
    (None, "2025-03-14T10:07:00.000+00:00", "after benchmark load did"),
    ("2025-03-14T10:01:30.000+00:00", "2025-03-14T10:01:20.000+00:00", "before it started"),
    ("yesterday", None, "stamps are not times"),
])
def test_rows_stamped_outside_their_benchmark_are_refused(tmp_path, started, ended, why):
    out = _results(tmp_path / "res")
    rows = (out / RUNS_FILE).read_text()
    run = [line for line in rows.splitlines() if line.startswith("2,")]
    for line in run:
        fields = line.split(",")
        fields[-2], fields[-1] = started or fields[-2], ended or fields[-1]
        rows = rows.replace(line, ",".join(fields))
    (out / RUNS_FILE).write_text(rows)
    check = check_results(out)
    assert check.findings == ["1 run from outside the benchmark's time ignored", "1 planned run missing"]
    assert why in check.problems[0] and check.missing_runs == (2,)


# --------------------------------------------------------------------------- numbers no clock gives


@pytest.mark.parametrize(("phases", "total", "why"), [
    ({"buffer_discovery": ("total", 5.0)}, None, "buffer_discovery took 5 s, longer than total (0.52 s)"),
    ({"construct": ("total", 0.3), "post_load": ("total", 0.3)}, None, "leaf phases add up to 0.6 s, its total is 0.52"),
    ({"weight_loading": ("total", 0.2), "load_parameters": ("weight_loading", 0.25)}, None,
     "load_parameters took 0.25 s, longer than weight_loading (0.2 s), which encloses it"),
    ({"buffer_discovery": ("total", 0.1)}, 1e9, "longer than a day"),
])
def test_finite_but_absurd_seconds_and_a_total_below_its_phases_are_refused(tmp_path, capsys, one_figure, phases,
                                                                           total, why):
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": {"load": _record()}})
    bad = _rows(2, phases)
    if total is not None:
        bad[0]["seconds"] = total
    append_rows(out, [*_rows(0), *_rows(1), *bad, *_rows(3)])
    check = check_results(out)
    assert check.findings == ["1 run with absurd seconds ignored", "1 planned run missing"]
    assert why in check.problems[0] and "run ids 2)" in check.problems[0] and check.missing_runs == (2,)
    code, _, err = _cli(capsys, "report", out, "--quiet", "--strict")
    assert code == 1 and "absurd" in _one_line(err)


def test_phases_within_their_total_and_a_reference_copy_outside_it_are_fine(tmp_path):
    out = tmp_path / "res"
    write_metadata(out, {"benchmarks": {"load": _record()}})
    nested = {"construct": ("total", 0.2), "weight_loading": ("total", 0.25), "load_parameters": ("weight_loading", 0.2),
              "load_buffers": ("weight_loading", 0.05), "reference_copy": ("", 3.0)}
    append_rows(out, [row for i in range(4) for row in _rows(i, nested)])
    assert check_results(out).ok


# --------------------------------------------------------------------------- compare: what it cannot compare, named


def _other_variant_set(out: Path) -> Path:
    rename = {"optimized": "assign"}
    plan = [{**e, "variant": rename.get(e["variant"], e["variant"])} for e in _plan(4)]
    write_metadata(out, {"benchmarks": {"load": _record(plan=plan, spec={"variants": ["baseline", "assign"]})}})
    append_rows(out, [{**r, "variant": rename.get(r["variant"], r["variant"])} for i in range(4) for r in _rows(i)])
    return out


def _startup_benchmark(out: Path) -> Path:
    plan = [{**e, "source": "server"} for e in _plan(4)]
    write_metadata(out, {"benchmarks": {"startup": {**_record(plan=plan), "kind": "serve-ab"}}})
    append_rows(out, [{"run_id": e["run_id"], "variant": e["variant"], "warmup": False, "order": e["order"],
                       "phase": "startup_to_health", "seconds": 3.0 + e["run_id"], "source": "server", "status": "ok"} for e in plan])
    return out


def test_compare_names_another_variant_set_and_a_startup_benchmark_for_what_they_are(tmp_path, capsys):
    from omni_loader.compare.reproductions import compare_results

    anchor = _results(tmp_path / "anchor")
    result = compare_results([anchor, _other_variant_set(tmp_path / "assign"), _startup_benchmark(tmp_path / "startup")],
                             against=anchor)
    checks = {(c.entry, c.kind, c.what): c.message for c in result.checks}
    assert sorted(checks) == [("assign", "note", "variants"), ("startup", "note", "benchmark")], checks
    assert checks[("assign", "note", "variants")].startswith("measures baseline and assign, anchor baseline and "
                                                             "optimized")
    assert checks[("startup", "note", "benchmark")].startswith("startup is a startup benchmark (serve-ab): it times "
                                                               "servers starting to /health, not loads")
    assert not any(r.reason for r in result.against_rows)  # nothing said to differ


# --------------------------------------------------------------------------- smaller: pack and compare agree, metadata types


def test_pack_refuses_what_its_compare_refuses_and_compare_reads_what_pack_writes(tmp_path, capsys, monkeypatch):
    import omni_loader.results.archive as archive

    damaged = _results(tmp_path / "damaged")
    (damaged / RUNS_FILE).write_text((damaged / RUNS_FILE).read_text().replace("run_id,", "rid,", 1))
    code, _, err = _cli(capsys, "compare", damaged)
    refusal = _one_line(err)
    assert code == 2 and "runs.csv lacks columns ['run_id']" in refusal
    code, _, err = _cli(capsys, "pack", damaged)
    assert code == 2 and _one_line(err) == refusal and not (tmp_path / "damaged.tar.gz").exists()

    monkeypatch.setattr(archive, "MAX_UNPACKED_BYTES", 100)  # compare's limit on unpacking, small
    good = _results(tmp_path / "good")
    code, _, err = _cli(capsys, "pack", good)
    assert code == 2 and "compare refuses an archive that unpacks to more than" in _one_line(err)
    monkeypatch.undo()
    for fmt in ("tar.gz", "zip"):
        assert _cli(capsys, "pack", good, "--out", tmp_path / f"good.{fmt}")[0] == 0
        code, out, err = _cli(capsys, "compare", tmp_path / f"good.{fmt}", good)
        assert code == 0 and f"good.{fmt} (archive)" in out, err


@pytest.mark.parametrize(("edit", "key", "shown"), [
    (lambda m: {**m, "benchmarks": []}, "benchmarks", "a list ([]), not an object"),
    (lambda m: _member(m, spec="abc"), "benchmarks.load.spec", 'a string ("abc"), not an object'),
    (lambda m: _member(m, spec={"runs": "3"}), "benchmarks.load.spec.runs", 'a string ("3"), not an integer'),
    (lambda m: _member(m, spec={"variants": "baseline"}), "benchmarks.load.spec.variants", 'a string ("baseline")'),
    (lambda m: _member(m, environment="x"), "benchmarks.load.environment", 'a string ("x"), not an object'),
    (lambda m: _member(m, checkpoint=5), "benchmarks.load.checkpoint", "an integer (5), not an object"),
    (lambda m: _member(m, environment={"machine": 5}), "benchmarks.load.environment.machine", "an integer (5), not"),
    (lambda m: _member(m, status=[]), "benchmarks.load.status", "a list ([]), not a string"),
    (lambda m: _member(m, started_at=5), "benchmarks.load.started_at", "an integer (5), not a string"),
    (lambda m: {"schema_version": 2, **_member(m)["benchmarks"]["load"], "serve_ab": []}, "serve_ab", "a list"),
])
def test_metadata_fields_of_the_wrong_type_are_one_line_naming_the_file_and_key(tmp_path, capsys, edit, key, shown):
    out = _results(tmp_path / "res")
    meta = json.loads((out / METADATA_FILE).read_text())
    (out / METADATA_FILE).write_text(json.dumps(edit(meta)))
    for command in (["report", out, "--quiet"], ["compare", out], ["pack", out]):
        code, _, err = _cli(capsys, *command)
        assert code == 2, command
        assert _one_line(err).startswith(f"omni-loader: error: {out / METADATA_FILE}: {key} is {shown}"), command


def _member(metadata: dict, **fields) -> dict:
    return {**metadata, "benchmarks": {"load": {**metadata["benchmarks"]["load"], **fields}}}



def _commands_with_out(parser=None) -> dict[str, object]:
    """Every subcommand of the parser that takes ``--out`` (name -> its parser), read from the parser itself."""
    import argparse

    from omni_loader.cli import build_parser

    sub = next(a for a in (parser or build_parser())._actions if isinstance(a, argparse._SubParsersAction))
    return {name: p for name, p in sub.choices.items() if any("--out" in a.option_strings for a in p._actions)}


def test_every_command_refuses_a_linked_out_before_it_runs(tmp_path, capsys, monkeypatch):
    """A symbolic link as ``--out`` is refused in one line by every command that has one, before the command runs
    (here a stand-in for it that would write through the link)."""
    import omni_loader.cli as cli

    commands = _commands_with_out()
    assert {"reproduce", "serve-ab", "compare", "timeline", "profile", "traversal", "audit", "synth", "pack"} <= set(commands)
    real = cli.build_parser

    def parser_of_stand_ins():
        parser = real()
        for p in _commands_with_out(parser).values():
            p.set_defaults(func=lambda args: (Path(args.out) / "written").write_text("x") and 0)
        return parser

    monkeypatch.setattr(cli, "build_parser", parser_of_stand_ins)
    for name, p in commands.items():
        elsewhere = tmp_path / f"elsewhere-{name}"
        elsewhere.mkdir()
        link = tmp_path / f"out-{name}"
        link.symlink_to(elsewhere)
        argv = [name]
        for action in p._actions:  # what the command requires, given a harmless value
            if not action.option_strings:
                argv.append(str(tmp_path / "missing"))
            elif action.required and "--out" not in action.option_strings:
                argv += [action.option_strings[0], action.choices[0] if action.choices else "1"]
        code, _, err = _cli(capsys, *argv, "--out", link)
        assert code == 2, (name, err)
        assert _one_line(err) == (f"omni-loader: error: {link} is a symbolic link (to {elsewhere}): omni-loader writes "
                                  "--out in place, never through a link; name the folder (or file) it points to, or "
                                  "remove the link, and run again"), name
        assert list(elsewhere.iterdir()) == [], name


@pytest.mark.parametrize("linked", ["refs/main", "refs"])
def test_synth_hub_cache_refuses_a_linked_refs_main(tiny_snapshot, tmp_path, linked):
    """``synth --hub-cache`` writes ``refs/main`` in place: a link planted there (the file or its folder) is
    refused in one line, and the file it points to is untouched."""
    from omni_loader.token2wav.checkpoint import place_in_hub_cache

    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "main").write_text(SECRET)
    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-Omni-3B"
    (repo / "refs").mkdir(parents=True)
    if linked == "refs":
        (repo / "refs").rmdir()
        (repo / "refs").symlink_to(secret)
    else:
        (repo / "refs" / "main").symlink_to(secret / "main")
    with pytest.raises(ResultsError, match="is a symbolic link"):
        place_in_hub_cache(tiny_snapshot, tmp_path / "hub")
    assert (secret / "main").read_text() == SECRET


def test_pack_refuses_a_directory_whose_writer_is_still_running(tmp_path, capsys):
    """pack of a directory a live process still writes (its writer lock held) is one line, and no archive; once the
    writer has ended, or when the lock names a process that died, it packs."""
    import socket

    _results(tmp_path / "res")
    with writer_lock(tmp_path / "res"):
        code, _, err = _pack(tmp_path, capsys)
        assert code == 2 and f"is being written by process {os.getpid()}" in _one_line(err)
        assert not (tmp_path / "sent" / "res.tar.gz").exists()
    (tmp_path / "res" / LOCK_FILE).write_text(json.dumps({"pid": 2**22 + 1, "host": socket.gethostname()}))
    assert _pack(tmp_path, capsys)[0] == 0 and (tmp_path / "sent" / "res.tar.gz").is_file()


def test_a_results_sweep_without_a_column_is_one_line_naming_file_and_column(tmp_path, capsys):
    """``audit --source ... --results DIR`` whose traversal.csv lacks a column the cost is fitted from: one line
    naming the file and the column (it was ``KeyError: 'experiment'``)."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("def f(model):\n    for b in model.named_buffers():\n"
                                           "        model.state_dict()\n")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "traversal.csv").write_text("source,N,B,x,repeat,seconds\nsynthetic,10,1,10,0,0.1\n")
    code, _, err = _cli(capsys, "audit", "--source", tmp_path / "src", "--modules", "100", "--items", "10",
                        "--results", tmp_path / "sweep", "--no-cache", "--jobs", "1")
    assert code == 2 and _one_line(err).startswith(
        f"omni-loader: error: --results {tmp_path / 'sweep' / 'traversal.csv'}: no 'experiment' column")
