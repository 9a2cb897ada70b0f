"""serve-ab: time two server commands from spawn to their first HTTP 200 on ``/health``.

This is the PR's "Startup to /health" measurement, made repeatable. For each planned run:

1. the health URL's port must be free (waited for briefly, else the run fails with one line);
2. the command (``shlex``-split, no shell) is spawned in its own process group
   (``start_new_session=True``), stdout and stderr captured to ``OUT/logs/<run_id>-<variant>.log``;
3. ``/health`` is polled every ``poll_interval`` seconds (short per-request timeout, no proxies);
   the run's figure is the time from just before the spawn to the first HTTP 200. A process that
   exits first, or no 200 within ``timeout`` seconds, makes the run ``failed`` with a one-line
   error, and the benchmark goes on;
4. the whole process group is stopped (SIGTERM, ``grace`` seconds, SIGKILL) and reaped, on every
   path out of the run including KeyboardInterrupt;
5. named figures are extracted from the captured log with regular expressions
   (:data:`DEFAULT_PATTERNS` match vLLM's lines and ``stage-server``'s own), converted to seconds;
6. the run's rows are appended to ``runs.csv`` at once (phase ``startup_to_health``, plus one row
   per extracted figure with phase = the pattern's name and parent ``startup_to_health``; source
   ``server``), so an interrupted benchmark keeps every run it finished.

The plan is a warm-up of each variant first (baseline, optimized; ``warmup`` times), then the
measured runs alternating baseline, optimized, baseline, ... (``order="alternate"``) or all
baseline runs then all optimized runs (``order="blocked"``).

Library use (``reproduce --with-startup``)::

    port = free_port()
    cmd_a, cmd_b, url = stage_server_commands(snapshot_dir, port)
    serve_ab(cmd_a, cmd_b, url, out="results/startup", warmup=1, runs=5)
"""

from __future__ import annotations

import argparse
import errno
import http.client
import math
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import OmniLoaderError, ResultsError
from .runner import ORDERS, VARIANTS, PlannedRun, plan_runs

PHASE = "startup_to_health"
SOURCE = "server"

# Figures read from server logs. The first capture group (or a group named ``value``) is the number;
# its unit is a group named ``unit`` if the pattern has one, else the word that follows the number
# in the log (ms, s, seconds, min, ...), else seconds. Every match counts: the first is recorded as
# NAME, later ones (e.g. one per vLLM-Omni stage) as NAME#2, NAME#3, ...
DEFAULT_PATTERNS: dict[str, str] = {
    # vLLM's default model loader, and stage-server
    "weight_loading": r"Loading weights took ([0-9.]+) seconds",
    # vLLM's model runner ("Model loading took 9.94 GiB [memory] and 12.3 seconds"), and stage-server
    "model_loading": r"Model loading took [0-9.]+ ?GiB(?: memory)? and ([0-9.]+) ?s",
    # vLLM's engine start-up after the weights (profile, KV cache, warm-up / CUDA graphs)
    "init_engine": r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) seconds",
    # stage-server's buffer-discovery line
    "buffer_discovery": r"Buffer discovery took ([0-9.]+) ms",
}

_UNITS = {
    "ns": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}
_UNIT_ALTERNATIVES = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))
_UNIT_AFTER = re.compile(r"\s*(" + _UNIT_ALTERNATIVES + r")(?!\w)", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")

Command = str | Sequence[str]
Progress = bool | Callable[[str], None] | None


# --------------------------------------------------------------------------- log patterns


def compile_patterns(patterns: Mapping[str, str | re.Pattern[str]]) -> dict[str, re.Pattern[str]]:
    """Check names and regular expressions; each needs a capture group (or one named ``value``)."""
    compiled: dict[str, re.Pattern[str]] = {}
    for name, pattern in patterns.items():
        if not _NAME.match(name):
            raise OmniLoaderError(f"log pattern name {name!r} must be letters, digits, '_', '.' or '-'")
        try:
            rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        except re.error as exc:
            raise OmniLoaderError(f"log pattern {name}={pattern!r} is not a valid regular expression ({exc})") from None
        if rx.groups < 1:
            raise OmniLoaderError(f"log pattern {name}={rx.pattern!r} has no capture group for the figure")
        compiled[name] = rx
    return compiled


def parse_pattern_args(specs: Iterable[str], defaults: bool = True) -> dict[str, str]:
    """``NAME=REGEX`` strings on top of :data:`DEFAULT_PATTERNS` (a same-named one replaces the default)."""
    patterns = dict(DEFAULT_PATTERNS) if defaults else {}
    for spec in specs:
        name, sep, regex = spec.partition("=")
        if not sep or not name or not regex:
            raise OmniLoaderError(f"--log-pattern {spec!r} is not NAME=REGEX")
        patterns[name.strip()] = regex
    compile_patterns(patterns)
    return patterns


def to_seconds(value: float, unit: str | None) -> float:
    """``value`` in ``unit`` (ms, s, seconds, min, ...) as seconds; no or unknown unit: seconds."""
    if not unit:
        return value
    key = unit.strip()
    factor = _UNITS.get(key, _UNITS.get(key.lower()))
    return value if factor in (None, 1.0) else float(f"{value * factor:.12g}")  # 0.434 ms -> 0.000434


def extract_figures(text: str, patterns: Mapping[str, str | re.Pattern[str]]) -> list[tuple[str, float]]:
    """Every figure the patterns find in ``text``, as ``(name, seconds)``, in pattern order.

    Repeated matches of one pattern are named NAME, NAME#2, NAME#3, ... in log order.
    """
    figures: list[tuple[str, float]] = []
    for name, rx in compile_patterns(patterns).items():
        count = 0
        for m in rx.finditer(text):
            group: int | str = "value" if "value" in rx.groupindex else 1
            raw = m.group(group)
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                continue
            if "unit" in rx.groupindex and m.group("unit"):
                unit = m.group("unit")
            else:
                after = _UNIT_AFTER.match(text, m.end(group))
                unit = after.group(1) if after else None
            count += 1
            figures.append((name if count == 1 else f"{name}#{count}", to_seconds(value, unit)))
    return figures


# --------------------------------------------------------------------------- ports and commands


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS's pick; free until someone binds it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (binding with SO_REUSEADDR, as servers do)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return True
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
    # Binding cannot tell (not a local address, a privileged port): a connection that succeeds means in use.
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return False
    except OSError:
        return True


def wait_port_free(host: str, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if port_is_free(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def health_address(url: str) -> tuple[str, int]:
    """(host, port) of a health URL; one clear line when it is not an http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OmniLoaderError(f"--health-url {url!r} is not an http:// or https:// URL with a host")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise OmniLoaderError(f"--health-url {url!r} has an invalid port") from None
    return parts.hostname, port


def stage_server_commands(
    checkpoint_dir: str | os.PathLike[str],
    port: int | None = None,
    port_b: int | None = None,
    layout: str = "vllm-omni",
    device: str = "auto",
    dtype: str = "float32",
    host: str = "127.0.0.1",
    python: str | None = None,
    extra: Sequence[str] = (),
) -> tuple[str, str, str]:
    """``(baseline_cmd, optimized_cmd, health_url)``: two ``python -m omni_loader stage-server`` commands.

    Both listen on the same port (``port``, a free one when None), one after the other, so one
    health URL serves both. ``port_b`` exists for callers that pass it; it must equal ``port``.
    """
    port = free_port(host) if port is None else int(port)
    if port_b is not None and int(port_b) != port:
        raise ValueError("serve-ab polls one health URL: both stage servers must use the same port")
    python = python or sys.executable
    cmds = []
    for variant in VARIANTS:
        argv = [python, "-m", "omni_loader", "stage-server", "--variant", variant,
                "--checkpoint", str(checkpoint_dir), "--layout", layout, "--device", device, "--dtype", dtype,
                "--host", host, "--port", str(port), *extra]
        cmds.append(shlex.join(argv))
    url_host = f"[{host}]" if ":" in host else host
    return cmds[0], cmds[1], f"http://{url_host}:{port}/health"


def split_command(cmd: Command, what: str = "command") -> list[str]:
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    if not argv:
        raise OmniLoaderError(f"{what} is empty")
    exe = argv[0]
    if (os.sep in exe and not os.access(exe, os.X_OK)) or (os.sep not in exe and shutil.which(exe) is None):
        raise OmniLoaderError(f"{what}: program not found or not executable: {exe}")
    return argv


# --------------------------------------------------------------------------- processes


def launch(argv: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Spawn ``argv`` in a new session (its own process group), stdout+stderr appended to ``log_path``."""
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")  # a server killed at the end still leaves its lines
    with open(log_path, "ab") as log:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=child_env, close_fds=True)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    if os.path.isdir("/proc/self"):
        members = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read().decode(errors="replace")
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
            if len(fields) > 2 and fields[0] != "Z" and fields[0] != "X" and int(fields[2]) == pgid:
                members.append(int(entry))
        return members
    try:
        os.killpg(pgid, 0)
        return [pgid]
    except ProcessLookupError:
        return []
    except PermissionError:
        return [pgid]


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_process_group(proc: subprocess.Popen, grace: float = 10.0) -> list[int]:
    """SIGTERM the process group of ``proc``, SIGKILL what is left after ``grace`` s, reap ``proc``.

    Returns the pids still alive at the end (normally none).
    """
    pgid = proc.pid  # start_new_session=True: the leader's pid is the group id
    try:
        proc.poll()
        if proc.returncode is None or group_members(pgid):
            _killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + max(grace, 0.0)
            while time.monotonic() < deadline:
                if proc.poll() is not None and not group_members(pgid):
                    break
                time.sleep(0.05)
            if proc.poll() is None or group_members(pgid):
                _killpg(pgid, signal.SIGKILL)
    except BaseException:
        _killpg(pgid, signal.SIGKILL)  # interrupted while stopping: leave nothing behind
        raise
    finally:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    deadline = time.monotonic() + 5.0
    left = group_members(pgid)
    while left and time.monotonic() < deadline:
        _killpg(pgid, signal.SIGKILL)
        time.sleep(0.05)
        left = group_members(pgid)
    return left


def wait_healthy(proc: subprocess.Popen, url: str, started: float, timeout: float,
                 poll_interval: float = 0.05, request_timeout: float = 1.0) -> tuple[float | None, str | None]:
    """Seconds from ``started`` (a perf_counter reading) to the first HTTP 200, or (None, one-line error)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    last = "no answer yet"
    while True:
        rc = proc.poll()
        if rc is not None:
            how = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
            return None, f"server {how} before {url} answered 200 (last: {last})"
        remaining = timeout - (time.perf_counter() - started)
        if remaining <= 0:
            return None, f"no HTTP 200 from {url} within {timeout:g} s (last: {last})"
        try:
            with opener.open(url, timeout=max(0.05, min(request_timeout, remaining))) as resp:
                if resp.status == 200:
                    return time.perf_counter() - started, None
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
            exc.close()
        except urllib.error.URLError as exc:
            last = _reason(exc.reason)
        except (OSError, http.client.HTTPException) as exc:
            last = _reason(exc)
        time.sleep(max(0.0, min(poll_interval, timeout - (time.perf_counter() - started))))


def _reason(exc: Any) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "request timed out"
    text = str(getattr(exc, "strerror", None) or exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# --------------------------------------------------------------------------- plan and runs


@dataclass
class RunOutcome:
    run: PlannedRun
    status: str
    seconds: float | None
    error: str | None
    log: Path
    figures: list[tuple[str, float]] = field(default_factory=list)


def outcome_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    """runs.csv rows of one run: startup_to_health, then one per extracted log figure."""
    run = outcome.run
    base = {"run_id": run.run_id, "variant": run.variant, "warmup": run.warmup,
            "order": "" if run.order is None else run.order, "status": outcome.status,
            "error": outcome.error or "", "source": SOURCE}
    rows = [dict(base, phase=PHASE, parent="", seconds=outcome.seconds)]
    rows += [dict(base, phase=name, parent=PHASE, seconds=seconds) for name, seconds in outcome.figures]
    return rows


def run_one(run: PlannedRun, argv: Sequence[str], url: str, host: str, port: int, logs: Path, *, timeout: float,
            grace: float, poll_interval: float, port_wait: float,
            patterns: Mapping[str, re.Pattern[str]]) -> RunOutcome:
    """One launch: port check, spawn, poll /health, stop the group, read the log. Never leaves the group."""
    log = logs / f"{run.run_id}-{run.variant}.log"
    with open(log, "wb") as fh:  # no command here: its text could match a log pattern (it is in metadata.json)
        fh.write(f"# omni-loader serve-ab: run {run.run_id}, {run.variant}{', warm-up' if run.warmup else ''}\n".encode())
    if not wait_port_free(host, port, port_wait):
        error = f"port {host}:{port} of {url} is still in use after {port_wait:g} s; run not started"
        return RunOutcome(run, "failed", None, error, log)
    started = time.perf_counter()
    try:
        proc = launch(argv, log)
    except OSError as exc:
        return RunOutcome(run, "failed", None, f"cannot start {argv[0]}: {exc.strerror or exc}", log)
    try:
        seconds, error = wait_healthy(proc, url, started, timeout, poll_interval)
    finally:
        left = stop_process_group(proc, grace)
    if left and error is None:
        error = f"processes {left} of the server's group survived SIGKILL"
    try:
        text = log.read_text(errors="replace")
    except OSError:
        text = ""
    figures = extract_figures(text, patterns)
    status = "ok" if seconds is not None and error is None else "failed"
    if error:
        error = f"{error}; log {log}"
    return RunOutcome(run, status, seconds if status == "ok" else None, error, log, figures)


def _progress_fn(progress: Progress) -> Callable[[str], None]:
    if callable(progress):
        return progress
    if progress:
        return lambda line: print(f"[serve-ab] {line}", file=sys.stderr, flush=True)
    return lambda line: None


def _describe(outcome: RunOutcome) -> str:
    run = outcome.run
    what = f"run {run.run_id} {run.variant}" + (" (warm-up)" if run.warmup else f" #{run.order}")
    if outcome.status != "ok":
        return f"{what}: FAILED: {outcome.error}"
    figs = ", ".join(f"{n} {s:.3f} s" for n, s in outcome.figures)
    return f"{what}: healthy after {outcome.seconds:.3f} s" + (f" ({figs})" if figs else "")


def _prepare_out(out: Path) -> tuple[dict[str, Any] | None, int]:
    """(metadata of another benchmark to add to, first run_id): serve-ab can share a results directory."""
    from .results import METADATA_FILE, RUNS_FILE, read_metadata

    if (out / METADATA_FILE).is_file():
        record = read_metadata(out)
        if record.get("kind") == "serve-ab" or "serve_ab" in record:
            raise ResultsError(f"{out} already holds a serve-ab result; choose a new --out")
        from .results import read_runs

        frame = read_runs(out)
        ids = frame["run_id"].tolist() if len(frame) else []
        first = max(int(i) for i in ids) + 1 if ids else 0
        record.pop("schema_version", None)
        return record, first
    if (out / RUNS_FILE).exists():
        raise ResultsError(f"{out} holds {RUNS_FILE} but no {METADATA_FILE}; choose a new --out")
    return None, 0


# serve-ab's spec keys (metadata.json) and the options that set them, to name a conflict on --resume.
SPEC_OPTIONS = {"baseline_cmd": "--baseline-cmd", "optimized_cmd": "--optimized-cmd", "health_url": "--health-url",
                "warmup": "--warmup", "runs": "--runs", "order": "--order", "timeout_s": "--timeout",
                "grace_s": "--grace", "poll_interval_s": "--poll-interval", "port_wait_s": "--port-wait",
                "patterns": "--log-pattern"}


def saved_serve_ab(out: str | os.PathLike[str]) -> dict[str, Any]:
    """The serve-ab record of a results directory (its own, or the one under a reproduce's ``serve_ab``)."""
    from .results import read_metadata

    metadata = read_metadata(out)
    record = metadata if metadata.get("kind") == "serve-ab" else metadata.get("serve_ab")
    if not isinstance(record, dict) or not isinstance(record.get("spec"), dict):
        raise ResultsError(f"--resume: {out} holds no serve-ab benchmark to continue")
    return record


def serve_ab_conflicts(saved: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """One phrase per spec key of ``given`` that differs from ``saved``: ``--runs 6 (saved: 5)``."""
    def shown(value: Any) -> str:
        if isinstance(value, dict):
            return ",".join(f"{k}={v}" for k, v in value.items()) or "none"
        return str(value)

    return [f"{SPEC_OPTIONS.get(k, k)} {shown(v)} (saved: {shown(saved.get(k))})"
            for k, v in given.items() if v != saved.get(k)]


def resume_serve_ab(out: str | os.PathLike[str], progress: Progress = True) -> Path:
    """Continue an interrupted serve-ab benchmark with the spec saved in ``out``: the missing runs only."""
    spec = saved_serve_ab(out)["spec"]
    return serve_ab(spec["baseline_cmd"], spec["optimized_cmd"], spec["health_url"], out, warmup=spec["warmup"],
                    runs=spec["runs"], timeout=spec["timeout_s"], patterns=spec["patterns"], progress=progress,
                    order=spec["order"], grace=spec["grace_s"], poll_interval=spec["poll_interval_s"],
                    port_wait=spec["port_wait_s"], resume=True)


def _resume_host(out: Path) -> dict[str, Any] | None:
    """The reproduce record that holds this serve-ab one (None when serve-ab owns the directory)."""
    from .results import read_metadata

    record = read_metadata(out)
    record.pop("schema_version", None)
    return None if record.get("kind") == "serve-ab" else {k: v for k, v in record.items() if k != "serve_ab"}


def _resume_record(out: Path, record: dict[str, Any], saved: dict[str, Any],
                   counts: dict[str, int]) -> tuple[dict[str, Any], set[int]]:
    """The saved record, continued: spec and plan checked, untrusted rows set aside, finished runs counted."""
    from .metadata import now_iso
    from .results import REJECTED_FILE, check_results, set_aside_rejected

    keys = [k for k in SPEC_OPTIONS if k in saved["spec"]]
    conflicts = serve_ab_conflicts(saved["spec"], {k: record["spec"][k] for k in keys})
    if not conflicts and saved.get("plan") != record["plan"]:
        conflicts = ["the run plan"]
    if conflicts:
        raise ResultsError(f"--resume: {out} holds a serve-ab benchmark made with another spec: {', '.join(conflicts)}")
    check = check_results(out)
    moved = set_aside_rejected(check)
    continued = {**saved, "status": "running"}
    continued.setdefault("resumed_at", []).append(now_iso())
    if moved:
        continued.setdefault("repairs", []).append(
            {"at": now_iso(), "rows": moved, "file": REJECTED_FILE, "why": list(check.rejected_because)})
    ids = {int(r["run_id"]) for r in saved.get("plan", [])}
    mine = check.frame[(check.frame["source"] == SOURCE) & (check.frame["phase"] == PHASE)
                       & check.frame["run_id"].isin(ids)]
    for status in mine["status"]:
        counts[status if status in counts else "failed"] += 1
    return continued, set(mine["run_id"].astype(int))


def serve_ab(
    baseline_cmd: Command,
    optimized_cmd: Command,
    health_url: str,
    out: str | os.PathLike[str],
    warmup: int = 1,
    runs: int = 5,
    timeout: float = 600.0,
    patterns: Mapping[str, str | re.Pattern[str]] | None = None,
    progress: Progress = True,
    *,
    order: str = "alternate",
    grace: float = 10.0,
    poll_interval: float = 0.05,
    port_wait: float = 10.0,
    device: str = "auto",
    model: str | None = None,
    resume: bool = False,
) -> Path:
    """Run the A/B start-up benchmark and return the results directory (``out``).

    ``patterns`` defaults to :data:`DEFAULT_PATTERNS`. ``device`` only chooses which device the
    environment record describes; ``model`` (what the servers serve) is recorded as given. A fresh ``out`` gets a metadata.json of kind ``serve-ab``. When
    ``out`` already holds another benchmark (``reproduce --with-startup``), the rows are appended
    with run_ids after its runs and this benchmark's record is stored under its ``"serve_ab"`` key.
    Log figures keep their names; their rows have source ``server``, which keeps them apart from
    the loader's own phases of the same name.

    ``resume`` continues the serve-ab benchmark saved in ``out`` (same spec, or a one-line refusal
    naming what differs): rows the integrity check rejects are set aside, missing runs are run.
    The directory's writer lock is held throughout.
    """
    from .results import writer_lock

    with writer_lock(out):
        return _serve_ab(baseline_cmd, optimized_cmd, health_url, out, warmup, runs, timeout, patterns, progress,
                         order=order, grace=grace, poll_interval=poll_interval, port_wait=port_wait, device=device,
                         model=model, resume=resume)


def _serve_ab(baseline_cmd: Command, optimized_cmd: Command, health_url: str, out: str | os.PathLike[str],
              warmup: int, runs: int, timeout: float, patterns: Mapping[str, str | re.Pattern[str]] | None,
              progress: Progress, *, order: str, grace: float, poll_interval: float, port_wait: float, device: str,
              model: str | None, resume: bool) -> Path:
    from .metadata import command_line, environment, now_iso
    from .results import append_rows, write_metadata

    say = _progress_fn(progress)
    argvs = {"baseline": split_command(baseline_cmd, "--baseline-cmd"),
             "optimized": split_command(optimized_cmd, "--optimized-cmd")}
    host, port = health_address(health_url)
    if timeout <= 0 or grace < 0 or poll_interval <= 0:
        raise OmniLoaderError("serve-ab needs --timeout > 0, --grace >= 0 and a positive poll interval")
    pattern_src = dict(DEFAULT_PATTERNS if patterns is None else patterns)
    compiled = compile_patterns(pattern_src)
    out = Path(out)
    if resume:
        saved = saved_serve_ab(out)
        host_record = _resume_host(out)
        first_id = min(int(r["run_id"]) for r in saved["plan"]) if saved.get("plan") else 0
    else:
        host_record, first_id = _prepare_out(out)
    plan = plan_runs(warmup, runs, order, first_id=first_id)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    record: dict[str, Any] = {
        "kind": "serve-ab",
        "spec": {
            "baseline_cmd": shlex.join(argvs["baseline"]),
            "optimized_cmd": shlex.join(argvs["optimized"]),
            "health_url": health_url,
            "warmup": warmup,
            "runs": runs,
            "order": order,
            "timeout_s": timeout,
            "grace_s": grace,
            "poll_interval_s": poll_interval,
            "port_wait_s": port_wait,
            "patterns": {k: (v.pattern if isinstance(v, re.Pattern) else v) for k, v in pattern_src.items()},
            "measure": "perf_counter from just before spawn to the first HTTP 200 on health_url",
        },
        "warmup": warmup,
        "repeats": runs,
        "order": order,
        "model": model,
        "plan": [{"run_id": r.run_id, "variant": r.variant, "warmup": r.warmup, "order": r.order} for r in plan],
        "environment": environment(device),
        "command_line": command_line(),
        "started_at": now_iso(),
        "status": "running",
    }

    def save(status: str, counts: dict[str, int]) -> None:
        record.update(status=status, runs_ok=counts["ok"], runs_failed=counts["failed"])
        if status != "running":
            record["finished_at" if status == "complete" else "interrupted_at"] = now_iso()
        if host_record is None:
            write_metadata(out, record)
        else:
            write_metadata(out, {**host_record, "serve_ab": record})

    counts = {"ok": 0, "failed": 0}
    done: set[int] = set()
    if resume:
        record, done = _resume_record(out, record, saved, counts)
    save("running", counts)
    say(f"{len(plan)} runs ({warmup} warm-up of each, then {runs} of each, {order}); health {health_url}; "
        f"logs in {logs}")
    status = "interrupted"
    try:
        for run in (r for r in plan if r.run_id not in done):
            outcome = run_one(run, argvs[run.variant], health_url, host, port, logs, timeout=timeout, grace=grace,
                              poll_interval=poll_interval, port_wait=port_wait, patterns=compiled)
            append_rows(out, outcome_rows(outcome))
            counts[outcome.status] += 1
            save("running", counts)
            say(_describe(outcome))
        status = "complete"
    finally:
        save(status, counts)
    return out


# --------------------------------------------------------------------------- summary and CLI


def summarize(out: str | os.PathLike[str]) -> list[str]:
    """Median, min, max and n per variant for each server phase of ``out`` (measured, ok runs)."""
    from .results import check_results

    frame = check_results(out).frame  # rows that cannot be trusted are left out
    frame = frame[(frame["source"] == SOURCE) & ~frame["warmup"] & (frame["status"] == "ok")]
    lines = []
    phases = [PHASE] + sorted(p for p in set(frame["phase"]) if p != PHASE)
    for phase in phases:
        for variant in VARIANTS:
            vals = [v for v in frame[(frame["phase"] == phase) & (frame["variant"] == variant)]["seconds"]
                    if not math.isnan(v)]
            if vals:
                med = statistics.median(vals)
                scale, unit = (1.0, "s") if med >= 1 else (1e3, "ms")
                lines.append(f"  {phase:<20} {variant:<10} median {med * scale:10.3f} {unit:<2}   "
                             f"min {min(vals) * scale:10.3f}   max {max(vals) * scale:10.3f}   n {len(vals)}")
    return lines


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline-cmd", metavar="CMD", help="server command of the baseline (no shell; required "
                   "unless --resume)")
    p.add_argument("--optimized-cmd", metavar="CMD", help="server command of the optimized version (idem)")
    p.add_argument("--health-url", metavar="URL", help="e.g. http://127.0.0.1:8091/health (idem)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up runs of each variant first (default 1)")
    p.add_argument("--runs", type=int, default=5, help="measured runs of each variant (default 5)")
    p.add_argument("--order", choices=ORDERS, default="alternate", help="measured-run order (default alternate)")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="a run fails when /health has not answered 200 after S seconds (default 600)")
    p.add_argument("--grace", type=float, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping a server (default 10)")
    p.add_argument("--poll-interval", type=float, default=0.05, metavar="S", help="health poll period (default 0.05)")
    p.add_argument("--port-wait", type=float, default=10.0, metavar="S",
                   help="how long to wait for the health port to be free before a launch (default 10)")
    p.add_argument("--log-pattern", action="append", default=[], metavar="NAME=REGEX",
                   help="extract a figure from each run's log (first group; unit read after it); repeatable; "
                        f"defaults: {', '.join(DEFAULT_PATTERNS)}")
    p.add_argument("--no-default-patterns", action="store_true", help="use only the --log-pattern ones")
    p.add_argument("--device", default="auto",
                   help="device described in the environment record (default auto: the GPU torch sees, else the CPU)")
    p.add_argument("--model", metavar="NAME", help="what the servers serve, recorded in metadata.json")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (runs.csv, metadata.json, logs/)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted serve-ab benchmark in --out with its saved spec (options given "
                        "must agree with it)")


# serve-ab's options (argparse dest) -> its spec keys in metadata.json.
SPEC_DESTS = {"baseline_cmd": "baseline_cmd", "optimized_cmd": "optimized_cmd", "health_url": "health_url",
              "warmup": "warmup", "runs": "runs", "order": "order", "timeout": "timeout_s", "grace": "grace_s",
              "poll_interval": "poll_interval_s", "port_wait": "port_wait_s"}


def check_resume_args(args: argparse.Namespace) -> None:
    """serve-ab --resume: the options typed must agree with the saved spec (the rest are taken from it)."""
    from .cli import given_options

    saved = saved_serve_ab(args.out)["spec"]
    given = given_options(args)
    values = {key: getattr(args, dest) for dest, key in SPEC_DESTS.items() if dest in given}
    for key in ("baseline_cmd", "optimized_cmd"):
        if key in values:
            values[key] = shlex.join(split_command(values[key], SPEC_OPTIONS[key]))
    if given & {"log_pattern", "no_default_patterns"}:
        values["patterns"] = parse_pattern_args(args.log_pattern, defaults=not args.no_default_patterns)
    conflicts = serve_ab_conflicts(saved, values)
    if conflicts:
        raise ResultsError(f"--resume --out {args.out}: options that contradict the saved serve-ab benchmark: "
                           f"{', '.join(conflicts)}; drop them (the spec comes from metadata.json) or choose another "
                           "--out")


def run_cli(args: argparse.Namespace) -> int:
    if args.resume:
        check_resume_args(args)
    else:
        missing = [f"--{d.replace('_', '-')}" for d in ("baseline_cmd", "optimized_cmd", "health_url")
                   if not getattr(args, d)]
        if missing:
            raise OmniLoaderError(f"serve-ab needs {', '.join(missing)} (or --resume --out DIR to continue a saved "
                                  "benchmark)")
    patterns = parse_pattern_args(args.log_pattern, defaults=not args.no_default_patterns)

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # the finally clauses stop the running server's group

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        if args.resume:
            out = resume_serve_ab(args.out, progress=True)
        else:
            out = serve_ab(args.baseline_cmd, args.optimized_cmd, args.health_url, args.out, warmup=args.warmup,
                           runs=args.runs, timeout=args.timeout, patterns=patterns, progress=True, order=args.order,
                           grace=args.grace, poll_interval=args.poll_interval, port_wait=args.port_wait,
                           device=args.device, model=args.model)
    except KeyboardInterrupt:
        print(f"interrupted: continue with: omni-loader serve-ab --resume --out {args.out}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"serve-ab: wrote {Path(out) / 'runs.csv'} and {Path(out) / 'metadata.json'}")
    lines = summarize(out)
    print("measured runs, status ok:" if lines else "no measured run succeeded")
    for line in lines:
        print(line)
    return 0
