"""Results you can trust after anything (issue 10): interrupt, resume, a second writer, damaged files.

Each test drives the real ``omni-loader`` in subprocesses on the tiny model, as a user would.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omni_loader.results.suite import METADATA_FILE, benchmark, read_metadata
from omni_loader.results.rows import REJECTED_FILE, RUNS_FILE
from omni_loader.results.integrity import check_results
from omni_loader.results.lock import lock_holder
from omni_loader.results.spec import BenchmarkSpec
from omni_loader.bench.runner import run_benchmark

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)

REPO = Path(__file__).resolve().parent.parent


def omni(*args: str | os.PathLike[str], env: dict[str, str] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "omni_loader", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, check=False, env={**os.environ, **(env or {})})


def cli(capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    """``omni-loader ARGS`` in this process (``cli.main``): a refusal or a read needs no 3 s of imports in a
    child. What the user sees is the same: the exit status, stdout and stderr."""
    from omni_loader.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["omni-loader", *map(str, args)], code, out, err)


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("omni-loader: error: "), stderr
    return lines[0]


def saved_run_ids(out: Path) -> set[str]:
    try:
        with (out / RUNS_FILE).open(newline="") as fh:
            return {row["run_id"] for row in csv.DictReader(fh)}
    except (OSError, csv.Error, KeyError):
        return set()


def totals_per_run(out: Path) -> dict[int, int]:
    """run_id -> number of `total` rows (a run recorded twice has two)."""
    counts: dict[int, int] = {}
    with (out / RUNS_FILE).open(newline="") as fh:
        for row in csv.DictReader(fh):
            if row["phase"] in ("total", "startup_to_health"):
                counts[int(row["run_id"])] = counts.get(int(row["run_id"]), 0) + 1
    return counts


def opening(out: Path) -> str:
    return (out / "report.md").read_text().splitlines()[2]


def small_benchmark(snapshot: Path, out: Path, **spec) -> Path:
    """A finished benchmark made in this process (fast): 0 warm-ups, 1 run each unless told."""
    fields = {"warmup": 0, "runs": 1, "workers": "in-process", **spec}
    return run_benchmark(BenchmarkSpec.from_flat({"checkpoint": str(snapshot), **fields}), out, progress=False)


@pytest.fixture(scope="module")
def finished_load(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's one finished load benchmark (1 run a side, order abba, layout transformers), read-only: a
    test that writes works on its own copy (``copied``). Made once instead of once per test that starts from one."""
    return small_benchmark(tiny_snapshot, tmp_path_factory.mktemp("load") / "res", order="abba",
                           layout="transformers")


def copied(results: Path, tmp_path: Path) -> Path:
    """A test's own copy of a shared results directory, at ``tmp_path/res``."""
    return Path(shutil.copytree(results, tmp_path / "res"))


# --------------------------------------------------------------------------- interrupt, then --resume --out DIR


@pytest.mark.subprocess
@pytest.mark.slow
def test_interrupted_reproduce_resumes_with_resume_and_out_alone(tmp_path, capsys):
    out = tmp_path / "res"
    options = ["--size", "tiny", "--warmup", "1", "--runs", "4", "--order", "abba", "--aa", "--reference-copy"]
    proc = subprocess.Popen([sys.executable, "-m", "omni_loader", "reproduce", *options, "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Interrupted once its third run is saved, however long the start takes (minutes on a busy machine: the
        # imports and the fork server's preload); the deadline only catches a hang, and fails here. The 17 runs
        # still to go leave the signal seconds to arrive, even on a machine that starves this process a while.
        limit = 600
        deadline = time.monotonic() + limit
        while len(saved_run_ids(out)) < 3:
            assert proc.poll() is None, ("the benchmark ended before it could be interrupted", proc.communicate())
            assert time.monotonic() < deadline, f"no third run saved in {out} within {limit} s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    hint = stdout.strip().splitlines()[-1]
    assert hint.startswith("interrupted: ") and hint.endswith(f"continue with: omni-loader reproduce --resume --out {out}")
    meta = benchmark(read_metadata(out), "load")
    assert meta["status"] == "interrupted" and len(meta["plan"]) == 2 * (1 + 4) * 2  # A/B then A/A
    assert 3 <= len(saved_run_ids(out)) < len(meta["plan"])

    resumed = cli(capsys, "reproduce", "--resume", "--out", out)  # exactly what the hint says
    assert resumed.returncode == 0, resumed.stderr
    assert totals_per_run(out) == {i: 1 for i in range(20)}  # every planned run, once
    check = check_results(out)
    assert check.ok, check.problems
    assert BenchmarkSpec.from_metadata(check.suite).runs == 4 and check.benchmark("load")["spec"]["aa"] is True
    assert ("4 + 4 measured runs after 1 warm-up per variant, order abba; status complete; integrity checks "
            "found nothing wrong.") in opening(out)
    assert set(check.frame[check.frame["source"] == "aa"]["variant"]) == {"aa-1", "aa-2"}
    assert "reference_copy" in set(check.frame["phase"])
    strict = cli(capsys, "report", out, "--quiet", "--strict")
    assert strict.returncode == 0, strict.stderr


@pytest.mark.slow
def test_resume_refuses_contradicting_options_by_name_and_accepts_agreeing_ones(finished_load, tiny_snapshot, tmp_path,
                                                                                capsys):
    out = copied(finished_load, tmp_path)  # order abba, 1 run a side
    before = {name: (out / name).read_bytes() for name in (RUNS_FILE, METADATA_FILE)}

    refused = cli(capsys, "reproduce", "--resume", "--out", out, "--runs", "2", "--order", "alternate", "--in-process")
    assert refused.returncode == 2
    line = one_error_line(refused.stderr)
    assert "--runs 2 (saved: 1)" in line and "--order alternate (saved: abba)" in line
    assert "--workers" not in line  # --in-process agrees with the saved spec
    assert refused.stdout == ""  # refused before anything else
    assert {name: (out / name).read_bytes() for name in before} == before  # nothing touched

    other = cli(capsys, "reproduce", "--resume", "--out", out, "--size", "full")
    assert other.returncode == 2 and f"--size full (saved: {tiny_snapshot})" in one_error_line(other.stderr)

    agreed = cli(capsys, "reproduce", "--resume", "--out", out, "--runs", "1", "--warmup", "0", "--order", "abba",
                  "--checkpoint", tiny_snapshot, "--workers", "in-process")
    assert agreed.returncode == 0, agreed.stderr
    assert (out / RUNS_FILE).read_bytes() == before[RUNS_FILE]  # nothing was missing: nothing ran
    assert benchmark(read_metadata(out), "load")["resumed_at"]


# --------------------------------------------------------------------------- one writer


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_second_writer_is_refused_while_the_first_finishes_unharmed(tmp_path, capsys):
    out = tmp_path / "res"
    first = subprocess.Popen([sys.executable, "-m", "omni_loader", "reproduce", "--size", "tiny", "--warmup", "0",
                              "--runs", "2", "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and first.poll() is None and not (
                (out / METADATA_FILE).is_file() and (lock_holder(out) or {}).get("pid") == first.pid):
            time.sleep(0.02)
        assert first.poll() is None, first.communicate()
        os.kill(first.pid, signal.SIGSTOP)  # the first writer holds the lock for as long as this test needs
        try:
            for second in (cli(capsys, "reproduce", "--resume", "--out", out),  # in this process: a refusal
                           cli(capsys, "reproduce", "--size", "tiny", "--runs", "2", "--out", out)):
                assert second.returncode == 2
                line = one_error_line(second.stderr)
                assert line.startswith(f"omni-loader: error: {out} is being written by process {first.pid} on ")
                assert "one writer per results directory" in line
            reader = cli(capsys, "report", out, "--quiet", "--strict")  # readers take no lock
            assert reader.returncode == 1 and "still being written" in opening(out)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        _, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, stderr
    assert totals_per_run(out) == {i: 1 for i in range(4)}
    check = check_results(out)
    assert check.ok, check.problems
    assert lock_holder(out) is None  # released
    assert "2 + 2 measured runs" in opening(out)


# --------------------------------------------------------------------------- damaged files


@pytest.mark.slow
def test_a_duplicated_run_and_a_torn_last_line_are_reported_excluded_then_repaired(tiny_snapshot, tmp_path, capsys):
    out = small_benchmark(tiny_snapshot, tmp_path / "res", runs=2, order="alternate")  # runs 0-3: B O B O
    lines = (out / RUNS_FILE).read_text().splitlines(keepends=True)
    run_1 = [line for line in lines if line.startswith("1,")]
    with (out / RUNS_FILE).open("a", newline="") as fh:
        fh.write("".join(run_1))  # run 1 a second time, as two writers left it
        fh.write(run_1[0][:40])  # and once more, cut short by a crash

    report = cli(capsys, "report", out, "--quiet", "--strict")
    assert report.returncode == 1
    line = one_error_line(report.stderr)
    assert "is torn" in line and "run ids 1" in line
    assert ("2 + 1 measured runs after 0 warm-ups per variant, order alternate; status complete; 1 torn row "
            "ignored; 1 duplicated run ignored; 1 planned run missing.") in opening(out)
    check = check_results(out)
    assert sorted(set(check.frame["run_id"])) == [0, 2, 3] and check.missing_runs == (1,)
    assert len(check.frame) == len(lines) - 1 - len(run_1)

    resumed = cli(capsys, "reproduce", "--resume", "--out", out)  # sets the bad rows aside, runs run 1 again
    assert resumed.returncode == 0, resumed.stderr
    assert totals_per_run(out) == {0: 1, 1: 1, 2: 1, 3: 1}
    assert len((out / REJECTED_FILE).read_text().splitlines()) == 1 + 2 * len(run_1) + 1
    assert cli(capsys, "report", out, "--quiet", "--strict").returncode == 0
    assert f"2 + 2 measured runs after 0 warm-ups per variant, order alternate; status complete; " \
           f"{2 * len(run_1) + 1} rows set aside by --resume (runs.rejected.csv)." in opening(out)


@pytest.mark.slow
def test_a_garbage_speaker_dictionary_is_one_line_and_exit_2(tiny_snapshot, tmp_path, capsys, monkeypatch):
    snap = Path(shutil.copytree(tiny_snapshot, tmp_path / "snap"))
    (snap / "spk_dict.pt").write_bytes(bytes(range(256)) * 4)
    proc = cli(capsys, "load", "--checkpoint", snap, "--device", "cpu")
    assert proc.returncode == 2 and proc.stdout == ""
    line = one_error_line(proc.stderr)
    assert line.startswith(f"omni-loader: error: cannot read speaker dictionary {snap / 'spk_dict.pt'} (")
    assert "restore spk_dict.pt" in line and "weights_only" not in line
    monkeypatch.setenv("OMNI_LOADER_DEBUG", "1")
    debug = cli(capsys, "load", "--checkpoint", snap, "--device", "cpu")
    monkeypatch.delenv("OMNI_LOADER_DEBUG")
    assert debug.returncode == 2 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line
    flag = cli(capsys, "load", "--checkpoint", snap, "--device", "cpu", "--debug")
    assert flag.returncode == 2 and flag.stderr.count("Traceback") == 1


def test_a_damaged_metadata_file_is_one_line(tmp_path, capsys):
    (tmp_path / METADATA_FILE).write_text('{"schema_version": 2, "kind": ')
    proc = cli(capsys, "report", tmp_path)
    assert proc.returncode == 2
    assert f"{tmp_path / METADATA_FILE} is not valid JSON" in one_error_line(proc.stderr)


# --------------------------------------------------------------------------- serve-ab --resume

HEALTHY = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
print("Buffer discovery took 1.5 ms", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.subprocess
def test_serve_ab_resume_takes_its_spec_from_the_directory(tmp_path, capsys):
    port = _free_port()
    cmd = shlex.join([sys.executable, "-c", HEALTHY, str(port)])
    out = tmp_path / "ab"
    made = cli(capsys, "serve-ab", "--baseline-cmd", cmd, "--optimized-cmd", cmd, "--health-url",
               f"http://127.0.0.1:{port}/health", "--warmup", "0", "--runs", "2", "--grace", "1", "--out", out)
    # (made in this process: the directory to resume is set-up; the resume below is the command as a user runs it)
    assert made.returncode == 0, made.stderr
    # As a crash would leave it: runs 2 and 3 lost, run 1's last row torn, status still running.
    lines = (out / RUNS_FILE).read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(("2,", "3,"))]
    (out / RUNS_FILE).write_text("".join(kept[:-1]) + kept[-1][:30])
    meta = json.loads((out / METADATA_FILE).read_text())
    meta["benchmarks"]["startup"]["status"] = "running"
    (out / METADATA_FILE).write_text(json.dumps(meta))
    assert not check_results(out).ok

    refused = cli(capsys, "serve-ab", "--resume", "--out", out, "--runs", "3", "--health-url",
                  f"http://127.0.0.1:{port}/health")  # a refusal: in this process
    assert refused.returncode == 2
    line = one_error_line(refused.stderr)
    assert "--runs 3 (saved: 2)" in line and "--health-url" not in line

    resumed = omni("serve-ab", "--resume", "--out", out)
    assert resumed.returncode == 0, resumed.stderr
    assert totals_per_run(out) == {0: 1, 1: 1, 2: 1, 3: 1}
    check = check_results(out)
    assert check.ok, check.problems
    assert check.benchmark("startup")["status"] == "complete" and check.benchmark("startup")["runs_ok"] == 4
    run_1 = len([line for line in kept if line.startswith("1,")])  # run 1 lost its last row: set aside whole
    assert check.notes == (f"{run_1} row{'' if run_1 == 1 else 's'} set aside by --resume (runs.rejected.csv)",)


# --------------------------------------------------------------------------- a suite: load and startup benchmarks


def _startup_beside(out: Path, runs: int = 2) -> Path:
    """serve-ab's startup benchmark (a stand-in server) added to the load benchmark in ``out``."""
    from omni_loader.startup.serve_ab import serve_ab

    port = _free_port()
    cmd = shlex.join([sys.executable, "-c", HEALTHY, str(port)])
    return serve_ab(cmd, cmd, f"http://127.0.0.1:{port}/health", out, warmup=0, runs=runs, grace=1, progress=False)


@pytest.fixture(scope="module")
def finished_suite(finished_load: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's load benchmark with a finished startup benchmark beside it, read-only (tests cut their copy)."""
    return _startup_beside(copied(finished_load, tmp_path_factory.mktemp("suite")))


def _cut_startup(out: Path, keep: int) -> None:
    """As a crash during the startup benchmark leaves it: only its first ``keep`` runs, status interrupted."""
    meta = json.loads((out / METADATA_FILE).read_text())
    startup = meta["benchmarks"]["startup"]
    ids = [entry["run_id"] for entry in startup["plan"]]
    lines = (out / RUNS_FILE).read_text().splitlines(keepends=True)
    (out / RUNS_FILE).write_text("".join(line for line in lines if not any(line.startswith(f"{i},")
                                                                          for i in ids[keep:])))
    startup["status"] = "interrupted"
    (out / METADATA_FILE).write_text(json.dumps(meta))


@pytest.mark.slow
@pytest.mark.subprocess
def test_reproduce_resume_continues_the_startup_benchmark_of_its_suite(finished_suite, tmp_path):
    out = copied(finished_suite, tmp_path)
    suite = read_metadata(out)
    assert suite["schema_version"] == 3 and list(suite["benchmarks"]) == ["load", "startup"]
    assert [e["run_id"] for e in benchmark(suite, "startup")["plan"]] == [2, 3, 4, 5]  # after the load runs
    _cut_startup(out, keep=1)
    check = check_results(out)
    assert check.missing_runs == (3, 4, 5)
    assert check.problems[-1].endswith(f"(status interrupted: continue with omni-loader reproduce --resume --out {out})")

    resumed = omni("reproduce", "--resume", "--out", out)  # exactly what the check says
    assert resumed.returncode == 0, resumed.stderr
    assert totals_per_run(out) == {i: 1 for i in range(6)}
    check = check_results(out)
    assert check.ok, check.problems
    assert [check.benchmark(name)["status"] for name in ("load", "startup")] == ["complete", "complete"]
    assert check.benchmark("startup")["runs_ok"] == 4 and check.benchmark("startup")["resumed_at"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_schema_2_directory_is_read_resumed_and_rewritten_as_a_suite(finished_suite, tmp_path, capsys):
    """Before the suite, serve-ab's record sat under the load record's "serve_ab" key, and the spec was flat."""
    out = copied(finished_suite, tmp_path)  # its load benchmark's layout: transformers
    _cut_startup(out, keep=2)
    suite = json.loads((out / METADATA_FILE).read_text())
    load, startup = suite["benchmarks"]["load"], suite["benchmarks"]["startup"]
    spec = {k: v for k, v in load["spec"].items() if k != "load"} | load["spec"]["load"]
    startup["plan"] = [{k: v for k, v in e.items() if k != "source"} for e in startup["plan"]]  # as serve-ab wrote it
    (out / METADATA_FILE).write_text(json.dumps({"schema_version": 2, **load, "spec": spec, "serve_ab": startup}))
    assert check_results(out).missing_runs == (4, 5)
    assert BenchmarkSpec.from_metadata(read_metadata(out)).load.layout == "transformers"

    refused = cli(capsys, "reproduce", "--resume", "--out", out, "--layout", "vllm-omni")
    assert "--layout vllm-omni (saved: transformers)" in one_error_line(refused.stderr)
    resumed = omni("serve-ab", "--resume", "--out", out)  # the startup benchmark alone
    assert resumed.returncode == 0, resumed.stderr
    suite = read_metadata(out)
    assert suite["schema_version"] == 3 and list(suite["benchmarks"]) == ["load", "startup"]
    assert suite["benchmarks"]["load"]["spec"]["layout"] == "transformers"  # the load record as it was
    assert check_results(out).ok and benchmark(suite, "startup")["status"] == "complete"


# --------------------------------------------------------------------------- a sequential design's look, interrupted


@pytest.mark.slow
def test_a_look_interrupted_is_read_on_resume_before_any_new_run(tiny_snapshot, tmp_path, capsys):
    """Killed while reading its first look (every run it reads ended), a sequential benchmark's ``--resume`` reads
    that look first: settled, it stops there with no run beyond the look, and ``report --strict`` finds nothing
    wrong (one run more was made, then cut from the plan as 14 rows off it)."""
    from omni_loader.results.planner import FIRST_LOOK

    def interrupted(out, n, alpha):
        raise KeyboardInterrupt

    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=FIRST_LOOK + 2, workers="in-process")
    out = tmp_path / "res"
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(spec, out, progress=False, look=interrupted)
    looked = 2 * (FIRST_LOOK + 1)  # a warm-up and five runs a side
    assert len(saved_run_ids(out)) == looked and benchmark(read_metadata(out), "load")["status"] == "interrupted"

    run_benchmark(spec, out, resume=True, progress=False, look=lambda out, n, alpha: (True, "settled"))
    record = benchmark(read_metadata(out), "load")
    assert record["status"] == "complete" and record["sequential"]["stopped_at"] == FIRST_LOOK
    assert len(saved_run_ids(out)) == looked == len(record["plan"])
    check = check_results(out)
    assert not check.problems, check.problems
    strict = cli(capsys, "report", out, "--quiet", "--strict")
    assert strict.returncode == 0, strict.stderr
