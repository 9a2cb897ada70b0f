"""stage-server and serve-ab: real processes on loopback, the tiny snapshot, bounded waits."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from omni_loader.errors import OmniLoaderError, ResultsError
from omni_loader.token2wav.options import LoadOptions
from omni_loader.results.rows import append_rows, read_runs
from omni_loader.results.suite import benchmark, read_metadata, write_metadata
from omni_loader.results.integrity import check_results
from omni_loader.startup.logfigures import DEFAULT_PATTERNS, extract_figures, parse_pattern_args, to_seconds
from omni_loader.results.planner import plan_runs
from omni_loader.startup.one_run import port_is_free
from omni_loader.startup.one_run import free_port, stage_server_commands
from omni_loader.cli.options import load_options
from omni_loader.startup.serve_ab import serve_ab

REPO = Path(__file__).resolve().parent.parent
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
VLLM_OMNI_LINE = re.compile(r"\(EngineCore_DP0 pid=(?P<pid>\d+)\) \[Stage-(?P<stage>\d+)\] (?:INFO|ERROR) "
                            r"\d\d-\d\d \d\d:\d\d:\d\d \[server\.py:\d+\] ")

# A stand-in server that answers 200 at once and logs vLLM-style lines.
HEALTHY = r"""
import http.server, sys
port = int(sys.argv[1])
print("INFO Loading weights took 0.25 seconds", flush=True)
print("Buffer discovery took 1.5 ms (variant x)", flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""

# A server that answers 503 forever, ignores SIGTERM and has a child: only SIGKILL of the group ends it.
NEVER_HEALTHY = r"""
import http.server, signal, subprocess, sys
port, marker = int(sys.argv[1]), sys.argv[2]
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)", marker])
print("Buffer discovery took 40 ms", flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _cmd(code: str, port: int, marker: str) -> str:
    return shlex.join([sys.executable, "-c", code, str(port), marker])


def _marker() -> str:
    return f"omni-loader-test-{uuid.uuid4().hex[:12]}"


def marker_processes(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (psutil if installed, else /proc)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    found = []
    if psutil is not None:
        for p in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                    found.append(p.info["pid"])
            except (psutil.Error, TypeError):
                continue
        return found
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(int(entry))
    return found


def _get(url: str, timeout: float = 1.0) -> tuple[int | None, bytes]:
    try:
        with NO_PROXY.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
        exc.close()
        return exc.code, body
    except (urllib.error.URLError, OSError):
        return None, b""


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)


# --------------------------------------------------------------------------- units


def test_extract_figures_units_and_repeats():
    log = (
        "(Stage-0 pid=1) INFO Loading weights took 1.52 seconds\n"
        "(Stage-1 pid=2) INFO Loading weights took 0.62 seconds\n"
        "INFO Model loading took 9.94 GiB memory and 12.345678 seconds\n"
        "Model loading took 1.95 GiB and 3.5 s\n"
        "Buffer discovery took 456.946 ms (variant baseline, state_dict() calls 219, persistent buffers 1)\n"
        "tokenizer warm-up took 2 min\n"
        "unrelated line 7 seconds\n"
    )
    patterns = {**DEFAULT_PATTERNS, "tok": r"tokenizer warm-up took (\d+)", "named": r"(?P<value>[0-9.]+) (?P<unit>ms)"}
    figures = extract_figures(log, patterns)
    # two processes' lines: each figure is keyed by whose line it is, not by its place in the log
    assert figures[:2] == [("weight_loading@Stage-0", 1.52), ("weight_loading@Stage-1", 0.62)]
    assert ("model_loading", 12.345678) in figures and ("model_loading#2", 3.5) in figures
    assert ("buffer_discovery", pytest.approx(0.456946)) in [(n, pytest.approx(s)) for n, s in figures]
    assert dict(figures)["buffer_discovery"] == pytest.approx(0.456946)
    assert dict(figures)["tok"] == 120.0  # the unit after the number: minutes
    assert dict(figures)["named"] == pytest.approx(0.456946)
    assert "init_engine" not in dict(figures)
    assert to_seconds(1500, "us") == pytest.approx(0.0015) and to_seconds(3, None) == 3


def test_interleaved_stages_figures_are_keyed_by_stage_not_by_order(tmp_path):
    """Stages start together: stage 2's line may come first. Its figure is stage 2's, in a text and in a file
    read a line at a time, with ANSI colours and the newer replica tags; a one-stage log keeps plain names."""
    from omni_loader.startup.logfigures import extract_figures_from_file

    log = ("\x1b[32m(EngineCore_DP0 pid=40) [Stage-2] INFO 02-27 08:54:08 [default_loader.py:293] Loading weights took "
           "1.51 seconds\x1b[0m\n"
           "(EngineCore_DP0 pid=20) [Stage-0] INFO 02-27 08:54:15 [default_loader.py:293] Loading weights took 8.72 "
           "seconds\n"
           "(StageEngineCoreProc_stage0_replica1 pid=21) INFO 02-27 08:54:16 [default_loader.py:293] Loading weights "
           "took 8.80 seconds\n"
           "(EngineCore_DP0 pid=40) [Stage-2] INFO 02-27 08:54:18 [default_loader.py:293] Loading weights took 0.50 "
           "seconds\n")
    expected = [("weight_loading@stage-2", 1.51), ("weight_loading@stage-0", 8.72),
                ("weight_loading@stage-0/replica1", 8.80), ("weight_loading@stage-2#2", 0.50)]
    assert extract_figures(log, DEFAULT_PATTERNS) == expected
    (tmp_path / "s.log").write_text(log)
    assert extract_figures_from_file(tmp_path / "s.log", DEFAULT_PATTERNS) == expected
    one = "(EngineCore_DP0 pid=4) [Stage-0] INFO 01-01 00:00:01 [s.py:1] Loading weights took 0.25 seconds\n"
    assert extract_figures(one * 2, DEFAULT_PATTERNS) == [("weight_loading", 0.25), ("weight_loading#2", 0.25)]


def test_pattern_arguments_are_checked():
    patterns = parse_pattern_args(["weight_loading=took ([0-9.]+) s", "extra=x=([0-9]+)"])
    assert patterns["weight_loading"] == "took ([0-9.]+) s" and patterns["extra"] == "x=([0-9]+)"
    assert set(DEFAULT_PATTERNS) <= set(patterns)
    assert set(parse_pattern_args(["a=([0-9]+)"], defaults=False)) == {"a"}
    for bad in ("nogroup=took [0-9]+ s", "noequals", "bad=(", "b@d=([0-9]+)"):
        with pytest.raises(OmniLoaderError):
            parse_pattern_args([bad])


def test_plan_alternates_after_warmups():
    plan = plan_runs(1, 2, "alternate")
    assert [(r.variant, r.warmup, r.order) for r in plan] == [
        ("baseline", True, None), ("optimized", True, None),
        ("baseline", False, 1), ("optimized", False, 1), ("baseline", False, 2), ("optimized", False, 2)]
    assert [r.variant for r in plan_runs(0, 2, "blocked")] == ["baseline", "baseline", "optimized", "optimized"]
    with pytest.raises(OmniLoaderError):
        plan_runs(1, 0)


def test_stage_server_commands(tiny_snapshot):
    port = free_port()
    assert port_is_free("127.0.0.1", port)
    # any LoadOptions field overrides one of options by name (a hand list of three once left --read out)
    a, b, url = stage_server_commands(tiny_snapshot, port, options=LoadOptions(layout="transformers", dtype="bfloat16",
                                                                              construct="empty"),
                                      device="cpu", read="eager")
    assert url == f"http://127.0.0.1:{port}/health"
    for cmd, variant in ((a, "baseline"), (b, "optimized")):
        argv = shlex.split(cmd)
        assert argv[:4] == [sys.executable, "-m", "omni_loader", "stage-server"]
        assert argv[argv.index("--variant") + 1] == variant and argv[argv.index("--port") + 1] == str(port)
        assert argv[argv.index("--checkpoint") + 1] == str(tiny_snapshot)
        given = {argv[i]: argv[i + 1] for i in range(4, len(argv) - 1, 2)}
        assert {k: given[k] for k in ("--layout", "--device", "--dtype", "--construct", "--read")} == {
            "--layout": "transformers", "--device": "cpu", "--dtype": "bfloat16", "--construct": "empty",
            "--read": "eager"}  # every load option travels to the stage server
        from omni_loader.cli import parse_args
        assert load_options(parse_args(argv[3:])) == LoadOptions(layout="transformers", device="cpu", dtype="bfloat16",
                                                                  construct="empty", read="eager")


def test_a_stage_groups_argv_carries_every_checkpoint_and_load_option():
    """The Token2Wav stage's argv and serve-ab's group commands are made from the CheckpointOptions and LoadOptions
    fields: parsed by the CLI's own parser they give back the group's choice, every field of both."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.options import checkpoint_options
    from omni_loader.startup.stage_group import StageGroupOptions, stage_group_commands
    from omni_loader.token2wav.options import CheckpointOptions

    snapshot = CheckpointOptions(checkpoint="/snap", model_id="org/name", size="tiny", seed=7, cache_dir="/hf",
                                 download=True)
    load = LoadOptions(layout="transformers", device="cpu", dtype="bfloat16", construct="empty", read="eager",
                       cache="cold")
    group = StageGroupOptions("optimized", 0, snapshot=snapshot, load=load)
    argv = group.stage_argv(group.token2wav_stage)
    assert argv[1:4] == ["-m", "omni_loader.cli.serve", "stage-server"]
    args = parse_args(argv[3:])
    assert (checkpoint_options(args), load_options(args)) == (snapshot, load)
    assert checkpoint_options(parse_args(StageGroupOptions("baseline", 0).stage_argv(2)[3:])) == CheckpointOptions()
    assert "--checkpoint" not in group.stage_argv(0)  # a simulated stage loads nothing

    for cmd in stage_group_commands("/snap", 1, options=load)[:2]:
        args = parse_args(shlex.split(cmd)[3:])
        assert (checkpoint_options(args), load_options(args)) == (CheckpointOptions(checkpoint="/snap"), load)


# --------------------------------------------------------------------------- stage-server


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: the first line a process writes to it blocks until it is read."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for size in (65536, 4096, 1):
        try:
            while True:
                os.write(w, b"\0" * size)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)
    return r, w


def _drain(fd: int, into: bytearray) -> threading.Thread:
    def read() -> None:
        while chunk := os.read(fd, 65536):
            into.extend(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@pytest.mark.subprocess
@pytest.mark.slow
def test_stage_server_health_then_stats_then_sigterm(tiny_snapshot, python, tmp_path):
    """The port is bound before loading: /health answers 503 while the load has not ended. The loading
    window is held open by the server's own stdout: a full pipe blocks its first log line, written after
    binding and before the load starts, until this test reads it. No race with the load's speed."""
    port, marker = free_port(), _marker()
    r, w = _full_pipe()
    with open(tmp_path / "stage.err", "wb") as err:
        proc = subprocess.Popen([python, "-m", "omni_loader", "stage-server", "--variant", "baseline",
                                 "--checkpoint", str(tiny_snapshot), "--port", str(port), "--tag", marker],
                                stdout=w, stderr=err, cwd=REPO, start_new_session=True)
    os.close(w)
    out = bytearray()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90  # only catches a hang
        code = None
        while code is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "stage.err").read_text()
            code, _ = _get(url + "/health")
            time.sleep(0.02)
        assert code == 503, "the port is bound before loading, so /health must answer 503 until the load ends"
        loading_stats = json.loads(_get(url + "/stats")[1])
        assert loading_stats["ready"] is False and loading_stats["state"] == "loading"
        assert loading_stats["tag"] == marker and loading_stats["variant"] == "baseline"
        reader = _drain(r, out)  # let the server log, and so load
        # a limit far from an answer's time: on a CI run with three workers busy, a 1 s GET during the load once
        # timed out (None), while the server answered 503 throughout
        while (code := _get(url + "/health", timeout=15)[0]) != 200 and time.monotonic() < deadline:
            assert code == 503 and proc.poll() is None, (tmp_path / "stage.err").read_text()
            time.sleep(0.02)
        assert code == 200, f"no 200 within 90 s: {(tmp_path / 'stage.err').read_text()}"
        stats = json.loads(_get(url + "/stats")[1])
        assert stats["ready"] is True and stats["variant"] == "baseline" and stats["tag"] == marker
        assert {"buffer_discovery", "weight_loading", "total"} <= set(stats["phases"])
        assert stats["state_dict_calls"] > 0 and stats["weights_loaded"] > 0
        assert stats["persistent_buffers"] == ["code2wav_dit_model.rotary_embed.inv_freq"]
        assert _get(url + "/nope")[0] == 404
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        reader.join(timeout=15)
        text = out.lstrip(b"\0").decode()
        # every line in vLLM-Omni's format: process tag and pid, stage tag, level, time, file:line, message
        heads = [VLLM_OMNI_LINE.match(ln) for ln in text.splitlines()]
        assert all(heads) and {(h["pid"], h["stage"]) for h in heads} == {(str(proc.pid), "0")}, text
        lines = [ln[h.end():] for ln, h in zip(text.splitlines(), heads)]
        assert lines[0].startswith(f"stage-server: listening on {url}")
        ready = next(i for i, ln in enumerate(lines) if ln.startswith("stage-server: ready"))
        for figure in ("Buffer discovery took", "Token2Wav load_weights took", "Loading weights took",
                       "Model loading took"):
            assert any(ln.startswith(figure) for ln in lines[:ready]), figure  # logged before /health turns 200
        figures = dict(extract_figures(text, DEFAULT_PATTERNS))
        assert figures["buffer_discovery"] == pytest.approx(stats["phases"]["buffer_discovery"], abs=1e-5)
        # vLLM's line over vLLM's region (the outer load_weights), the PR's row over Token2Wav's load_weights
        assert figures["weight_loading"] == pytest.approx(stats["phases"]["outer_load_weights"], abs=1e-5)
        assert figures["token2wav_weight_loading"] == pytest.approx(stats["phases"]["weight_loading"], abs=1e-5)
        assert figures["model_loading"] == pytest.approx(stats["phases"]["total"], abs=1e-5)
        assert lines[-1] == "stage-server: SIGTERM received, shut down"
        assert port_is_free("127.0.0.1", port)
    finally:
        _kill_group(proc)
        os.close(r)


@pytest.mark.slow
@pytest.mark.subprocess
def test_stage_server_failed_load_is_one_line(python, tmp_path):
    r = subprocess.run([python, "-m", "omni_loader", "stage-server", "--variant", "baseline", "--checkpoint",
                        str(tmp_path / "missing"), "--port", "0"], capture_output=True, text=True, cwd=REPO,
                       timeout=60, check=False)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"omni-loader: error: checkpoint directory not found: {tmp_path / 'missing'}"]
    assert "listening on http://127.0.0.1:" in r.stdout


@pytest.mark.subprocess
def test_stage_server_port_in_use_is_one_line(python):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        r = subprocess.run([python, "-m", "omni_loader", "stage-server", "--variant", "optimized", "--size", "tiny",
                            "--port", str(port)], capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "in use" in lines[0], r.stderr


# --------------------------------------------------------------------------- serve-ab


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_ab_of_real_stage_groups_records_every_start(stage_group_ab):
    """The suite's shared stage-group A/B (notebook 06's run): every start's rows, figures and log, the
    plan and the record, and not one of its servers left running."""
    import psutil

    out = stage_group_ab
    suite = read_metadata(out)
    assert list(suite["benchmarks"]) == ["startup"]
    meta = benchmark(suite, "startup")
    warmup, runs = meta["spec"]["warmup"], meta["spec"]["runs"]
    starts = 2 * (warmup + runs)
    frame = read_runs(out)
    assert set(frame["source"]) == {"server"}
    assert set(frame["status"]) == {"ok"}, frame[["run_id", "error"]].to_string()
    startup = frame[frame["phase"] == "startup_to_health"]
    assert sorted(zip(startup["variant"], startup["warmup"])) == sorted(
        [(v, True) for v in ("baseline", "optimized") for _ in range(warmup)]
        + [(v, False) for v in ("baseline", "optimized") for _ in range(runs)])
    figures = frame[frame["phase"] != "startup_to_health"]
    assert set(figures["parent"]) == {"startup_to_health"}
    assert {"buffer_discovery", "weight_loading@stage-2", "model_loading@stage-2"} <= set(figures["phase"])
    for run_id, group in frame.groupby("run_id"):
        secs = dict(zip(group["phase"], group["seconds"]))
        # spawn -> first 200 spans the whole load, as the Token2Wav stage's own log states it
        assert secs["buffer_discovery"] < secs["weight_loading@stage-2"] < secs["model_loading@stage-2"] \
            < secs["startup_to_health"]
    assert meta["kind"] == "serve-ab" and meta["status"] == "complete" and meta["runs_ok"] == starts
    assert [e["source"] for e in meta["plan"]] == ["server"] * starts
    assert [e["variant"] for e in meta["plan"]] == ["baseline", "optimized"] * (warmup + runs)  # alternating
    assert meta["spec"]["health_url"].startswith("http://127.0.0.1:") and meta["spec"]["order"] == "alternate"
    assert meta["environment"]["python"] and meta["command_line"] and meta["started_at"] and meta["finished_at"]
    assert (meta["warmup"], meta["repeats"], meta["order"]) == (warmup, runs, "alternate")
    logs = sorted((out / "logs").iterdir(), key=lambda p: int(p.name.split("-")[0]))
    assert [p.name for p in logs] == [f"{e['run_id']}-{e['variant']}.log" for e in meta["plan"]]
    pids = {int(pid) for log in logs for pid in re.findall(r"pid=(\d+)\)", log.read_text())}
    assert len(pids) == 4 * starts  # an API server and three stage servers a start

    def still_serving(pid: int) -> bool:
        try:
            return "omni_loader" in " ".join(psutil.Process(pid).cmdline())
        except psutil.Error:
            return False

    assert [pid for pid in pids if still_serving(pid)] == []


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_ab_times_out_kills_and_goes_on(tmp_path, python):
    # The timeout is what the never-healthy stand-in is waited, once; within it that stand-in must also start its
    # Python and answer 503 at least once, which took over 8 s in a full suite run on 2 cores (15 s has held).
    marker, port = _marker(), free_port()
    out = serve_ab(_cmd(NEVER_HEALTHY, port, marker), _cmd(HEALTHY, port, marker), f"http://127.0.0.1:{port}/health",
                   tmp_path / "ab", warmup=0, runs=1, timeout=15.0, grace=0.5, progress=False)
    assert marker_processes(marker) == []
    frame = read_runs(out)
    startup = frame[frame["phase"] == "startup_to_health"].sort_values("run_id")
    assert list(startup["variant"]) == ["baseline", "optimized"]
    assert list(startup["status"]) == ["failed", "ok"]
    failed = startup[startup["status"] == "failed"]
    assert failed["seconds"].isna().all()
    assert all("no HTTP 200" in e and "within 15 s" in e and "HTTP 503" in e for e in failed["error"]), list(
        failed["error"])
    assert all("\n" not in e for e in frame["error"])
    ok = frame[(frame["status"] == "ok")]
    assert set(ok[ok["phase"] == "weight_loading"]["seconds"]) == {0.25}
    assert set(ok[ok["phase"] == "buffer_discovery"]["seconds"]) == {0.0015}
    # a failed run keeps its log figures, marked failed with the run
    assert set(frame[(frame["phase"] == "buffer_discovery") & (frame["status"] == "failed")]["seconds"]) == {0.04}
    assert benchmark(read_metadata(out), "startup")["runs_failed"] == 1


def ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has SIGTERM set to be ignored (bit 15 of ``SigIgn`` in ``/proc/PID/status``)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(mask, 16) >> (signal.SIGTERM - 1) & 1)


@pytest.mark.subprocess
def test_a_server_and_child_ignoring_sigterm_are_ended_by_the_groups_sigkill(tmp_path):
    """The serve-ab tests above cannot see who ended NEVER_HEALTHY: after stop_group, serve-ab's subreaper kills
    the server and its guard's watcher every process carrying its token, and they look only once serve_ab has
    returned. Here the server is started as serve-ab starts it and stopped as it stops it, once both it and its
    child ignore SIGTERM: the group's SIGKILL must end both and the server be reaped, with nothing else to help."""
    from omni_loader.host.procs import group_members, stop_group
    from omni_loader.startup.one_run import launch

    marker = _marker()
    proc = launch(shlex.split(_cmd(NEVER_HEALTHY, free_port(), marker)), tmp_path / "server.log", {})
    try:
        deadline = time.monotonic() + 60  # only catches a hang
        while not (len(members := group_members(proc.pid)) == 2 and all(map(ignores_sigterm, members))):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.02)
        assert stop_group(proc.pid, grace=0.3, leader=proc) == []
        assert proc.returncode == -signal.SIGKILL
        assert group_members(proc.pid) == [] and marker_processes(marker) == []
    finally:
        _kill_group(proc)


@pytest.mark.subprocess
def test_serve_ab_early_exit_and_busy_port(tmp_path):
    marker, port = _marker(), free_port()
    exits = shlex.join([sys.executable, "-c", "import sys; print('boom', flush=True); sys.exit(3)", marker])
    out = serve_ab(exits, _cmd(HEALTHY, port, marker), f"http://127.0.0.1:{port}/health", tmp_path / "exit",
                   warmup=0, runs=1, timeout=30, grace=1, progress=False)
    frame = read_runs(out)
    startup = frame[frame["phase"] == "startup_to_health"].sort_values("run_id")
    assert list(startup["status"]) == ["failed", "ok"]
    assert "exited with status 3" in startup["error"].iloc[0]
    assert "boom" in (out / "logs" / "0-baseline.log").read_text()
    with socket.socket() as holder:  # something else holds the port: no run may start
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        out = serve_ab(_cmd(HEALTHY, busy, marker), _cmd(HEALTHY, busy, marker), f"http://127.0.0.1:{busy}/health",
                       tmp_path / "busy", warmup=0, runs=1, timeout=5, port_wait=0.3, progress=False)
    frame = read_runs(out)
    assert list(frame["status"]) == ["failed", "failed"]
    assert all(f"127.0.0.1:{busy}" in e and "still in use" in e for e in frame["error"])
    assert marker_processes(marker) == []


@pytest.mark.subprocess
def test_serve_ab_shares_a_results_directory(tmp_path):
    """reproduce --with-startup: serve-ab rows join another benchmark's directory without mixing phases."""
    out = tmp_path / "reproduce"
    load = {"kind": "reproduce", "status": "complete", "warmup": 0, "plan": [{"run_id": i, "variant": v, "warmup": False, "order": 1}
                                                       for i, v in enumerate(("baseline", "optimized"))]}
    write_metadata(out, load)  # a load benchmark's record as schema 2 had it, at the top level
    append_rows(out, [{"run_id": i, "variant": v, "warmup": False, "order": 1, "phase": "weight_loading",
                       "parent": "", "seconds": 0.1, "status": "ok", "source": "load"}
                      for i, v in enumerate(("baseline", "optimized"))])
    marker, port = _marker(), free_port()
    lines: list[str] = []
    serve_ab(_cmd(HEALTHY, port, marker), _cmd(HEALTHY, port, marker), f"http://127.0.0.1:{port}/health", out,
             warmup=0, runs=1, timeout=30, progress=lines.append)
    frame = read_runs(out)
    server = frame[frame["source"] == "server"]
    assert sorted(set(server["run_id"])) == [2, 3]
    for run_id, group in server.groupby("run_id"):  # a line per start, saying what the rows hold
        secs = dict(zip(group["phase"], group["seconds"]))
        said = [ln for ln in lines if ln.startswith(f"run {run_id} {group['variant'].iloc[0]}")]
        assert len(said) == 1 and f"healthy after {secs['startup_to_health']:.3f} s" in said[0], (said, lines)
    assert set(server["phase"]) == {"startup_to_health", "weight_loading", "buffer_discovery"}
    # The report keeps server log figures apart from the loader's phase of the same name.
    from omni_loader.reporting.measurements import comparisons

    phases = [c.phase for c in comparisons(frame)]
    assert "server:weight_loading" in phases and "startup_to_health" in phases
    suite = read_metadata(out)
    assert suite["schema_version"] == 3 and list(suite["benchmarks"]) == ["load", "startup"]  # rewritten as a suite
    assert benchmark(suite, "load") == load
    assert benchmark(suite, "startup")["kind"] == "serve-ab" and benchmark(suite, "startup")["status"] == "complete"
    assert check_results(out).ok
    with pytest.raises(ResultsError):
        serve_ab(_cmd(HEALTHY, port, marker), _cmd(HEALTHY, port, marker), f"http://127.0.0.1:{port}/health", out,
                 warmup=0, runs=1, progress=False)


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_ab_cli_interrupted_leaves_no_process(tmp_path, python):
    marker, port = _marker(), free_port()
    out = tmp_path / "ab"
    cmd = [python, "-m", "omni_loader", "serve-ab", "--baseline-cmd", _cmd(NEVER_HEALTHY, port, marker),
           "--optimized-cmd", _cmd(HEALTHY, port, marker), "--health-url", f"http://127.0.0.1:{port}/health",
           "--warmup", "0", "--runs", "1", "--timeout", "60", "--grace", "0.5", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60

        def started() -> bool:  # a server of serve-ab's up (serve-ab's own command line holds the marker too)
            return bool(set(marker_processes(marker)) - {proc.pid}) and (out / "metadata.json").is_file()

        while not started() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        assert started()
        proc.send_signal(signal.SIGINT)  # Ctrl-C to serve-ab alone: its server is in another session
        _, err = proc.communicate(timeout=30)
    finally:
        _kill_group(proc)
    assert proc.returncode == 130, err
    assert marker_processes(marker) == []
    meta = benchmark(read_metadata(out), "startup")
    assert meta["status"] == "interrupted" and meta["interrupted_at"]


@pytest.mark.slow
@pytest.mark.subprocess
def test_serve_ab_cli_reports_medians(tmp_path, python):
    marker, port = _marker(), free_port()
    r = subprocess.run([python, "-m", "omni_loader", "serve-ab", "--baseline-cmd", _cmd(HEALTHY, port, marker),
                        "--optimized-cmd", _cmd(HEALTHY, port, marker), "--health-url",
                        f"http://127.0.0.1:{port}/health", "--warmup", "1", "--runs", "1", "--log-pattern",
                        r"bd_us=Buffer discovery took ([0-9.]+)", "--out", str(tmp_path / "ab")],
                       cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "startup_to_health    baseline" in r.stdout and "bd_us" in r.stdout
    frame = read_runs(tmp_path / "ab")
    assert set(frame[frame["phase"] == "bd_us"]["seconds"]) == {0.0015}
    # the suite's one warm-up start a side (06's stage-group A/B has none): first in the plan, out of the medians
    starts = frame[frame["phase"] == "startup_to_health"].sort_values("run_id")
    assert list(zip(starts["variant"], starts["warmup"])) == [("baseline", True), ("optimized", True),
                                                              ("baseline", False), ("optimized", False)]
    assert marker_processes(marker) == []
    bad = subprocess.run([python, "-m", "omni_loader", "serve-ab", "--baseline-cmd", "no-such-program-xyz",
                          "--optimized-cmd", "true", "--health-url", "http://127.0.0.1:1/health",
                          "--out", str(tmp_path / "bad")], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no-such-program-xyz" in bad.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_reproduce_with_startup_makes_a_suite_of_two_benchmarks(tiny_snapshot, tmp_path, monkeypatch):
    """The load benchmark, then the startup one beside it: stage servers loading as the benchmark did."""
    from omni_loader.token2wav.checkpoint import open_snapshot
    from omni_loader.bench.runner import benchmark_spec
    from omni_loader.job import reproduce

    # report.md without its plots: this test reads the results, not the report (the module cannot set
    # TEXT_ONLY_REPORTS: the notebook stage_group_ab executes would inherit the switch and draw no figures)
    monkeypatch.setenv("OMNI_LOADER_PLOTS", "off")

    spec = benchmark_spec(open_snapshot(tiny_snapshot), LoadOptions(device="cpu", construct="empty"), warmup=0, runs=1,
                          workers="in-process")
    out = reproduce(spec, tmp_path / "r", with_startup=True, progress=False)
    check = check_results(out)
    assert check.ok, check.problems
    assert list(check.suite.raw["benchmarks"]) == ["load", "startup"]
    load, startup = check.benchmark("load"), check.benchmark("startup")
    assert (load["status"], startup["status"], startup["runs_ok"]) == ("complete", "complete", 2)
    assert [e["run_id"] for e in startup["plan"]] == [2, 3]  # after the load runs
    argv = shlex.split(startup["spec"]["baseline_cmd"])
    assert argv[argv.index("--construct") + 1] == "empty" and argv[argv.index("--device") + 1] == "cpu"
    assert startup["environment"]["device"] == "cpu"
    assert set(check.frame[check.frame["source"] == "server"]["run_id"]) == {2, 3}


# A server that writes 60 MB of output around its figure line before it answers.
CHATTY = r"""
import http.server, sys
port = int(sys.argv[1])
line = "x" * 999 + "\n"
sys.stdout.write(line * 30_000)
print("INFO Loading weights took 0.25 seconds", flush=True)
sys.stdout.write(line * 30_000)
sys.stdout.flush()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_serve_ab_reads_a_huge_log_a_line_at_a_time_and_keeps_its_ends(tmp_path):
    """60 MB of server output: the figure in its middle is found, serve-ab's own memory stays far below the
    log's size, and the log kept is its first and last megabytes with a line saying what was cut."""
    marker, port = _marker(), free_port()

    def argv(server: str, out: Path) -> list[str]:
        return ["serve-ab", "--baseline-cmd", _cmd(server, port, marker), "--optimized-cmd", _cmd(server, port, marker),
                "--health-url", f"http://127.0.0.1:{port}/health", "--warmup", "0", "--runs", "1", "--out", str(out)]

    # One process, two serve-abs: the quiet servers' first, then the chatty ones'. The peak (VmHWM) after each is
    # the process's so far, so the second less the first is what the chatty log added to it (once a process each:
    # the second interpreter and its imports cost more than the measurement needs).
    code = ("import sys\nfrom omni_loader.cli import main\n"
            "def peak():\n    print('VmHWM', next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
            f"code = main({argv(HEALTHY, tmp_path / 'quiet')!r})\npeak()\n"
            f"code = code or main({argv(CHATTY, tmp_path / 'ab')!r})\npeak()\nsys.exit(code)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    quiet, chatty = (int(figure.split()[0]) for figure in proc.stdout.split("VmHWM")[-2:])
    frame = read_runs(tmp_path / "ab")
    assert set(frame[frame["phase"] == "weight_loading"]["seconds"]) == {0.25}
    assert chatty - quiet < 45 * 1024, (quiet, chatty)  # the log is 60 MB: read whole, it put 120 MB or more on the peak
    for log in (tmp_path / "ab" / "logs").glob("*.log"):
        assert log.stat().st_size < 21 << 20
        assert b"bytes of this log cut here (kept: the first 16,777,216 and the last 4,194,304)" in log.read_bytes()


# A server whose helper leaves its process group (a session of its own), as a daemonising child does.
ESCAPING = r"""
import http.server, subprocess, sys
port, marker = int(sys.argv[1]), sys.argv[2]
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker], start_new_session=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.subprocess
def test_a_server_helper_that_left_its_group_is_stopped_and_named(tmp_path):
    """Stopping the group cannot reach a helper in its own session; as its subreaper serve-ab gets it back
    when the server dies, stops it, and says so in the run's log."""
    marker, port = _marker(), free_port()
    out = serve_ab(_cmd(ESCAPING, port, marker), _cmd(HEALTHY, port, marker), f"http://127.0.0.1:{port}/health",
                   tmp_path / "ab", warmup=0, runs=1, timeout=60.0, grace=0.5, progress=False)
    assert marker_processes(marker) == []
    frame = read_runs(out)
    assert set(frame[frame["phase"] == "startup_to_health"]["status"]) == {"ok"}
    said = [ln for log in sorted((out / "logs").glob("*-baseline.log")) for ln in log.read_text().splitlines()
            if "outside its process group" in ln]
    assert len(said) == 1 and said[0].startswith("# omni-loader serve-ab: the server left 1 process(es) running "
                                                 "outside its process group; stopped: pid ") and marker in said[0]


def test_the_startup_bars_time_left_ticks_while_a_start_waits_for_health(monkeypatch, tmp_path):
    """Second Lab pass: 06's bar read "00:47" left at 00:08 and at 00:11: tqdm's time left is (total - n) / rate, and
    neither moves between two starts. On a fake clock (the first start 10 s, 4 starts) each wait's refresh draws the
    estimate at the last step (30 s) less the time since (29 s, then 26); a start that runs long (25 s) raises it:
    a little for itself, and the two starts after it at the mean of 10 s and its time so far, counted up to twice
    the 10 s price (20 s): 15 s each."""
    import io
    import re
    import sys

    import tqdm.std

    from omni_loader import progress
    from omni_loader.startup import serve_ab
    from omni_loader.startup.one_run import SOURCE, RunOutcome

    clock = [0.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    monkeypatch.setenv(progress.ENV, "terminal")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    report = serve_ab._Reporter(True, 4, 0)
    plan = plan_runs(1, 1, "alternate", source=SOURCE)
    waits: list[str] = []

    def wait(seconds: float) -> None:  # what the wait loop does about once a second
        report.waiting(seconds, "connection refused")
        waits.append(re.search(r"(\S+) left", str(report.bar)).group(1))

    report.start(plan[0])
    wait(1.0)  # no start has ended: no rate yet, nothing to tick
    clock[0] = 10.0
    report.run(RunOutcome(plan[0], "ok", 10.0, None, tmp_path / "0.log"))
    report.start(plan[1])
    for now in (11.0, 14.0, 35.0):
        clock[0] = now
        wait(now - 10.0)
    assert waits == ["?", "00:29", "00:26", "00:32"], waits
    report.close()
