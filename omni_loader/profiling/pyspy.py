"""py-spy around a fresh worker process (as a server restart loads the model): ``speedscope.json``,
``flame.svg``, and reading the samples. When py-spy is missing or may not trace (no ptrace permission),
:class:`PySpyUnavailable` carries the one line to show, and the other tools still run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from .outputs import FLAME_SVG, PY_SPY_LOG, SPEEDSCOPE_JSON, remove_files
from .settings import PY_SPY_ENV, ProfileSettings

PTRACE_HINTS = ("permission denied", "operation not permitted", "ptrace", "os error 1)", "elevated permissions")


class PySpyUnavailable(Exception):
    """py-spy is missing or may not trace here; the message is the one line to show."""


def py_spy_failed(lines: list[str], how: str) -> PySpyUnavailable:
    """The one line for a py-spy that did not record, from its output ``lines``: ptrace refused, or ``how``."""
    lines = [ln.strip() for ln in lines if ln.strip()]
    first = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "no output")
    if any(h in "\n".join(lines).lower() for h in PTRACE_HINTS):
        return PySpyUnavailable(f"py-spy may not trace processes here (ptrace not permitted: {first}); run as root, "
                                "or set kernel.yama.ptrace_scope=0 / grant CAP_SYS_PTRACE")
    return PySpyUnavailable(f"{how}: {first}")


def find_py_spy(explicit: str | os.PathLike[str] | None = None) -> tuple[str | None, str]:
    """The py-spy executable to run, or ``(None, why not)``: ``explicit`` (``--py-spy``), else
    ``$OMNI_LOADER_PY_SPY`` (either used as is), else this interpreter's bin directory, else ``PATH``."""
    for given, source in ((explicit, "--py-spy"), (os.environ.get(PY_SPY_ENV) or None, f"${PY_SPY_ENV}")):
        if given:
            path = Path(given)
            if path.is_file() and os.access(path, os.X_OK):
                return str(path), ""
            return None, f"py-spy not found at {path} (set by {source})"
    local = Path(sys.executable).parent / "py-spy"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local), ""
    found = shutil.which("py-spy")
    if found:
        return found, ""
    return None, f"py-spy not found (not in {local.parent}, not on PATH); install it with 'pip install py-spy'"


@dataclass(frozen=True)
class PySpyJob:
    """One variant's py-spy recording: which executable, which load (``settings.repeat`` loads per worker,
    already decided), where the files go."""

    exe: str
    snapshot_root: str
    variant: str
    directory: Path
    options: LoadOptions
    settings: ProfileSettings

    @property
    def log(self) -> Path:
        return self.directory / PY_SPY_LOG

    def run(self, fmt: str, out: Path) -> dict[str, Any]:
        """Record one worker (``py-spy record --format fmt``), which reads its request from a file written here, into
        ``out`` (moved there once the recording succeeded, a link there refused); returns the worker's JSON result."""
        from ..bench.worker import LoadRequest, WorkerCall, worker_command
        from ..safe_files import open_file, replaced

        s = self.settings
        with replaced(out) as written:
            worker_json, request = written.parent / f"py-spy-worker-{fmt}.json", written.parent / f"py-spy-request-{fmt}.json"
            call = WorkerCall(LoadRequest(self.snapshot_root, self.variant, self.options, digest=False),
                              str(worker_json), s.repeat or 1)
            cmd = [self.exe, "record", "--format", fmt, "--output", str(written), "--rate", str(s.rate),
                   *(["--native"] if s.native else []), "--", *worker_command(call, request)]
            try:
                proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
            except OSError as exc:
                raise PySpyUnavailable(f"cannot run py-spy at {self.exe}: {exc.strerror or exc}") from None
            with open_file(self.log, "a") as fh:
                fh.write(f"$ {' '.join(cmd)}\n[exit {proc.returncode}]\n{proc.stdout}{proc.stderr}\n")
            lines = [ln.strip() for ln in f"{proc.stdout}\n{proc.stderr}".splitlines() if ln.strip()]
            last = lines[-1] if lines else "no output"
            if proc.returncode != 0:
                raise py_spy_failed(lines, f"py-spy failed (exit {proc.returncode})")
            if not worker_json.is_file():
                reason = next((ln for ln in reversed(lines) if "omni-loader worker: error" in ln or "Error" in ln), last)
                raise OmniLoaderError(f"the {self.variant} load under py-spy failed: {reason}")
            result = json.loads(worker_json.read_text())
            if not written.is_file() or written.stat().st_size == 0:
                raise PySpyUnavailable(f"py-spy wrote no {fmt} output ({last})")
        return result


def record_py_spy(job: PySpyJob) -> dict[str, Any]:
    """Record a fresh worker process with py-spy: ``speedscope.json`` and ``flame.svg`` drawn from its samples
    (``settings.py_spy_svg``: py-spy's own, from a second worker). Raises :class:`PySpyUnavailable` when py-spy
    cannot run or trace, :class:`OmniLoaderError` when the load failed."""
    from ..safe_files import ensure_dir, refuse_links, write_text

    d, s = ensure_dir(job.directory), job.settings
    refuse_links(d, (SPEEDSCOPE_JSON, FLAME_SVG, PY_SPY_LOG))  # a planted link: refused before any is written
    remove_files([d / FLAME_SVG, d / SPEEDSCOPE_JSON])
    write_text(job.log, "")
    worker = job.run("speedscope", d / SPEEDSCOPE_JSON)
    if s.py_spy_svg:
        job.run("flamegraph", d / FLAME_SVG)
    else:
        speedscope_to_svg(d / SPEEDSCOPE_JSON, d / FLAME_SVG, title=(f"{job.variant} load, fresh worker process "
                                                                    f"({s.repeat} load{'' if s.repeat == 1 else 's'}), py-spy {s.rate} Hz"))
    files = {"speedscope": d / SPEEDSCOPE_JSON, "flamegraph": d / FLAME_SVG, "py_spy_log": job.log}
    summary = speedscope_summary(files["speedscope"])
    summary.update(rate=s.rate, native=s.native, repeat=s.repeat, py_spy_svg=s.py_spy_svg,
                   worker_load_seconds=worker.get("phases", {}).get("total"))
    return {"files": files, "summary": summary}


def speedscope_to_svg(speedscope: str | os.PathLike[str], svg: str | os.PathLike[str], title: str = "py-spy") -> Path:
    """Draw the load's flamegraph from a speedscope file (:mod:`omni_loader.profiling.flamegraph`)."""
    from . import flamegraph

    return flamegraph.svg(flamegraph.build(speedscope, title=title), svg)


def speedscope_samples(path: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per py-spy sample of a speedscope file: thread, weight (s) and the stack's frame names
    (root first), plus ``stack_files`` as ``file:line`` of each frame."""
    try:
        data = json.loads(Path(path).read_text())
        frames = data["shared"]["frames"]
        rows = [(prof.get("name", ""), weight, [frames[i]["name"] for i in sample],
                 [f"{frames[i].get('file')}:{frames[i].get('line')}" for i in sample])
                for prof in data["profiles"] for sample, weight in zip(prof["samples"], prof["weights"])]
    except (OSError, json.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
        raise OmniLoaderError(f"cannot read speedscope file {path}: {exc}") from None
    return pd.DataFrame(rows, columns=["thread", "weight", "stack", "stack_files"])


def speedscope_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Sample counts: all, inside ``load_token2wav``, and with ``Module.state_dict`` on the stack."""
    df = speedscope_samples(path)
    in_load = df["stack"].map(lambda s: any(f.endswith("load_token2wav") for f in s))
    with_sd = df["stack"].map(lambda s: any(f.split(".")[-1] == "state_dict" for f in s))
    return {"samples": len(df), "load_samples": int(in_load.sum()),
            "state_dict_samples": int((in_load & with_sd).sum())}
