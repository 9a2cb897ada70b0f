"""Hostile input, round two (issue 37): files and results.

Every file the kit writes goes through :mod:`omni_loader.results.safe_files` (no symbolic link, no hard
link, checked before the first byte); a benchmark notices that its runs.csv was replaced; rows from outside
a benchmark's time span, absurd durations and totals below their phases are integrity problems; compare
names what it cannot compare; pack and compare agree; metadata.json of the wrong types is one line.
Results directories are written by hand here (no model is loaded): these tests run in-process, in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omni_loader.cli import main
from omni_loader.errors import ResultsError
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
