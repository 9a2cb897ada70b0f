"""One load in a fresh process, sampled by py-spy from its first line: the runs of ``profile --diff``.

Standard library only: this module is imported in the process forked from the fork server before the load, so
anything more imported here (pandas) would be missing from the sampled load's own lazy imports.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import subprocess
import time
from pathlib import Path
from typing import Any

from .settings import DEFAULT_RATE  # standard library only

ATTACH_LIMIT = 30.0  # seconds py-spy may take to start sampling a process
NO_SPACE = ("no space left on device", "os error 28")  # py-spy's words for ENOSPC ("Error: ... (os error 28)")


def _wait_then_load(request: Any, out: str, go: Any) -> None:
    """A forked child: wait until py-spy samples it, then load as a forked run of the kit's worker does
    (its own session, the default SIGINT, the result or one line of error to ``out``, ``os._exit``)."""
    import signal

    from ..bench.worker import load_then_exit

    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    go.recv()
    go.close()
    load_then_exit(request, out)


def sampled_load(request: Any, speedscope: Path, exe: str, rate: int = DEFAULT_RATE, timeout: float | None = None,
                 log: Path | None = None) -> dict[str, Any]:
    """One load in a process forked from the fork server, recorded by py-spy (``record --pid --idle``) from its
    first line: the child waits on a pipe until py-spy samples it. Returns the load's result dict; raises
    :class:`PySpyUnavailable` or :class:`~omni_loader.bench.worker.WorkerFailed`."""
    import tempfile

    from .pyspy import PySpyUnavailable, py_spy_failed
    from ..bench.worker import (RUN_DIR_PREFIX, WorkerFailed, ensure_forkserver, forkserver_context,
                                 start_without_main, stop_forked)
    from ..safe_files import open_file, replaced

    ctx = forkserver_context()
    ensure_forkserver()
    # py-spy writes by name: into a private folder, moved onto ``speedscope`` once the load succeeded
    with replaced(speedscope) as written, tempfile.TemporaryDirectory(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-") as tmp:
        reader, writer = ctx.Pipe(duplex=False)
        out = Path(tmp) / "result.json"
        proc = ctx.Process(target=_wait_then_load, args=(request, str(out), reader), daemon=True)
        start_without_main(proc)
        reader.close()
        cmd = [exe, "record", "--pid", str(proc.pid), "--format", "speedscope", "--output", str(written),
               "--rate", str(rate), "--idle"]
        spy = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[str] = []
        try:
            if not _attached(spy, lines):
                spy.wait()
                raise py_spy_failed(lines, f"py-spy could not sample the load (exit {spy.returncode})")
            writer.send(True)
            proc.join(timeout)
            if proc.is_alive():
                stop_forked(proc)
                raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s")
            rest, _ = spy.communicate(timeout=ATTACH_LIMIT)
            lines += rest.splitlines()
            if spy.returncode and any(w in ln.lower() for ln in lines for w in NO_SPACE):
                # the disk, not py-spy: said as such by profile_diff (diff_words.disk_blamed)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(speedscope))
        except BaseException:
            if proc.is_alive():
                stop_forked(proc)
            if spy.poll() is None:
                spy.kill()
                spy.communicate()
            raise
        finally:
            writer.close()
            if log is not None:
                with open_file(log, "a") as fh:
                    fh.write(f"$ {' '.join(cmd)}\n" + "\n".join(ln for ln in lines if ln.strip()) + "\n")
        data = json.loads(out.read_text()) if out.is_file() else {}
        if proc.exitcode != 0:
            how = f"worker killed by signal {-proc.exitcode}" if proc.exitcode < 0 else f"worker exit {proc.exitcode}"
            raise WorkerFailed(how + (f": {data['error']}" if data.get("error") else ""))
        if written.stat().st_size == 0:
            raise PySpyUnavailable(f"py-spy wrote no speedscope file ({lines[-1] if lines else 'no output'})")
        return data


def _attached(spy: subprocess.Popen, lines: list[str]) -> bool:
    """Read py-spy's output until it says it samples (True) or ends (False), at most ATTACH_LIMIT seconds."""
    deadline = time.monotonic() + ATTACH_LIMIT
    with selectors.DefaultSelector() as sel:
        sel.register(spy.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            line = spy.stdout.readline()  # type: ignore[union-attr]
            if not line:
                return False
            lines.append(line.rstrip())
            if "Sampling process" in line:
                return True
    return False
