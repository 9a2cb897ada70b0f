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
    A new interpreter per run (``python -m omni_loader.bench.worker``): a full cold start, imports
    included, for those who want them in the wall time.
``in-process``
    The load runs in the calling interpreter (notebooks, debugging): later runs see a warm process.

Either way a crashed or killed run loses only itself: the caller gets a :class:`WorkerFailed`
with one line saying why. Each worker leads a process group of its own, so a Ctrl-C at the
terminal reaches the benchmark only, which stops the worker's group (:mod:`omni_loader.host.procs`).

``python -m omni_loader.bench.worker --variant baseline --checkpoint DIR --out FILE`` is the spawned
entry point; py-spy records the same one. Its command line is written by :func:`request_command` and
read by :func:`parse_worker_args` only, so it is parsed here, by hand.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from ..host.placement import cpu_affinity, cpu_numbers, intra_op_threads
from ..host.procs import remove_dead_owners_dirs, stop_children, stop_group

WORKER_MODES = ("forkserver", "spawn", "in-process")
# Imported once by the fork server, before any child is forked (none of them touches a device).
PRELOAD = (
    "omni_loader.token2wav.loader",
    "omni_loader.token2wav.checkpoint",
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
    options: LoadOptions = LoadOptions(device="cpu")
    reference_copy: bool = False
    digest: bool = True
    threads: int | None = None  # torch intra-op threads for the load; None: torch's default
    cpus: tuple[int, ...] = ()  # the CPUs the load's process may run on; empty: any (see placement.cpu_affinity)


def run_load(request: str | LoadRequest, variant: str = "optimized", options: LoadOptions | None = None) -> dict[str, Any]:
    """Open the snapshot and load it once (``run_load(request)``, or ``run_load(checkpoint, variant,
    options)``); the dict is what runs.csv rows are made from."""
    from ..token2wav.checkpoint import open_snapshot
    from ..token2wav.loader import load_token2wav
    from ..token2wav.variants import variant_from

    req = request if isinstance(request, LoadRequest) else LoadRequest(
        str(request), variant, options or LoadOptions(device="cpu"))
    with cpu_affinity(req.cpus), intra_op_threads(req.threads):
        snapshot = open_snapshot(req.checkpoint)
        model, result = load_token2wav(snapshot, variant_from(req.variant), req.options, digest=req.digest,
                                       reference_copy=req.reference_copy)
    del model
    return result.to_dict()


def request_command(request: LoadRequest, out: str | None = None, repeat: int = 1) -> list[str]:
    """The argv that runs ``request`` in a fresh interpreter (``repeat`` loads, for a sampling profiler)."""
    variant = request.variant
    if isinstance(variant, dict):  # a variant with its own steps travels as NAME=discovery:REF,parameters:REF
        variant = f"{variant['name']}=discovery:{variant['discovery']},parameters:{variant['parameters']}"
    opts = request.options
    cmd = [sys.executable, "-m", "omni_loader.bench.worker", "--checkpoint", str(request.checkpoint), "--variant", variant,
           "--layout", opts.layout, "--device", opts.device, "--dtype", opts.dtype, "--construct", opts.construct]
    cmd += ["--reference-copy"] if request.reference_copy else []
    cmd += ["--threads", str(request.threads)] if request.threads else []
    cmd += ["--cpus", ",".join(map(str, request.cpus))] if request.cpus else []
    cmd += [] if request.digest else ["--no-digest"]
    cmd += ["--repeat", str(repeat)] if repeat != 1 else []
    return cmd + (["--out", str(out)] if out else [])


def worker_command(checkpoint: str, variant: str | dict[str, Any], layout: str, device: str, dtype: str,
                   out: str | None = None, repeat: int = 1, construct: str = "resident",
                   reference_copy: bool = False, threads: int | None = None) -> list[str]:
    """:func:`request_command` from loose arguments (the profilers' way of asking for one load)."""
    options = LoadOptions(layout=layout, device=device, dtype=dtype, construct=construct)
    return request_command(LoadRequest(checkpoint, variant, options, reference_copy, threads=threads), out, repeat)


# --------------------------------------------------------------------------- running one load


RUN_DIR_PREFIX = "omni-loader-run-"  # + the benchmark's pid: a folder per run for the worker's result


def run_isolated(request: LoadRequest, mode: str = "forkserver", timeout: float | None = None,
                 on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run one load in a process of kind ``mode`` (see the module docstring) and return its dict.

    Raises :class:`WorkerFailed` when the worker fails or is killed (``timeout`` seconds), and
    stops the worker's group before re-raising an interrupt. ``on_start`` is called with the
    worker's pid as soon as it exists (to watch it, or, in tests, to stop or kill it at a known moment).
    """
    if mode == "in-process":
        try:
            return run_load(request)
        except Exception as exc:  # as a worker process would report it: the run fails, the benchmark goes on
            raise WorkerFailed(f"{type(exc).__name__}: {exc}".splitlines()[0]) from exc
    if mode not in WORKER_MODES:
        raise OmniLoaderError(f"--workers must be one of {', '.join(WORKER_MODES)}, not {mode!r}")
    remove_dead_owners_dirs(RUN_DIR_PREFIX)  # what benchmarks killed with SIGKILL left behind
    with tempfile.TemporaryDirectory(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-") as tmp:
        out = Path(tmp) / "result.json"
        (_run_spawned if mode == "spawn" else _run_forked)(request, out, timeout, on_start)
        return json.loads(out.read_text())


def _run_spawned(request: LoadRequest, out: Path, timeout: float | None,
                 on_start: Callable[[int], None] | None = None) -> None:
    proc = subprocess.Popen(request_command(request, out=str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        if on_start:
            on_start(proc.pid)
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_spawned(proc)
        raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s") from None
    except BaseException:
        _stop_spawned(proc)
        raise
    if proc.returncode != 0:
        reason = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        raise WorkerFailed(_how(proc.returncode) + (f": {reason}" if reason else ""))


def _stop_spawned(proc: subprocess.Popen) -> None:
    stop_group(proc.pid, grace=0, leader=proc)  # a measured load has nothing to flush: no grace
    proc.communicate()  # close its pipes


def forkserver_context() -> Any:
    """The multiprocessing context whose server preloads :data:`PRELOAD` (started on first use)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def ensure_forkserver() -> None:
    """Start the fork server if it is not running, with SIGINT blocked while it starts.

    The server inherits the signal mask and keeps SIGINT blocked through its imports (after them
    it ignores SIGINT itself): a Ctrl-C at the terminal, which reaches the whole foreground group,
    is then the benchmark's to handle, not a traceback of the server's half-done imports.
    """
    from multiprocessing import forkserver, resource_tracker

    forkserver_context()
    resource_tracker.ensure_running()  # first: starting it unblocks SIGINT again
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def start_forkserver() -> None:
    """Start the fork server and wait until its imports are done, by running one empty child.

    Called before the first measured run, so that no run (and no ``--worker-timeout``) pays the
    server's start-up.
    """
    ensure_forkserver()
    proc = forkserver_context().Process(target=_nothing, daemon=True)
    _start_without_main(proc)
    proc.join()
    if proc.exitcode != 0:
        raise WorkerFailed(f"the fork server could not start a worker ({_how(proc.exitcode)})")


def stop_forkserver() -> None:
    """Stop the fork server and any worker it still runs; the next benchmark starts a new one.
    Called when a benchmark is interrupted, so that nothing of it is left behind."""
    from multiprocessing import forkserver

    server = forkserver._forkserver  # the stdlib's one fork server per process; it has no public stop
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    stop_children(pid, grace=0)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server._stop()  # reaps it and forgets its address


def _nothing() -> None:  # the fork server's first child: proof that its imports are done
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
    ensure_forkserver()
    proc = forkserver_context().Process(target=_forked_main, args=(request, str(out)), daemon=True)
    _start_without_main(proc)
    try:
        if on_start:
            on_start(proc.pid)
        proc.join(timeout)
    except BaseException:
        _stop_forked(proc)
        raise
    if proc.is_alive():
        _stop_forked(proc)
        raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s")
    if proc.exitcode != 0:
        try:
            reason = json.loads(out.read_text()).get("error", "") if out.exists() else ""
        except (json.JSONDecodeError, AttributeError):
            reason = ""
        raise WorkerFailed(_how(proc.exitcode) + (f": {reason}" if reason else ""))


def _stop_forked(proc: Any) -> None:
    stop_group(proc.pid, grace=0)  # the child leads its own group (see _forked_main)
    proc.join()  # the fork server reaps it and tells us its exit status


def _how(code: int) -> str:
    return f"worker killed by signal {-code}" if code < 0 else f"worker exit {code}"


def _forked_main(request: LoadRequest, out: str) -> None:
    """A forked child: load once, write the result (or one line of error) to ``out``, exit."""
    os.setsid()  # its own group and session, as a spawned worker: the terminal's Ctrl-C is the parent's
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent decides about interrupts
    code = 0
    try:
        data = run_load(request)
    except OmniLoaderError as exc:
        data, code = {"error": str(exc)}, exc.exit_code
    except BaseException as exc:  # one line for the runs.csv error column; the run is lost, not the benchmark
        data, code = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0]}, 1
    try:
        Path(out).write_text(json.dumps(data, default=str))
    except OSError:  # the parent stopped waiting (an interrupt) and removed the run's folder: nobody reads it
        code = code or 1
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown: nothing of the child is needed any more


# --------------------------------------------------------------------------- spawned entry point


USAGE = """usage: python -m omni_loader.bench.worker --checkpoint DIR --variant NAME [options]

One Token2Wav load in this process; its JSON result to --out FILE, else to stdout.

  --variant NAME      a built-in variant, or NAME=discovery:REF[,parameters:REF] (see omni_loader.token2wav.variants)
  --layout, --device, --dtype, --construct   the load options (default vllm-omni, cpu, float32, resident)
  --reference-copy    also time a plain strict load_state_dict of the same tensors
  --threads N         torch intra-op threads (default: torch's);  --no-digest   skip hashing the tensors
  --cpus LIST         run on these CPUs only, e.g. 1 or 0,2 (default: any)
  --repeat N          load N times (for a sampling profiler): the JSON is the first load's, plus
                      'repeat' and 'repeat_total_seconds';  --out FILE   the JSON there, not to stdout"""
# The worker's options: those that take a value, and the flags.
VALUED = ("--checkpoint", "--variant", "--layout", "--device", "--dtype", "--construct", "--threads", "--cpus",
          "--repeat", "--out")
FLAGS = ("--reference-copy", "--no-digest")


@dataclass(frozen=True)
class WorkerCall:
    """One invocation of the spawned worker: the load, where its JSON goes, how many times to load."""

    request: LoadRequest
    out: str | None = None
    repeat: int = 1


def parse_worker_args(argv: list[str]) -> WorkerCall:
    """The worker's command line (as :func:`request_command` writes it) as a :class:`WorkerCall`;
    one-line :class:`OmniLoaderError` for anything else."""
    from ..token2wav.variants import parse_variant

    values: dict[str, str] = {}
    flags: set[str] = set()
    args = iter(argv)
    for arg in args:
        name, eq, inline = arg.partition("=")
        if name in FLAGS and not eq:
            flags.add(name)
        elif name in VALUED:
            value = inline if eq else next(args, None)
            if value is None:
                raise OmniLoaderError(f"{name} needs a value")
            values[name] = value
        else:
            raise OmniLoaderError(f"unknown worker option {arg!r} (see --help)")
    for required in ("--checkpoint", "--variant"):
        if required not in values:
            raise OmniLoaderError(f"{required} is required")
    threads, repeat = _integer(values, "--threads", None), _integer(values, "--repeat", 1)
    if repeat < 1:
        raise OmniLoaderError(f"--repeat must be at least 1, not {repeat}")
    text = values["--variant"]
    options = LoadOptions(device="cpu").replace(**{k.lstrip("-"): values.get(k) for k in
                                                   ("--layout", "--device", "--dtype", "--construct")})
    request = LoadRequest(values["--checkpoint"], parse_variant(text).to_dict() if "=" in text else text, options,
                          "--reference-copy" in flags, "--no-digest" not in flags, threads, _cpus(values))
    return WorkerCall(request, values.get("--out"), repeat)


def _cpus(values: dict[str, str]) -> tuple[int, ...]:
    try:
        return cpu_numbers(values["--cpus"]) if "--cpus" in values else ()
    except ValueError:
        raise OmniLoaderError(f"--cpus must be CPU numbers such as 1 or 0,2, not {values['--cpus']!r}") from None


def _integer(values: dict[str, str], name: str, default: int | None) -> int | None:
    if name not in values:
        return default
    try:
        return int(values[name])
    except ValueError:
        raise OmniLoaderError(f"{name} must be an integer, not {values[name]!r}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m omni_loader.bench.worker``: one load (or ``--repeat N``), its JSON to ``--out`` or stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(USAGE)
        return 0
    try:
        call = parse_worker_args(args)
        data = run_load(call.request)
        if call.repeat > 1:
            totals = [data["phases"]["total"]]
            for _ in range(call.repeat - 1):
                totals.append(run_load(replace(call.request, digest=False))["phases"]["total"])
            data.update(repeat=call.repeat, repeat_total_seconds=totals)
    except OmniLoaderError as exc:
        print(f"omni-loader worker: error: {exc}", file=sys.stderr)
        return exc.exit_code
    text = json.dumps(data, default=str)
    if call.out:
        Path(call.out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
