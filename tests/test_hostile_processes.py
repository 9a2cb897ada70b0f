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


def processes_of(marker: str) -> list[int]:
    """Live, non-zombie processes whose command line holds ``marker``."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                found.append(p.info["pid"])
        except (psutil.Error, TypeError):
            continue
    return found


def _wait_for(what, bound: float = 60.0, step: float = 0.05):
    """Poll ``what()`` until it is truthy or ``bound`` seconds pass (a bound far from the work); its last value."""
    deadline = time.monotonic() + bound
    while not (value := what()) and time.monotonic() < deadline:
        time.sleep(step)
    return value


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
    kit = subprocess.Popen([sys.executable, "-m", "omni_loader", "serve-ab", "--baseline-cmd", server,
                            "--optimized-cmd", server, "--health-url", url, "--warmup", "0", "--runs", "1",
                            "--timeout", "120", "--out", str(tmp_path / "ab")],
                           cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert _wait_for(lambda: len(processes_of(marker)) >= 4 and _healthy(url)), "the server never came up"
        kit.kill()
        kit.wait(timeout=30)
        left = _wait_for(lambda: not processes_of(marker), bound=30) or processes_of(marker)
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
        group.kill()
        group.wait(timeout=30)
        left = _wait_for(lambda: not processes_of(marker), bound=30) or processes_of(marker)
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


@pytest.mark.subprocess
def test_download_from_a_hub_that_never_answers_is_bounded(tmp_path):
    """--download against a Hub that accepts and never answers retried for minutes; now the kit's bound (here
    OMNI_LOADER_HUB_TIMEOUT=2) ends it in one line that names the bound."""
    hub = subprocess.Popen([sys.executable, "-c", NEVER_ANSWERS], stdout=subprocess.PIPE, text=True)
    try:
        port = int(hub.stdout.readline())
        env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "OMNI_LOADER_HUB_TIMEOUT": "2",
               "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        env.pop("HF_HUB_OFFLINE", None)
        done = subprocess.run([sys.executable, "-m", "omni_loader", "reproduce", "--model", "Nobody/Model", "--hf-cache",
                               str(tmp_path / "hf"), "--download", "--device", "cpu"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=240)  # a bound far from the 2 s
    finally:
        hub.kill()
        hub.wait()
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 2, done.stderr[-2000:]
    assert last.startswith("omni-loader: error: the Hugging Face Hub (http://127.0.0.1:") and \
        "did not answer within 2 s (OMNI_LOADER_HUB_TIMEOUT sets the bound)" in last, last
