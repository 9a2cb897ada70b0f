"""One load per fresh process, as a server restart would do it, reporting JSON.

A measured run must not inherit anything a previous load left behind: allocator state, a
resident model, warm caches, a device context. Three ways to get such a process:

``forkserver`` (default)
    A fork server started once per benchmark imports torch, transformers and the model code
    (about 3.5 s on two cores) and then forks one child per run. The child has built no model and
    touched no device; it only skips the imports, which are outside the timed phases anyway, so
    paying them for every run bought nothing but wall time. The server touches no GPU, so no CUDA
    context is ever inherited.
``spawn``
    A new interpreter per run (``python -m omni_loader.worker``): a full cold start, imports
    included, for those who want them in the wall time.
``in-process``
    The load runs in the calling interpreter (notebooks, debugging): later runs see a warm process.

Either way a crashed or killed run loses only itself: the caller gets a :class:`WorkerFailed`
with one line saying why.

``python -m omni_loader.worker --variant baseline --checkpoint DIR --out FILE`` is the spawned
entry point; py-spy records the same one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import OmniLoaderError

WORKER_MODES = ("forkserver", "spawn", "in-process")
# Imported once by the fork server, before any child is forked (none of them touches a device).
PRELOAD = (
    "omni_loader.loader",
    "omni_loader.checkpoint",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni",
    "transformers.initialization",
    "safetensors.torch",
)


class WorkerFailed(RuntimeError):
    """A run's worker failed, crashed or was killed; the message is one line."""


@dataclass(frozen=True)
class LoadRequest:
    """Everything one load needs: a plain value that crosses a process boundary."""

    checkpoint: str
    variant: str | dict[str, Any]  # a built-in variant's name, or a Variant's dict (its own steps)
    layout: str = "vllm-omni"
    device: str = "cpu"
    dtype: str = "float32"
    construct: str = "upstream"
    reference_copy: bool = False
    digest: bool = True
    threads: int | None = None  # torch intra-op threads for the load; None: torch's default


def run_load(checkpoint: str | LoadRequest, variant: str = "optimized", layout: str = "vllm-omni",
             device: str = "cpu", dtype: str = "float32", digest: bool = True, construct: str = "upstream",
             reference_copy: bool = False) -> dict[str, Any]:
    """Open the snapshot and load it once; the dict is what runs.csv rows are made from."""
    from .checkpoint import open_snapshot
    from .loader import load_token2wav
    from .variants import variant_from

    req = checkpoint if isinstance(checkpoint, LoadRequest) else LoadRequest(
        str(checkpoint), variant, layout, device, dtype, construct, reference_copy, digest)
    snapshot = open_snapshot(req.checkpoint)
    with intra_op_threads(req.threads):
        model, result = load_token2wav(snapshot, variant_from(req.variant), layout=req.layout, device=req.device, dtype=req.dtype,
                                       digest=req.digest, construct=req.construct,
                                       reference_copy=req.reference_copy)
    del model
    return result.to_dict()


@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run a load with ``threads`` torch intra-op threads (None: leave torch's choice), then restore.

    On a CPU every ``copy_`` of a large tensor is an OpenMP parallel region that ends in a barrier.
    When another process holds one of the cores, the thread that shares it is descheduled for a
    time slice and the others wait at the barrier: with 720 copies that turned 0.2 s of
    ``load_parameters`` into 2.5 s here, and a verdict into noise. One thread has no barrier.
    """
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def worker_command(checkpoint: str, variant: str | dict[str, Any], layout: str, device: str, dtype: str,
                   out: str | None = None, repeat: int = 1, construct: str = "upstream",
                   reference_copy: bool = False, threads: int | None = None) -> list[str]:
    """The argv that runs one load in a fresh interpreter (``repeat`` loads, for a sampling profiler)."""
    if isinstance(variant, dict):  # a variant with its own steps travels as NAME=discovery:REF,parameters:REF
        variant = f"{variant['name']}=discovery:{variant['discovery']},parameters:{variant['parameters']}"
    cmd = [sys.executable, "-m", "omni_loader.worker", "--checkpoint", str(checkpoint), "--variant", variant,
           "--layout", layout, "--device", device, "--dtype", dtype, "--construct", construct]
    cmd += ["--reference-copy"] if reference_copy else []
    cmd += ["--threads", str(threads)] if threads else []
    cmd += ["--repeat", str(repeat)] if repeat != 1 else []
    return cmd + (["--out", str(out)] if out else [])


# --------------------------------------------------------------------------- running one load


def run_isolated(request: LoadRequest, mode: str = "forkserver", timeout: float | None = None,
                 on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run one load in a process of kind ``mode`` (see the module docstring) and return its dict.

    Raises :class:`WorkerFailed` when the worker fails or is killed (``timeout`` seconds), and
    kills the worker before re-raising an interrupt. ``on_start`` is called with the worker's pid
    as soon as it exists (to watch it, or, in tests, to stop or kill it at a known moment).
    """
    if mode == "in-process":
        return run_load(request)
    if mode not in WORKER_MODES:
        raise OmniLoaderError(f"--workers must be one of {', '.join(WORKER_MODES)}, not {mode!r}")
    with tempfile.TemporaryDirectory(prefix="omni-loader-run-") as tmp:
        out = Path(tmp) / "result.json"
        if mode == "spawn":
            _run_spawned(request, out, timeout, on_start)
        else:
            _run_forked(request, out, timeout, on_start)
        return json.loads(out.read_text())


def _run_spawned(request: LoadRequest, out: Path, timeout: float | None,
                 on_start: Callable[[int], None] | None = None) -> None:
    cmd = worker_command(request.checkpoint, request.variant, request.layout, request.device, request.dtype,
                         out=str(out), construct=request.construct, reference_copy=request.reference_copy,
                         threads=request.threads)
    if not request.digest:
        cmd.append("--no-digest")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        if on_start:
            on_start(proc.pid)
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process_group(proc)
        raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s") from None
    except BaseException:
        stop_process_group(proc)
        raise
    if proc.returncode != 0:
        reason = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        raise WorkerFailed(_how(proc.returncode) + (f": {reason}" if reason else ""))


def stop_process_group(proc: subprocess.Popen) -> None:
    """SIGKILL a worker's whole process group (it was started in a session of its own) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def forkserver_context() -> Any:
    """The multiprocessing context whose server preloads :data:`PRELOAD` (started on first use)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def start_forkserver() -> None:
    """Start the fork server and wait until its imports are done, by running one empty child.

    Called before the first measured run, so that no run (and no ``--worker-timeout``) pays the
    server's start-up.
    """
    proc = forkserver_context().Process(target=_nothing, daemon=True)
    _start_without_main(proc)
    proc.join()
    if proc.exitcode != 0:
        raise WorkerFailed(f"the fork server could not start a worker ({_how(proc.exitcode)})")


def _nothing() -> None:
    pass


def _start_without_main(proc: Any) -> None:
    """Start a forkserver child without making it import the caller's ``__main__``.

    multiprocessing re-imports the parent's main script in every child so that functions defined
    there can be found; ours live in omni_loader, so that import is never needed, and it would run a
    user's unguarded script (one without ``if __name__ == "__main__"``) once per measured load, or
    fail outright for code read from stdin. Hiding ``__main__`` while the child is launched skips it.
    """
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        proc.start()
    finally:
        sys.modules["__main__"] = saved


def _run_forked(request: LoadRequest, out: Path, timeout: float | None,
                on_start: Callable[[int], None] | None = None) -> None:
    proc = forkserver_context().Process(target=_forked_main, args=(asdict(request), str(out)), daemon=True)
    _start_without_main(proc)
    try:
        if on_start:
            on_start(proc.pid)
        proc.join(timeout)
    except BaseException:
        _kill(proc)
        raise
    if proc.is_alive():
        _kill(proc)
        raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s")
    if proc.exitcode != 0:
        reason = ""
        if out.exists():
            try:
                reason = json.loads(out.read_text()).get("error", "")
            except (json.JSONDecodeError, AttributeError):
                reason = ""
        raise WorkerFailed(_how(proc.exitcode) + (f": {reason}" if reason else ""))


def _kill(proc: Any) -> None:
    proc.kill()
    proc.join()


def _how(code: int) -> str:
    return f"worker killed by signal {-code}" if code < 0 else f"worker exit {code}"


def _forked_main(request: dict[str, Any], out: str) -> None:
    """A forked child: load once, write the result (or one line of error) to ``out``, exit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent decides about interrupts
    code = 0
    try:
        data = run_load(LoadRequest(**request))
    except OmniLoaderError as exc:
        data, code = {"error": str(exc)}, exc.exit_code
    except BaseException as exc:  # one line for the runs.csv error column; the run is lost, not the benchmark
        data, code = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}, 1
    Path(out).write_text(json.dumps(data, default=str))
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: nothing of the child is needed any more


# --------------------------------------------------------------------------- spawned entry point


def main(argv: list[str] | None = None) -> int:
    from .model import CONSTRUCT_MODES

    p = argparse.ArgumentParser(prog="python -m omni_loader.worker", description=__doc__)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--variant", required=True,
                   help="a built-in variant's name, or NAME=discovery:REF[,parameters:REF] (see omni_loader.variants)")
    p.add_argument("--layout", default="vllm-omni")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--construct", choices=CONSTRUCT_MODES, default="upstream")
    p.add_argument("--reference-copy", action="store_true")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--no-digest", action="store_true")
    p.add_argument("--out", help="write the JSON here instead of stdout")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="load N times in this process (for a sampling profiler); the JSON is the first, cold load's,"
                        " plus 'repeat' and 'repeat_total_seconds' when N > 1")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, not {args.repeat}")
    from .variants import parse_variant

    try:
        variant = parse_variant(args.variant).to_dict() if "=" in args.variant else args.variant
        request = LoadRequest(args.checkpoint, variant, args.layout, args.device, args.dtype, args.construct,
                              args.reference_copy, not args.no_digest, args.threads)
        data = run_load(request)
        if args.repeat > 1:
            totals = [data["phases"]["total"]]
            for _ in range(args.repeat - 1):
                again = run_load(LoadRequest(**{**asdict(request), "digest": False}))
                totals.append(again["phases"]["total"])
            data.update(repeat=args.repeat, repeat_total_seconds=totals)
    except OmniLoaderError as exc:
        print(f"omni-loader worker: error: {exc}", file=sys.stderr)
        return exc.exit_code
    text = json.dumps(data, default=str)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
