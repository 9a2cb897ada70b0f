"""The A/B runner: run order, on-disk rows, killed workers, interrupts and --resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from omni_loader.token2wav.options import LoadOptions
from omni_loader.results.suite import benchmark, read_metadata
from omni_loader.results.rows import read_runs
from omni_loader.results.spec import BenchmarkSpec
from omni_loader.results.planner import plan_runs
from omni_loader.bench.runner import run_benchmark
from omni_loader.bench.worker import RUN_DIR_PREFIX

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)

REPO = Path(__file__).resolve().parent.parent


def _letters(plan, warmup):
    return "".join(r.variant[0].upper() for r in plan if r.warmup == warmup)


def test_plan_alternates_after_warmups():
    plan = plan_runs(warmup=1, runs=3, order="alternate")
    assert [r.run_id for r in plan] == list(range(8))
    assert _letters(plan, True) == "BO"  # one warm-up of each variant, first
    assert all(r.warmup for r in plan[:2]) and not any(r.warmup for r in plan[2:])
    assert _letters(plan, False) == "BOBOBO"
    assert [r.order for r in plan[2:]] == [1, 1, 2, 2, 3, 3]


def test_plan_abba_and_shuffle():
    assert _letters(plan_runs(0, 4, "abba"), False) == "BOOBBOOB"
    assert _letters(plan_runs(0, 3, "abba"), False) == "BOOBBO"
    one = plan_runs(0, 5, "shuffle", seed=1)
    assert one == plan_runs(0, 5, "shuffle", seed=1)  # seeded: reproducible
    assert Counter(r.variant for r in one) == {"baseline": 5, "optimized": 5}
    letters = {_letters(plan_runs(0, 5, "shuffle", seed=s), False) for s in range(6)}
    assert len(letters) > 1  # the seed matters
    with pytest.raises(ValueError, match="--order"):
        plan_runs(1, 2, "random")


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_in_process_benchmark_rows(tiny_snapshot, tmp_path):
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=2, workers="in-process")
    out = run_benchmark(spec, tmp_path / "res", progress=False)
    frame = read_runs(out)
    assert sorted(frame["run_id"].unique()) == list(range(6))
    phases = set(frame["phase"])
    assert {"buffer_discovery", "weight_loading", "total", "construct", "load_parameters"} <= phases
    assert frame.groupby("run_id")["phase"].count().nunique() == 1  # one row per run and phase
    suite = read_metadata(out)
    assert list(suite) == ["schema_version", "benchmarks"] and list(suite["benchmarks"]) == ["load"]
    meta = benchmark(suite, "load")
    assert meta["status"] == "complete" and meta["warmup"] == 1 and meta["repeats"] == 2
    assert meta["order"] == "blocks" and len(meta["plan"]) == 6
    # what the renderers read of a load benchmark (report.md, compare)
    for key in ("kind", "spec", "plan", "status", "environment", "checkpoint", "model", "command_line", "warmup",
                "repeats", "order", "construct", "workers", "started_at", "finished_at"):
        assert key in meta, key
    assert meta["kind"] == "reproduce" and (meta["construct"], meta["workers"]) == ("resident", "in-process")
    assert meta["spec"]["load"] == {"layout": "vllm-omni", "device": "cpu", "dtype": "float32", "construct": "resident",
                                    "read": "lazy", "cache": "warm"}
    assert BenchmarkSpec.from_metadata(suite) == spec
    for key in ("torch", "transformers", "kit_version", "kit_commit", "cpu", "device_name"):
        assert key in meta["environment"]
    with pytest.raises(Exception, match="already used"):
        run_benchmark(spec, out, progress=False)


def _worker_pids(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "omni_loader.bench.worker" in cmd and marker in cmd:
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("workers", ["forkserver", "spawn"])
def test_killed_worker_is_recorded_and_the_rest_go_on(tiny_snapshot, tmp_path, workers):
    """Run 0's worker is stopped the moment it exists, then killed: it is known to be run 0 (no poller
    guessing which worker it saw) and cannot finish first."""
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=1, workers=workers)
    killed: list[int] = []

    def kill_run_0(run, pid: int) -> None:
        if run.run_id == 0:
            os.kill(pid, signal.SIGSTOP)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    out = run_benchmark(spec, tmp_path / "res", progress=False, on_start=kill_run_0)
    assert len(killed) == 1
    frame = read_runs(out)
    runs = frame.drop_duplicates("run_id").set_index("run_id")
    assert sorted(runs.index) == [0, 1]
    assert runs.loc[0, "status"] == "failed" and "signal 9" in runs.loc[0, "error"]
    assert runs.loc[1, "status"] == "ok" and runs.loc[1, "digest"].startswith("xxh3-128:")  # the next run, whole


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", ["forkserver", "spawn"])
def test_worker_timeout_kills_and_records(tiny_snapshot, tmp_path, workers):
    """Every worker is stopped (SIGSTOP) as it starts, so every one outlives the timeout: no race."""
    stopped: list[int] = []

    def stop(run, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)

    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=1, worker_timeout=1, workers=workers)
    frame = read_runs(run_benchmark(spec, tmp_path / "res", progress=False, on_start=stop))
    assert list(frame["status"]) == ["failed", "failed"]
    assert frame["error"].str.contains("--worker-timeout 1 s").all()
    for pid in stopped:  # killed and reaped, not left stopped
        assert not Path(f"/proc/{pid}").exists()


def test_the_default_worker_timeout_follows_the_slowest_warmup_and_says_so() -> None:
    """The default limit's rule and its sentence, on given numbers (no run is timed): before a warm-up the
    first-run limit, after it SLOWER_THAN_WARMUP times the slowest warm-up with SHORTEST_DEFAULT as floor,
    shown with three significant digits so that 1.25 s never reads as 1 s; a limit given is never explained."""
    from omni_loader.bench.runner import FIRST_RUN_LIMIT, SHORTEST_DEFAULT, SLOWER_THAN_WARMUP, Timeout

    killed = "worker killed after --worker-timeout 5 s"
    timeout = Timeout(None)
    assert timeout.seconds == FIRST_RUN_LIMIT
    assert timeout.explain(killed) == (f"worker killed after {FIRST_RUN_LIMIT:,.0f} s (the default: the limit for a "
                                       "run before any warm-up finished; set --worker-timeout)")
    timeout.saw_warmup(1.0)
    assert timeout.seconds == SHORTEST_DEFAULT  # ten times a 1 s warm-up is under the floor
    for warmup in (25.0, 30.0, 12.5):  # the slowest one counts
        timeout.saw_warmup(warmup)
    assert timeout.seconds == SLOWER_THAN_WARMUP * 30.0
    assert timeout.explain(killed) == (f"worker killed after {SLOWER_THAN_WARMUP * 30:,.0f} s (the default: "
                                       f"{SLOWER_THAN_WARMUP:g}× the slowest warm-up; set --worker-timeout)")
    assert timeout.explain("exit code 1") == "exit code 1"
    assert Timeout(5.0).explain(killed) == killed and Timeout(5.0).seconds == 5.0


def test_the_default_worker_timeout_shows_three_significant_digits(monkeypatch) -> None:
    from omni_loader.bench import runner

    monkeypatch.setattr(runner, "SHORTEST_DEFAULT", 1.0)
    monkeypatch.setattr(runner, "SLOWER_THAN_WARMUP", 2.0)
    timeout = runner.Timeout(None)
    timeout.saw_warmup(0.625)
    assert timeout.explain("worker killed after --worker-timeout 1 s").startswith("worker killed after 1.25 s (")


@pytest.mark.subprocess
@pytest.mark.slow
def test_without_worker_timeout_a_run_much_slower_than_its_warmup_is_killed(tiny_snapshot, tmp_path, monkeypatch):
    """No --worker-timeout: a hung run is killed after a multiple of the slowest warm-up (10x and a 120 s floor;
    5x and 1 s here, so the test waits seconds while a measured run that is not hung has five times its
    warm-up), and its error says which default killed it (the limit's number: the unit tests above)."""
    from omni_loader.bench import runner

    monkeypatch.setattr(runner, "SHORTEST_DEFAULT", 1.0)
    monkeypatch.setattr(runner, "SLOWER_THAN_WARMUP", 5.0)  # a tiny warm-up takes a second or two
    hung: list[int] = []

    def stop_measured(run, pid: int) -> None:
        if not run.warmup and run.variant == "optimized":
            os.kill(pid, signal.SIGSTOP)  # hangs for as long as anyone waits
            hung.append(pid)

    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=1, workers="forkserver")
    frame = read_runs(run_benchmark(spec, tmp_path / "res", progress=False, on_start=stop_measured))
    measured = frame[~frame["warmup"].astype(bool)].drop_duplicates("run_id").set_index("variant")
    assert measured.loc["optimized", "status"] == "failed" and measured.loc["baseline", "status"] == "ok"
    error = measured.loc["optimized", "error"]
    assert re.fullmatch(r"worker killed after [\d,.]+ s \(the default: 5× the slowest warm-up; set "
                        r"--worker-timeout\)", error), error
    assert len(hung) == 1 and not Path(f"/proc/{hung[0]}").exists()  # killed and reaped


def _runs_written(out) -> int:
    """Runs with rows in runs.csv, read as text while the benchmark writes it (pandas fails on a file that
    holds only part of its header)."""
    path = out / "runs.csv"
    lines = path.read_text().splitlines()[1:] if path.exists() else []
    return len({line.split(",", 1)[0] for line in lines})


@pytest.mark.slow
@pytest.mark.subprocess
def test_interrupt_keeps_rows_and_resume_completes(tiny_snapshot, tmp_path):
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot),
           "--warmup", "0", "--runs", "4", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if _runs_written(out) >= 2:
            break
        time.sleep(0.1)
    assert proc.poll() is None, "benchmark finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "--resume" in output
    kept = read_runs(out)["run_id"].nunique()
    assert 2 <= kept < 8
    assert benchmark(read_metadata(out), "load")["status"] == "interrupted"
    assert not _worker_pids(f"{RUN_DIR_PREFIX}{proc.pid}-")  # the worker of the interrupted run is gone

    from omni_loader.cli import main

    assert main(["reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "0", "--runs", "4",
                 "--out", str(out), "--resume"]) == 0
    frame = read_runs(out)
    assert sorted(frame["run_id"].unique()) == list(range(8))
    assert frame.groupby("run_id")["phase"].count().nunique() == 1  # no run recorded twice
    meta = benchmark(read_metadata(out), "load")
    assert meta["status"] == "complete" and meta["resumed_at"]
    assert (out / "report.md").exists()


def test_resume_with_another_spec_is_refused(tiny_snapshot, tmp_path):
    from omni_loader.cli import main

    out = tmp_path / "res"
    run_benchmark(BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=1, workers="in-process"), out,
                  progress=False)
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["benchmarks"]["load"]["spec"]["runs"] == 1
    rc = main(["reproduce", "--checkpoint", str(tiny_snapshot), "--warmup", "0", "--runs", "3", "--out", str(out),
               "--resume", "--in-process"])
    assert rc == 2


def test_plan_warmups_alternate_whatever_the_order():
    """Warm-ups alternate A, B, A, B (two or more of each make the difference with A, A, B, B)."""
    for order in ("alternate", "abba", "shuffle", "blocked", "blocks"):
        plan = plan_runs(warmup=3, runs=2, order=order, seed=4)
        assert _letters(plan, True) == "BOBOBO", order
        assert [r.run_id for r in plan] == list(range(10)) and [r.order for r in plan[:6]] == [None] * 6
    assert [r.run_id for r in plan_runs(2, 1, first_id=7)] == list(range(7, 13))
    assert _letters(plan_runs(2, 1, "blocked"), False) == "BO"
    assert _letters(plan_runs(0, 3, "blocked"), False) == "BBBOOO"
    assert plan_runs(1, 6, "shuffle") == plan_runs(1, 6, "shuffle", seed=0)  # the default seed is 0
    assert {r.source for r in plan_runs(1, 2)} == {"load"}
    assert {r.source for r in plan_runs(1, 2, source="aa")} == {"aa"}  # warm-ups and measured runs alike
    for warmup, runs in ((-1, 2), (1, 0), (-1, 0)):
        with pytest.raises(ValueError, match=r"^--warmup must be >= 0 and --runs >= 1$"):
            plan_runs(warmup, runs)


def test_plan_rotates_three_variants_and_refuses_fewer_than_two_different():
    plan = plan_runs(warmup=1, runs=3, order="alternate", variants=("a", "b", "c"))
    assert "".join(r.variant for r in plan if r.warmup) == "abc"
    assert "".join(r.variant for r in plan if not r.warmup) == "abc" "bca" "cab"  # each variant in each position
    assert [r.order for r in plan if r.variant == "c"] == [None, 1, 2, 3]
    assert "".join(r.variant for r in plan_runs(0, 2, "abba", variants=("a", "b", "c"))) == "abccba"
    for variants in (("a",), ("a", "a"), ("a", "b", "a")):
        with pytest.raises(ValueError) as err:
            plan_runs(1, 2, variants=variants)
        assert str(err.value) == f"a plan needs two or more different variants, not {variants}"


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.parametrize("moment", ["server imports", "a run"])
def test_ctrl_c_at_the_terminal_leaves_one_line_and_no_process(tiny_snapshot, tmp_path, moment):
    """Ctrl-C reaches the terminal's whole foreground group: reproduce, its fork server (even while that
    imports torch), its worker. The benchmark says one line and exits 130; nothing prints a traceback,
    and nothing of its group is left running."""
    import psutil

    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", str(tiny_snapshot),
                             "--warmup", "0", "--runs", "6", "--out", str(out)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def ready() -> bool:
        if moment == "a run":
            return _runs_written(out) >= 1
        return any("multiprocessing.forkserver" in c for c in _in_session(psutil, proc.pid))

    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.02)
        assert proc.poll() is None, "benchmark finished before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)  # as the terminal does
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stdout.strip().splitlines()[-1].startswith("interrupted: ")
    deadline = time.monotonic() + 10  # the fork server and the workers have gone with the benchmark
    while time.monotonic() < deadline and _in_session(psutil, proc.pid):
        time.sleep(0.1)
    assert not _in_session(psutil, proc.pid)


def _in_session(psutil, sid: int) -> list[str]:
    left = []
    for p in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getsid(p.pid) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(" ".join(p.info["cmdline"] or []))
        except (OSError, psutil.Error):
            continue
    return left


def test_a_spec_embeds_its_load_options_and_reads_back_the_old_flat_one():
    spec = BenchmarkSpec(checkpoint="/snap", load=LoadOptions(layout="transformers", device="cpu"), runs=3)
    assert BenchmarkSpec.from_flat({"checkpoint": "/snap", "layout": "transformers", "runs": 3}) == spec  # flat names
    assert (spec.layout, spec.device, spec.dtype, spec.construct) == ("transformers", "cpu", "float32", "resident")
    assert spec.to_dict()["load"] == {"layout": "transformers", "device": "cpu", "dtype": "float32",
                                      "construct": "resident", "read": "lazy", "cache": "warm"}
    assert BenchmarkSpec.from_metadata({"schema_version": 3, "benchmarks": {"load": {"spec": spec.to_dict()}}}) == spec
    flat = {k: v for k, v in spec.to_dict().items() if k != "load"} | spec.to_dict()["load"]
    assert BenchmarkSpec.from_metadata({"schema_version": 2, "kind": "reproduce", "spec": flat}) == spec
    from omni_loader.errors import ResultsError
    from omni_loader.results.spec import spec_conflicts

    with pytest.raises(ResultsError, match="schema 1"):
        BenchmarkSpec.from_metadata({"schema_version": 1, "spec": {"checkpoint": "/snap", "in_process": True}})
    with pytest.raises(ResultsError, match=r"does not know \(speed\)"):
        BenchmarkSpec.from_metadata({"schema_version": 3, "benchmarks": {"load": {"spec": {**spec.to_dict(),
                                                                                            "speed": 1}}}})
    assert spec_conflicts(spec, {"layout": "vllm-omni", "device": "cpu", "runs": 3, "aa": True}) == [
        "--layout vllm-omni (saved: transformers)", "--aa (saved: off)"]


@pytest.mark.slow
def test_reproduce_takes_a_spec_and_opens_its_checkpoint(tiny_snapshot, tmp_path):
    """reproduce(spec, out): the spec says what is measured; without a snapshot, the spec's checkpoint is opened."""
    from omni_loader.bench.runner import benchmark_spec
    from omni_loader.token2wav.checkpoint import open_snapshot
    from omni_loader.job import reproduce

    made = benchmark_spec(open_snapshot(tiny_snapshot), LoadOptions(layout="transformers", dtype="bfloat16")
                          .replace(device="cpu", dtype="float32"), warmup=0, runs=1, workers="in-process")
    out = reproduce(made, tmp_path / "r", progress=False)
    spec = BenchmarkSpec.from_metadata(read_metadata(out))
    assert spec.load == LoadOptions(layout="transformers", device="cpu", dtype="float32", construct="resident")
    assert spec.workers == "in-process" and spec.runs == 1 and (out / "report.md").is_file()


def test_the_main_job_reads_its_results_directory_once(tiny_snapshot, tmp_path, monkeypatch, capsys):
    """``reproduce`` reads metadata.json once to merge its record into the suite (under the lock) and the
    directory once more, for the report and the exit status together: it once read metadata.json four times
    and parsed runs.csv twice (the report's check, then the command line's equivalence check)."""
    import builtins
    import io

    from omni_loader.cli import main

    out = tmp_path / "res"
    reads: Counter[str] = Counter()
    real_open = io.open

    def counting_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and str(file).startswith(str(out)) and not set(mode) & set("wa+x"):
            reads[Path(file).name] += 1
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)
    code = main(["reproduce", "--checkpoint", str(tiny_snapshot), "--runs", "2", "--warmup", "0",
                 "--workers", "in-process", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert (reads["metadata.json"], reads["runs.csv"]) == (2, 1), reads
