"""One startup run: a server command spawned in a process group of its own, timed to its first HTTP 200
on ``/health``, stopped with everything it started on every path out (KeyboardInterrupt included), its log
read for named figures. :mod:`~.serve_ab` plans and records the runs.
"""

from __future__ import annotations

import errno
import http.client
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..errors import OmniLoaderError
from .logfigures import extract_figures_from_file
from ..names import VARIANTS
from ..token2wav.options import LoadOptions
from ..results.planner import PlannedRun
from ..host.procs import ChildGuard, adopting_orphans, stop_group
from .server import DEFAULT_HOST
from ..results.rows import RunRow

PHASE = "startup_to_health"
SOURCE = "server"
Command = str | Sequence[str]


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port nothing listens on right now (the OS's pick; free until someone binds it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:  # TCP, the default type
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (binding with SO_REUSEADDR, as servers do)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
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


def stage_server_commands(checkpoint_dir: str | os.PathLike[str], port: int | None = None, *,
                          options: LoadOptions | None = None, **overrides: str | None) -> tuple[str, str, str]:
    """``(baseline_cmd, optimized_cmd, health_url)``: two ``python -m omni_loader stage-server`` commands on one
    port (a free one when None), loading with ``options``; ``overrides`` change single :class:`LoadOptions` fields.
    """
    opts = (options or LoadOptions()).replace(**overrides)
    return ab_commands(port, lambda variant: ["-m", "omni_loader", "stage-server", "--variant", variant,
                                              "--checkpoint", str(checkpoint_dir), *opts.argv()])


def ab_commands(port: int | None, words: Callable[[str], list[str]]) -> tuple[str, str, str]:
    """``(baseline_cmd, optimized_cmd, health_url)``: this Python with ``words(variant)``, listening on loopback at
    one port (a free one when None)."""
    port = free_port() if port is None else int(port)
    baseline, optimized = (shlex.join([sys.executable, *words(variant), "--host", DEFAULT_HOST, "--port", str(port)])
                           for variant in VARIANTS)
    return baseline, optimized, f"http://{DEFAULT_HOST}:{port}/health"


def split_command(cmd: Command, what: str = "command") -> list[str]:
    """``cmd`` as the words serve-ab starts (``shlex``, no shell); one line naming ``what`` when it cannot run."""
    try:
        argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    except ValueError as exc:  # shlex: "No closing quotation", "No escaped character"
        raise OmniLoaderError(f"{what}: {exc} in {str(cmd)[:200]!r}") from None
    if not argv:
        raise OmniLoaderError(f"{what} is empty")
    exe = argv[0]
    if os.sep in exe and os.path.isdir(exe):
        raise OmniLoaderError(f"{what}: {exe} is a directory, not a program")
    if (os.sep in exe and not os.access(exe, os.X_OK)) or (os.sep not in exe and shutil.which(exe) is None):
        raise OmniLoaderError(f"{what}: program not found or not executable: {exe}")
    return argv


def launch(argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> subprocess.Popen:
    """Spawn ``argv`` in its own process group, output appended to ``log_path``, ``env`` added to the environment."""
    child_env = {**os.environ, **env}
    child_env.setdefault("PYTHONUNBUFFERED", "1")  # a server killed at the end still leaves its lines
    with open(log_path, "ab") as log:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=child_env, close_fds=True)


Waiting = Callable[[float, str], None]  # (seconds waited so far, the last answer): what a progress bar says
WAIT_SAID_EVERY = 1.0  # seconds between two calls of a wait's ``on_wait``


def wait_healthy(proc: subprocess.Popen, url: str, started: float, timeout: float, poll_interval: float = 0.05,
                 on_wait: Waiting | None = None) -> tuple[float | None, str | None]:
    """Seconds from ``started`` (a perf_counter reading) to the first HTTP 200, or (None, one-line error);
    ``on_wait(seconds, last)`` is called at most every :data:`WAIT_SAID_EVERY` seconds after a non-200 answer."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    last, said = "no answer yet", None
    while True:
        rc = proc.poll()
        if rc is not None:
            how = f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}"
            return None, f"server {how} before {url} answered 200 (last: {last})"
        remaining = timeout - (time.perf_counter() - started)
        if remaining <= 0:
            return None, f"no HTTP 200 from {url} within {timeout:g} s (last: {last})"
        try:
            with opener.open(url, timeout=max(0.05, min(1.0, remaining))) as resp:  # a second a request at most
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
        now = time.perf_counter()
        if on_wait is not None and (said is None or now - said >= WAIT_SAID_EVERY):
            said = now
            on_wait(now - started, last)
        time.sleep(max(0.0, min(poll_interval, timeout - (time.perf_counter() - started))))


def _reason(exc: Any) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "request timed out"
    text = str(getattr(exc, "strerror", None) or exc).strip() or type(exc).__name__
    return text.splitlines()[0]


@dataclass(frozen=True)
class RunOutcome:
    """How one startup run ended: ok with its seconds to the first 200, or failed with one line; its log's figures."""

    run: PlannedRun
    status: str
    seconds: float | None
    error: str | None
    log: Path
    figures: list[tuple[str, float]] = field(default_factory=list)

    def rows(self) -> list[RunRow]:
        """runs.csv rows of the run: startup_to_health, then one per extracted log figure."""
        common = dict(status=self.status, error=self.error or "", source=SOURCE)
        return [RunRow.of(self.run, PHASE, seconds=self.seconds, **common),
                *(RunRow.of(self.run, name, parent=PHASE, seconds=seconds, **common) for name, seconds in self.figures)]

    def describe(self) -> str:
        """One line: the run and how it ended (``run 2 baseline #1: healthy after 3.210 s (...)``)."""
        run = self.run
        what = f"run {run.run_id} {run.variant}" + (" (warm-up)" if run.warmup else f" #{run.order}")
        if self.status != "ok":
            return f"{what}: FAILED: {self.error}"
        figs = ", ".join(f"{n} {s:.3f} s" for n, s in self.figures)
        return f"{what}: healthy after {self.seconds:.3f} s" + (f" ({figs})" if figs else "")


def run_one(run: PlannedRun, argv: Sequence[str], url: str, logs: Path, *, timeout: float, grace: float,
            poll_interval: float, port_wait: float, patterns: Mapping[str, re.Pattern[str]],
            guard: ChildGuard, on_wait: Waiting | None = None) -> RunOutcome:
    """One launch: port check, spawn, poll /health, stop the group, read the log; ``guard`` stops the group if
    this process ends while the server runs."""
    host, port = health_address(url)
    log = logs / f"{run.run_id}-{run.variant}.log"
    with open(log, "wb") as fh:  # no command here: its text could match a log pattern (it is in metadata.json)
        fh.write(f"# omni-loader serve-ab: run {run.run_id}, {run.variant}{', warm-up' if run.warmup else ''}\n".encode())
    deadline = time.monotonic() + port_wait
    while not port_is_free(host, port):
        if time.monotonic() >= deadline:
            error = f"port {host}:{port} of {url} is still in use after {port_wait:g} s; run not started"
            return RunOutcome(run, "failed", None, error, log)
        time.sleep(0.1)
    started = time.perf_counter()
    with adopting_orphans() as escaped:  # a helper that left the server's group comes back here when it dies
        try:
            proc = launch(argv, log, guard.env())
        except OSError as exc:
            return RunOutcome(run, "failed", None, f"cannot start {argv[0]}: {exc.strerror or exc}", log)
        try:
            guard.watch(proc.pid)  # start_new_session: the leader's pid is the group id
            seconds, error = wait_healthy(proc, url, started, timeout, poll_interval, on_wait=on_wait)
        finally:
            left = stop_group(proc.pid, grace, leader=proc)
            stopped = escaped()
            guard.forget(proc.pid)
    if left and error is None:
        error = f"processes {left} of the server's group survived SIGKILL"
    if stopped:
        with open(log, "ab") as fh:
            fh.write(f"# omni-loader serve-ab: the server left {len(stopped)} process(es) running outside its "
                     f"process group; stopped: {'; '.join(stopped)}\n".encode())
    try:
        figures = extract_figures_from_file(log, patterns)
        bound_log(log)
    except OSError:
        figures = []
    status = "ok" if seconds is not None and error is None else "failed"
    if error:
        error = f"{error}; log {log}"
    return RunOutcome(run, status, seconds if status == "ok" else None, error, log, figures)


LOG_KEPT = (16 << 20, 4 << 20)  # bytes of a run's log kept from its start and from its end


def bound_log(path: Path, kept: tuple[int, int] = LOG_KEPT) -> int:
    """Cut a finished run's log to its first and last bytes (:data:`LOG_KEPT`); returns the bytes dropped."""
    head, tail = kept
    size = path.stat().st_size
    if size <= head + tail:
        return 0
    tmp = path.with_name(path.name + ".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        _copy(src, dst, head)
        dst.write(f"\n# omni-loader serve-ab: {size - head - tail:,} bytes of this log cut here (kept: the first "
                  f"{head:,} and the last {tail:,})\n".encode())
        src.seek(size - tail)
        _copy(src, dst, tail)
    os.replace(tmp, path)
    return size - head - tail


def _copy(src: Any, dst: Any, count: int, block: int = 1 << 20) -> None:
    """``count`` bytes from ``src`` to ``dst``, a block at a time (never the whole span in memory)."""
    while count > 0 and (data := src.read(min(block, count))):
        dst.write(data)
        count -= len(data)
