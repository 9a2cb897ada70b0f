"""Issue 37, hostile input round two: processes that outlive the kit, waits without an end, parsing, one-line errors.

Each test names the class of fault it holds; the process tests start real processes on loopback and wait
with bounds far from the work (a bound only catches a hang; no test asserts a duration).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from test_progress_waits import SLOW_TO_BIND
from test_server import marker_processes as processes_of

REPO = Path(__file__).resolve().parent.parent
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# A stand-in server: a child in its process group that ignores SIGTERM, and a helper that leaves the group
# (a session of its own) and ignores SIGTERM too; /health answers 200 once both are started.
FAMILY_SERVER = r"""
import http.server, os, signal, subprocess, sys
port, marker = int(sys.argv[1]), sys.argv[2]
stay = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
subprocess.Popen([sys.executable, "-c", stay, marker, "in-group"])
subprocess.Popen([sys.executable, "-c", stay, marker, "escaped"], start_new_session=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _marker() -> str:
    return f"omni-loader-hostile-{uuid.uuid4().hex[:12]}"


def _wait_for(what, bound: float = 60.0, step: float = 0.05):
    """Poll ``what()`` until it is truthy or ``bound`` seconds pass (a bound far from the work); its last value."""
    deadline = time.monotonic() + bound
    while not (value := what()) and time.monotonic() < deadline:
        time.sleep(step)
    return value


def _killed_leaves(proc: subprocess.Popen, marker: str):
    """SIGKILL ``proc``, then True once no process of ``marker`` is left (within a bound), else what is left."""
    proc.kill()
    proc.wait(timeout=30)
    return _wait_for(lambda: not processes_of(marker), bound=30) or processes_of(marker)


def _healthy(url: str) -> bool:
    try:
        with NO_PROXY.open(url, timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------- processes that outlive the kit


@pytest.mark.subprocess
@pytest.mark.slow
def test_sigkill_of_serve_ab_or_stage_group_leaves_no_process(tmp_path, tiny_snapshot):
    """SIGKILL of serve-ab takes its server, the server's group and a helper that left the group with it; SIGKILL
    of stage-group takes its stages."""
    from omni_loader.startup.one_run import free_port

    marker, port = _marker(), free_port()
    server = shlex.join([sys.executable, "-c", FAMILY_SERVER, str(port), marker])
    url = f"http://127.0.0.1:{port}/health"
    # serve-ab waits on a port nothing answers, so it is still waiting when it is killed: polling the server's
    # own port, it could see the server healthy, stop it and finish both starts before this test looked.
    never = f"http://127.0.0.1:{free_port()}/health"
    kit = subprocess.Popen([sys.executable, "-m", "omni_loader", "serve-ab", "--baseline-cmd", server,
                            "--optimized-cmd", server, "--health-url", never, "--warmup", "0", "--runs", "1",
                            "--timeout", "120", "--out", str(tmp_path / "ab")],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert _wait_for(lambda: len(processes_of(marker)) >= 4 and _healthy(url)), "the server never came up"
        left = _killed_leaves(kit, marker)
        assert left is True, f"processes of the killed serve-ab still run: {left}"
    finally:
        kit.kill()
        _kill_all(processes_of(marker))

    marker, port, log = _marker(), free_port(), tmp_path / "group.log"
    with open(log, "wb") as fh:
        group = subprocess.Popen([sys.executable, "-m", "omni_loader.cli.serve", "stage-group", "--variant",
                                  "baseline", "--checkpoint", str(tiny_snapshot), "--simulate-seconds", "600", "--port",
                                  str(port), "--tag", marker], cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:  # the stages past their first lines (a stage still starting would die of the closed pipe on its own)
        assert _wait_for(lambda: log.read_text().count("simulates its load") == 2 and "Model Loaded" in log.read_text()
                         and len(processes_of(marker)) == 4), f"the stages never started: {log.read_text()[-2000:]}"
        left = _killed_leaves(group, marker)
        assert left is True, f"stages of the killed stage-group still run: {left}"
    finally:
        group.kill()
        _kill_all(processes_of(marker))


# --------------------------------------------------------------------------- waits without an end


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("omni-loader: error: "), err
    return err


def test_seconds_that_are_not_finite_or_negative_are_refused(capsys):
    """--port-wait nan waited forever and went into metadata.json; --grace nan, negatives; --in-process with a
    --worker-timeout it cannot enforce: each is one line naming the option, before anything runs."""
    from omni_loader.cli import main
    from omni_loader.errors import OmniLoaderError
    from omni_loader.startup.serve_ab import StartupSpec

    ab = ["serve-ab", "--baseline-cmd", "sleep 1", "--optimized-cmd", "sleep 1", "--health-url",
          "http://127.0.0.1:9/health", "--out", "never-made"]
    for flag, value in (("--port-wait", "nan"), ("--poll-interval", "nan"), ("--grace", "nan"), ("--grace", "-1"),
                        ("--port-wait", "inf"), ("--poll-interval", "-0.5")):
        assert main([*ab, flag, value]) == 2
        assert f"{flag} {value}: must be a finite number of seconds" in _error_line(capsys)
    assert main(["stage-group", "--variant", "baseline", "--port", "0", "--grace", "nan"]) == 2
    assert "--grace nan" in _error_line(capsys)
    for field, flag in (("port_wait_s", "--port-wait"), ("grace_s", "--grace"), ("poll_interval_s", "--poll-interval")):
        with pytest.raises(OmniLoaderError, match=f"serve-ab {flag} nan: must be a finite number"):
            StartupSpec("sleep 1", "sleep 1", "http://127.0.0.1:9/health", **{field: float("nan")})
    assert main(["reproduce", "--in-process", "--worker-timeout", "5", "--size", "tiny"]) == 2
    assert "--worker-timeout needs a worker process" in _error_line(capsys)
    assert main(["reproduce", "--workers", "in-process", "--worker-timeout", "5", "--size", "tiny"]) == 2
    assert "--worker-timeout" in _error_line(capsys)
    assert not Path("never-made").exists()


NEVER_ANSWERS = r"""
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
print(s.getsockname()[1], flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accepted, never answered
"""


def _download_from(hub_script: str, tmp_path: Path, **limits: str) -> subprocess.CompletedProcess:
    """``reproduce --model Nobody/Model --download`` against a loopback Hub (``hub_script`` prints its port), with
    the kit's bounds in ``limits`` (environment variables); the command's own timeout is far beyond them."""
    hub = subprocess.Popen([sys.executable, "-c", hub_script], stdout=subprocess.PIPE, text=True)
    try:
        port = int(hub.stdout.readline())
        env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_DISABLE_PROGRESS_BARS": "1", **limits}
        env.pop("HF_HUB_OFFLINE", None)
        return subprocess.run([sys.executable, "-m", "omni_loader", "reproduce", "--model", "Nobody/Model", "--hf-cache",
                               str(tmp_path / "hf"), "--download", "--device", "cpu"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=240)
    finally:
        hub.kill()
        hub.wait()


@pytest.mark.subprocess
def test_download_from_a_hub_that_never_answers_is_bounded(tmp_path):
    """--download against a Hub that accepts and never answers retried for minutes; now the kit's bound (here
    OMNI_LOADER_HUB_TIMEOUT=2) ends it in one line that names the bound."""
    done = _download_from(NEVER_ANSWERS, tmp_path, OMNI_LOADER_HUB_TIMEOUT="2")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2, done.stderr[-2000:]
    assert last.startswith("omni-loader: error: the Hugging Face Hub (http://127.0.0.1:") and \
        "did not answer within 2 s (OMNI_LOADER_HUB_TIMEOUT sets the bound)" in last, last


# A Hub that answers every file of a token2wav snapshot but the shard (and the listing of them, as the Hub's API
# does): the shard's headers, a KiB, then a byte a second (no per-read timeout of huggingface_hub ends it) for as
# long as the client listens.
STALLS_MID_FILE = r"""
import hashlib, http.server, json, sys, time
shard = "model-00001-of-00001.safetensors"
index = {"metadata": {}, "weight_map": {"token2wav.code2wav_dit_model.w": shard}}
files = {"config.json": b"{}", "spk_dict.pt": b"x", "model.safetensors.index.json": json.dumps(index).encode()}
sizes = {**{name: len(body) for name, body in files.items()}, shard: 1 << 30}
def etag(name):
    return hashlib.sha1(name.encode()).hexdigest()
class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def api(self):  # the repository's revision and its files
        if "/tree/" in self.path:
            body = [{"type": "file", "path": n, "size": s, "oid": etag(n)} for n, s in sizes.items()]
        else:
            body = {"id": "Nobody/Model", "sha": "c" * 40, "siblings": [{"rfilename": n} for n in sizes]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def headers_of(self):
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        self.send_response(200 if name in sizes else 404)
        self.send_header("X-Repo-Commit", "c" * 40)
        self.send_header("ETag", '"%s"' % etag(name))
        self.send_header("Content-Length", str(sizes.get(name, 0)))
        self.end_headers()
        return name
    def do_HEAD(self):
        self.headers_of()
    def do_GET(self):
        if self.path.startswith("/api/"):
            return self.api()
        name = self.headers_of()
        if name != shard:
            self.wfile.write(files.get(name, b""))
            return
        self.wfile.write(bytes(1024))
        while True:
            self.wfile.flush()
            time.sleep(1)
            self.wfile.write(b"\0")
    def log_message(self, *args):
        pass
hub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
hub.daemon_threads = True
print(hub.server_address[1], flush=True)
hub.serve_forever()
"""


@pytest.mark.subprocess
def test_a_download_that_stalls_mid_file_ends_at_the_kits_deadline(tmp_path):
    """--download from a Hub that answers and then stalls mid-file (a byte a second) had no bound after the first
    answer; now the whole download has one deadline (here OMNI_LOADER_DOWNLOAD_TIMEOUT=3), and the line names the
    file and the limit."""
    done = _download_from(STALLS_MID_FILE, tmp_path, OMNI_LOADER_DOWNLOAD_TIMEOUT="3")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("omni-loader: error: --download of Nobody/Model: model-00001-of-00001.safetensors was "
                               "not downloaded within the download's limit of 3 s (OMNI_LOADER_DOWNLOAD_TIMEOUT sets "
                               "it)"), lines[0]
    assert sorted(p.name for p in (tmp_path / "hf").glob("*/snapshots/*/*")) == ["config.json",
                                                                                "model.safetensors.index.json",
                                                                                "spk_dict.pt"]


# --------------------------------------------------------------------------- timeline: linear work, bounded lines

STAGE2 = "(EngineCore_DP0 pid={pid}) [Stage-2] INFO 03-14 {h:02d}:{m:02d}:{s:02d} [x.py:1] {message}\n"


def _stamped(i: int, message: str, pid: int = 40) -> str:
    return STAGE2.format(pid=pid, h=10 + i // 3600, m=i // 60 % 60, s=i % 60, message=message)


class _CountingPattern:
    """A compiled pattern whose ``match`` calls are counted."""

    def __init__(self, pattern) -> None:
        self.pattern, self.calls = pattern, 0

    def match(self, *args):
        self.calls += 1
        return self.pattern.match(*args)

    def __getattr__(self, name):
        return getattr(self.pattern, name)


class _CountingText(str):
    """A log whose ``find`` calls count the characters they look at."""

    scanned = 0

    def find(self, sub, start=0, end=None):
        end = len(self) if end is None else end
        found = str.find(self, sub, start, end)
        _CountingText.scanned += (found if found >= 0 else end) - start
        return found


def test_timeline_work_is_linear_in_the_markers(monkeypatch):
    """timeline compared every phase with every other (20,000 markers: 219 s), walked back up to 10,000 lines
    for each line without a timestamp, and searched each new pid from the block's start. Counted, not timed."""
    from dataclasses import asdict

    from omni_loader.startup.timeline import parse_text

    n = 2000
    timeline = parse_text(_stamped(0, "first") + "".join(_stamped(i, "Loading weights took 0.5 seconds")
                                                         for i in range(1, n + 1)))
    record_type = type(timeline.records[0])

    class Counted(record_type):
        reads = 0

        def __getattribute__(self, name):
            if name in ("start", "end"):
                Counted.reads += 1
            return object.__getattribute__(self, name)

    timeline.records = [Counted(**asdict(r)) for r in timeline.records]
    gaps, path = timeline.gaps(), timeline.critical_path()
    assert gaps == [] and len(path.segments) == n
    assert Counted.reads < 100 * n, f"{Counted.reads} reads of a phase's start or end for {n} phases"

    scanning = sys.modules[record_type.__module__]  # the module whose scanner reads lines (it defines Record)
    header = _CountingPattern(scanning.HEADER)
    monkeypatch.setattr(scanning, "HEADER", header)
    text = _stamped(0, "first") + "Loading weights took 0.5 seconds\n" * n
    assert len(parse_text(text).records) == n
    assert header.calls < 5 * n, f"{header.calls} header matches for {n} lines without a timestamp"
    monkeypatch.undo()

    text = _CountingText("".join(_stamped(i, "Loading weights took 0.5 seconds", pid=1000 + i) for i in range(n)))
    assert len(parse_text(text).lanes) == 1
    assert _CountingText.scanned < 60 * len(text), f"find looked at {_CountingText.scanned:,} of {len(text):,} characters"

    big = 20_000  # the size: all records, one phase after another on the critical path, no gap
    timeline = parse_text(_stamped(0, "first") + "".join(_stamped(i, "Loading weights took 0.5 seconds", pid=1000 + i % 7)
                                                         for i in range(1, big + 1)))
    assert len(timeline.records) == big and timeline.gaps() == []
    assert [s.phase for s in timeline.critical_path().segments] == ["weight_loading"] * big


def test_timeline_reads_a_line_to_a_bound(tmp_path):
    """One 200 MiB line cost 930 MB: a line is read to its first MAX_LINE characters, the rest dropped as it is
    read (never held), and a named warning says which line was cut."""
    import io

    from omni_loader.startup.logfigures import line_blocks
    from omni_loader.startup.timeline import read_timeline

    long = "x" * 100_000
    text = _stamped(0, "first") + _stamped(1, long) + _stamped(5, "Loading weights took 1.5 seconds")
    cut: list[int] = []
    blocks = list(line_blocks(io.StringIO(text), 1000, 5000, cut))
    assert cut == [2] and max(map(len, blocks)) <= 1000 + 5000 + 1
    assert "".join(blocks).count("\n") == 3 and blocks[-1].endswith("Loading weights took 1.5 seconds\n")
    log = tmp_path / "long.log"
    log.write_text(text)
    timeline = read_timeline(log, block_size=1000, max_line=5000)
    assert [r.phase for r in timeline.records] == ["weight_loading"]
    assert timeline.warnings == [f"line-cut: {log} line 2 longer than 5,000 characters: read to their first 5,000"]


def _strict_json(text: str):
    import json

    def refuse(name: str):
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_timeline_refuses_or_flags_what_no_clock_gives(tmp_path, capsys):
    """Impossible dates and a --pattern that captures a word were tracebacks; figures with dozens of digits, a clock
    that goes back and phases before the log's first line were printed as fine, and --json could print Infinity."""
    from omni_loader.cli import main

    def log(name: str, *lines: str) -> str:
        path = tmp_path / name
        path.write_text("".join(lines))
        return str(path)

    first = _stamped(0, "first")
    refused = {
        log("date.log", first, STAGE2.format(pid=40, h=10, m=0, s=5, message="x").replace("03-14", "02-30")):
            "line 2: timestamp '02-30 10:00:05' is not a date and time",
        log("hour.log", first.replace("10:00:00", "25:61:00")): "line 1: timestamp '03-14 25:61:00' is not a date",
        log("digits.log", first, _stamped(5, "Loading weights took " + "9" * 40 + " seconds")):
            "line 2: weight_loading took 9999999999",
        log("inf.log", first, _stamped(5, "Model loading took " + "9" * 400 + " GiB and 2 seconds")):
            "line 2: model_loading captured '9999",
        log("huge.log", first, _stamped(5, "Model loading took " + "9" * 30 + " GiB and 2 seconds")):
            "line 2: model_loading's value 9999",
    }
    for path, expected in refused.items():
        assert main(["timeline", path]) == 2, path
        assert f"omni-loader: error: {path} {expected}" in _error_line(capsys)
    word = log("word.log", first, _stamped(5, "Loading weights took 1.5 seconds"))
    assert main(["timeline", word, "--pattern", r"w=Loading (\w+) took"]) == 2
    assert f"{word} line 2: w captured 'weights', not a finite number" in _error_line(capsys)

    back = log("back.log", first, _stamped(5, "Loading weights took 100.5 seconds"),
               STAGE2.format(pid=40, h=9, m=0, s=5, message="Model loading took 1.0 GiB and 2 seconds"))
    assert main(["timeline", back, "--json"]) == 0
    captured = capsys.readouterr()
    document = _strict_json(captured.out)["timelines"][0]
    assert [w.split(":")[0] for w in document["warnings"]] == ["before-start", "before-start", "clock-back"]
    assert f"clock-back: {back} line 3: stage-2 is stamped 3600 s before its line 2" in document["warnings"]
    assert captured.err.count("omni-loader: warning: ") == 3, captured.err
    for gap in ("nan", "-1", "inf"):  # a gap bound no clock gives: one line, as every seconds option
        assert main(["timeline", word, "--min-gap", gap]) == 2
        assert _error_line(capsys) == f"omni-loader: error: --min-gap {gap}: must be a finite number of seconds, 0 or more"


# --------------------------------------------------------------------------- tracebacks where one line is promised


def test_one_line_where_a_traceback_was(tmp_path, capsys, monkeypatch):
    """A serve-ab command with an unbalanced quote, a directory as a command, stage-server --simulate 1e10,
    audit, discovery-bench and traversal --repeats 0: each a traceback (or accepted); now one line, exit 2. An
    ASCII-only terminal (LC_ALL=C) got a UnicodeEncodeError for the first Δ, ·, → or —: now an escape."""
    import io

    from omni_loader.cli import main

    ab = ["serve-ab", "--health-url", "http://127.0.0.1:9/health", "--out", str(tmp_path / "ab")]
    for baseline, expected in ((f"{sys.executable} -c 'print(1)", "--baseline-cmd: No closing quotation"),
                               (str(tmp_path), f"--baseline-cmd: {tmp_path} is a directory, not a program")):
        assert main([*ab, "--baseline-cmd", baseline, "--optimized-cmd", "sleep 1"]) == 2
        assert expected in _error_line(capsys)
    assert main(["stage-server", "--simulate", "1e10", "--port", "0"]) == 2
    assert "--simulate 1e+10: a load of more than 0 and under 3600 seconds" in _error_line(capsys)
    for command in (["audit", "--arch", "resnet"], ["discovery-bench", "--size", "tiny"],
                    ["traversal", "--out", str(tmp_path / "sweep")]):
        assert main([*command, "--repeats", "0"]) == 2
        assert "--repeats 0: must be a whole number from 1" in _error_line(capsys)
    assert main(["traversal", "--out", str(tmp_path / "sweep"), "--warmup", "-1"]) == 2
    assert "--warmup -1: must be a whole number from 0 to 10,000" in _error_line(capsys)
    assert not (tmp_path / "ab").exists() and not (tmp_path / "sweep").exists()

    log = tmp_path / "unicode.log"
    log.write_text(_stamped(0, "first") + _stamped(1, "Using model weights format ['*.pt'] \u0394 \u2192 \u2248 \u00b7")
                   + _stamped(5, "Loading weights took 1.5 seconds"), encoding="utf-8")
    ascii_out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", ascii_out)
    assert main(["timeline", str(log)]) == 0
    ascii_out.flush()
    assert "['*.pt'] \\u0394 \\u2192 \\u2248 \\xb7" in ascii_out.buffer.getvalue().decode("ascii")


@pytest.mark.subprocess
def test_serve_ab_fails_when_an_arm_never_started(tmp_path, capsys):
    """Every baseline run failed and serve-ab exited 0 with the optimized arm's summary alone: an arm without a
    successful run leaves nothing to compare, so it is one line and exit 1."""
    from omni_loader.cli import main
    from omni_loader.startup.one_run import free_port

    port = free_port()
    fails = shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"])
    healthy = shlex.join([sys.executable, "-c", SLOW_TO_BIND, str(port), "0"])  # answers 200 at once
    assert main(["serve-ab", "--baseline-cmd", fails, "--optimized-cmd", healthy, "--health-url",
                 f"http://127.0.0.1:{port}/health", "--warmup", "0", "--runs", "1", "--timeout", "60", "--grace", "1",
                 "--out", str(tmp_path / "ab")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("omni-loader: error: no measured run of the baseline arm succeeded; run 0 (baseline): "
                          "server exited with status 3"), err


# --------------------------------------------------------------------------- smaller


def test_hub_cache_and_download_faults_and_notebook_parameters(tmp_path, tiny_snapshot, monkeypatch):
    """A refs/main that climbs out of the Hub cache was followed (its directory loaded); a --download that failed
    advised --download; a notebook parameter of the wrong type was not named (or "False" taken as true)."""
    from huggingface_hub import constants

    from omni_loader.errors import CheckpointError, OmniLoaderError
    from omni_loader.notebook.parameters import check_parameters
    from omni_loader.token2wav.checkpoint import find_in_hub_cache, place_in_hub_cache

    cache, model = tmp_path / "hub", "Org/Model"
    place_in_hub_cache(tiny_snapshot, cache, model)
    ref = cache / "models--Org--Model" / "refs" / "main"
    assert find_in_hub_cache(model, cache_dir=cache).source == "hub-cache"  # a commit hash: followed
    ref.write_text("../../" + tiny_snapshot.name)
    (cache / tiny_snapshot.name).symlink_to(tiny_snapshot)  # where the climb leads: a loadable snapshot
    with pytest.raises(CheckpointError, match=r"refs/main holds '\.\./\.\./.*', not a commit hash: it would "
                                              "lead out of the Hugging Face cache; refusing to follow it"):
        find_in_hub_cache(model, cache_dir=cache)

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # no network: the download fails at once
    with pytest.raises(CheckpointError) as failed:
        find_in_hub_cache("Nobody/Model", cache_dir=tmp_path / "empty", download=True)
    assert str(failed.value).startswith("--download of 'Nobody/Model' from ") and "pass --download" not in \
        str(failed.value) and "\n" not in str(failed.value)

    def cell(**injected: object) -> dict[str, object]:  # a parameters cell as a notebook writes it, then papermill's
        namespace: dict[str, object] = {}
        exec("from typing import Optional\nruns: int = 5\nin_process: bool = False\nout_dir: Optional[str] = None\n"
             "seconds: float = 2.0\ntags: list[str] = []\n", namespace)
        return {**namespace, **injected}

    assert check_parameters(cell(seconds=2)) == {"runs": 5, "in_process": False, "out_dir": None, "seconds": 2,
                                                 "tags": []}
    for name, value, needs in (("runs", "3", "is a str; it needs a whole number"),
                               ("in_process", "False", "is a str; it needs True or False"),
                               ("runs", True, "is a bool; it needs a whole number"),
                               ("seconds", float("nan"), "is a float; it needs a number"),
                               ("out_dir", 5, "is an int; it needs a string or None"),
                               ("tags", "a,b", "is a str; it needs a list")):
        with pytest.raises(OmniLoaderError, match=f"^notebook parameter {name}=.* {needs}$"):
            check_parameters(cell(**{name: value}))


@pytest.mark.subprocess
def test_a_shard_that_may_not_be_read_says_permission_denied(tmp_path, tiny_snapshot):
    """safetensors says "No such file or directory" of a shard it may not read; the kit asks the file system."""
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="omni-loader-perm-"))  # world-traversable: read as nobody below
    try:
        root.chmod(0o755)
        snap = root / "snap"
        shutil.copytree(tiny_snapshot, snap)
        snap.chmod(0o755)
        shard = sorted(snap.glob("*.safetensors"))[0]
        shard.chmod(0)
        code = ("import os, sys, safetensors, safetensors.torch\n"
                "from omni_loader.token2wav.checkpoint import iter_token2wav_weights, open_snapshot\n"
                "from omni_loader.errors import CheckpointError\n"
                f"snap = open_snapshot({str(snap)!r})\n"
                "if os.geteuid() == 0:\n    os.setgid(65534); os.setuid(65534)  # root reads anything: be nobody\n"
                "try:\n    list(iter_token2wav_weights(snap))\nexcept CheckpointError as exc:\n    print(exc)\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.stdout.strip() == f"cannot read shard {shard}: Permission denied (the file system's answer; the " \
                                  "file's content was not read)", done.stdout + done.stderr[-2000:]


# A Ctrl-C that strikes the first time the module named in argv[1] is imported, then omni-loader's command line.
STRIKE_IN_IMPORT = r"""
import sys
target = sys.argv[1]
class Strike:
    armed = True
    def find_spec(self, name, path=None, target_=None):
        if self.armed and name == target:
            self.armed = False
            raise KeyboardInterrupt
sys.meta_path.insert(0, Strike())
from omni_loader.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_ctrl_c_inside_an_import_at_the_look_ends_in_the_continue_line(tmp_path, tiny_snapshot):
    """Ctrl-C while a sequential design's look imports pandas (every run it reads ended) is the one "interrupted ...
    continue with ..." line, exit 130, the path shell-quoted (it once re-imported the half-made pandas:
    AttributeError, or a segfault)."""
    out = tmp_path / "with space" / "res"
    proc = subprocess.run([sys.executable, "-c", STRIKE_IN_IMPORT, "pandas.core.frame", "reproduce", "--checkpoint",
                           tiny_snapshot, "--warmup", "0", "--runs", "6", "--design", "sequential", "--out", out],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == (f"interrupted: 10 runs saved in {out}; continue with: "
                                                    f"omni-loader reproduce --resume --out '{out}'")
    assert "Traceback" not in proc.stderr


def test_the_continue_line_is_shell_quoted():
    from omni_loader.results.integrity import resume_command

    path = "/results/a b\nc"
    assert shlex.split(resume_command(path, {})) == ["omni-loader", "reproduce", "--resume", "--out", path]
    assert shlex.split(resume_command(path, {}, "serve-ab"))[1] == "serve-ab"


# synth whose every shard write then waits: a SIGTERM finds its temporary folder half-written
SLOW_SYNTH = r"""
import sys, time
import safetensors.torch as st
real = st.save_file
def save_file(*args, **kwargs):
    real(*args, **kwargs)
    time.sleep(600)
st.save_file = save_file
from omni_loader.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.subprocess
def test_sigterm_during_synth_removes_its_temporary_and_a_dead_runs_is_removed_next_time(tmp_path):
    """SIGTERM while synth writes cleans up as Ctrl-C does (its hidden temporary, GBs for --size full, was left);
    a temporary left by a run killed outright is removed by the next run, one whose maker lives is not."""
    import psutil

    from omni_loader.token2wav.checkpoint import synthesize

    out = tmp_path / "snap"
    proc = subprocess.Popen([sys.executable, "-c", SLOW_SYNTH, "synth", "--size", "tiny", "--out", out], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert _wait_for(lambda: any(p.is_file() for p in tmp_path.glob(".snap.tmp-*/*")), bound=120), proc.stderr
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "omni-loader: interrupted" in stderr.splitlines(), stderr
    assert sorted(os.listdir(tmp_path)) == []

    dead = 2**22 + 1  # above Linux's largest pid: no process has it
    assert not psutil.pid_exists(dead)
    for pid in (dead, os.getpid()):
        (tmp_path / f".snap.tmp-{pid}-abcdefgh").mkdir()
        (tmp_path / f".snap.tmp-{pid}-abcdefgh" / "model-00001-of-00002.safetensors").write_bytes(b"x" * 1000)
    synthesize(out, size="tiny")
    assert sorted(os.listdir(tmp_path)) == [f".snap.tmp-{os.getpid()}-abcdefgh", "snap"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_sigterm_stops_reproduce_as_ctrl_c_does_children_included(tmp_path, tiny_snapshot):
    """SIGTERM during reproduce: the same "interrupted ... continue with ..." line, exit 130, and no child (the fork
    server, a worker) left running."""
    import psutil

    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "omni_loader", "reproduce", "--checkpoint", tiny_snapshot,
                             "--warmup", "0", "--runs", "20", "--out", out], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    runs = out / "runs.csv"
    assert _wait_for(lambda: runs.is_file() and runs.read_text().count("\n") > 10, bound=240), proc.stderr
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stdout.strip().splitlines()[-1].endswith(f"continue with: omni-loader reproduce --resume --out {out}")
    assert _wait_for(lambda: not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE],
                     bound=30), children
