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

``python -m omni_loader.bench.worker --request FILE`` is the spawned entry point, and py-spy records
the same one: the worker has one option, and the load travels as JSON (a :class:`WorkerCall`, which
:func:`worker_command` writes and :meth:`WorkerCall.from_json` reads), as pyperf's worker is the
same program with one flag speaking JSON.
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
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import OmniLoaderError
from ..token2wav.options import LoadOptions
from ..host.checkpoint_cache import prepare_checkpoint
from ..host.placement import cpu_affinity, intra_op_threads
from ..host.procs import remove_dead_owners_dirs, stop_children, stop_group
from ..host.procs import announce_phases

if TYPE_CHECKING:
    from ..results.planner import PlannedRun
    from ..results.spec import BenchmarkSpec

WORKER_MODES = ("forkserver", "spawn", "in-process")
# Imported once by the fork server, before any child is forked (none of them touches a device).
PRELOAD = (
    "omni_loader.bench.forkserver_guard",  # first: a client gone mid-request is skipped, not the server's traceback
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

    @classmethod
    def of(cls, spec: BenchmarkSpec, run: PlannedRun) -> LoadRequest:
        """The load of one planned run of ``spec``: an A/A run loads :data:`~omni_loader.results.spec.AA_VARIANT`,
        a variant of the user's its own steps."""
        from ..results.spec import AA_VARIANT

        custom = {v["name"]: v for v in spec.custom_variants}
        variant = AA_VARIANT if run.source == "aa" else custom.get(run.variant, run.variant)
        return cls(spec.checkpoint, variant, spec.load, spec.reference_copy, threads=spec.threads, cpus=spec.cpus)


def run_load(request: str | LoadRequest, variant: str = "optimized", options: LoadOptions | None = None) -> dict[str, Any]:
    """Open the snapshot and load it once (``run_load(request)``, or ``run_load(checkpoint, variant,
    options)``); the dict is what runs.csv rows are made from. Before the load, outside its phases, the
    checkpoint's page-cache residency is measured (after evicting it, with ``--cache cold``):
    ``checkpoint_residency`` (:mod:`omni_loader.host.checkpoint_cache`)."""
    from ..token2wav.checkpoint import open_snapshot
    from ..token2wav.loader import load_token2wav
    from ..token2wav.variants import variant_from

    req = request if isinstance(request, LoadRequest) else LoadRequest(
        str(request), variant, options or LoadOptions(device="cpu"))
    with cpu_affinity(req.cpus), intra_op_threads(req.threads):
        snapshot = open_snapshot(req.checkpoint)
        residency = prepare_checkpoint(snapshot, req.options.cache)  # --cache cold evicts; outside the phases
        model, result = load_token2wav(snapshot, variant_from(req.variant), req.options, digest=req.digest,
                                       reference_copy=req.reference_copy)
    del model
    return {**result.to_dict(), "checkpoint_residency": residency}


def worker_command(call: WorkerCall, request_file: str | os.PathLike[str]) -> list[str]:
    """Write ``call`` to ``request_file`` as JSON and return the argv that runs it in a fresh interpreter.

    Why a file and not options: the request is a value (:class:`LoadRequest`, its :class:`LoadOptions`
    nested) that crosses the process boundary whole, as JSON, so no field is taken apart into flags and
    put back together on the other side; a py-spy command line stays short and readable.
    """
    Path(request_file).write_text(call.to_json())
    return [sys.executable, "-m", "omni_loader.bench.worker", "--request", str(request_file)]


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
    cmd = worker_command(WorkerCall(request, str(out)), out.with_name("request.json"))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
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
    start_without_main(proc)
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


def start_without_main(proc: Any) -> None:
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
    start_without_main(proc)
    try:
        if on_start:
            on_start(proc.pid)
        proc.join(timeout)
    except BaseException:
        stop_forked(proc)
        raise
    if proc.is_alive():
        stop_forked(proc)
        raise WorkerFailed(f"worker killed after --worker-timeout {timeout:g} s")
    if proc.exitcode != 0:
        try:
            reason = json.loads(out.read_text()).get("error", "") if out.exists() else ""
        except (json.JSONDecodeError, AttributeError):
            reason = ""
        raise WorkerFailed(_how(proc.exitcode) + (f": {reason}" if reason else ""))


def stop_forked(proc: Any) -> None:
    stop_group(proc.pid, grace=0)  # the child leads its own group (see _forked_main)
    proc.join()  # the fork server reaps it and tells us its exit status


def _how(code: int) -> str:
    return f"worker killed by signal {-code}" if code < 0 else f"worker exit {code}"


def _forked_main(request: LoadRequest, out: str) -> None:
    """A forked child: load once, write the result (or one line of error) to ``out``, exit."""
    os.setsid()  # its own group and session, as a spawned worker: the terminal's Ctrl-C is the parent's
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # the parent decides about interrupts
    announce_phases()  # its name says which step it is in: the progress bar reads it (host.timing)
    load_then_exit(request, out)


def load_then_exit(request: LoadRequest, out: str) -> None:
    """The rest of a forked child's life: load once, write the result (or one line of error) to ``out``,
    and exit without interpreter teardown (``profile --diff``'s sampled children end the same way)."""
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


USAGE = """usage: python -m omni_loader.bench.worker --request FILE

One Token2Wav load in this process. FILE (or - for standard input) holds a WorkerCall as JSON, as
worker_command writes it: {"protocol": 1, "request": {LoadRequest, "options" nested}, "repeat": N,
"out": FILE or null}. The JSON result goes to "out", else to standard output. With "repeat" above 1
(for a sampling profiler) the result is the first load's, plus 'repeat' and 'repeat_total_seconds'."""
PROTOCOL = 1  # the version of a WorkerCall's JSON: a worker refuses any other in one line
REQUEST_FIELDS = tuple(f.name for f in fields(LoadRequest))


@dataclass(frozen=True)
class WorkerCall:
    """One invocation of the spawned worker: the load, where its JSON goes, how many times to load."""

    request: LoadRequest
    out: str | None = None
    repeat: int = 1

    def to_json(self) -> str:
        request = {**asdict(self.request), "options": self.request.options.to_dict(), "cpus": list(self.request.cpus)}
        return json.dumps({"protocol": PROTOCOL, "request": request, "out": self.out, "repeat": self.repeat})

    @classmethod
    def from_json(cls, text: str, where: str = "--request") -> WorkerCall:
        """The call :meth:`to_json` wrote; one-line :class:`OmniLoaderError` naming the key for anything else."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OmniLoaderError(f"{where}: not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("protocol") != PROTOCOL:
            got = data.get("protocol") if isinstance(data, dict) else type(data).__name__
            raise OmniLoaderError(f"{where}: protocol {got!r}, this worker speaks protocol {PROTOCOL}")
        req = data.get("request")
        if not isinstance(req, dict) or not {"checkpoint", "variant"} <= set(req):
            raise OmniLoaderError(f"{where}: 'request' must be an object with 'checkpoint' and 'variant'")
        unknown = sorted(set(req) - set(REQUEST_FIELDS))
        if unknown:
            raise OmniLoaderError(f"{where}: unknown request {'key' if len(unknown) == 1 else 'keys'} "
                                  f"{', '.join(unknown)}")
        repeat, threads = data.get("repeat", 1), req.get("threads")
        if not _is_int(repeat) or repeat < 1:
            raise OmniLoaderError(f"{where}: 'repeat' must be an integer of at least 1, not {repeat!r}")
        if threads is not None and not _is_int(threads):
            raise OmniLoaderError(f"{where}: 'threads' must be an integer or null, not {threads!r}")
        cpus = req.get("cpus", [])
        if not isinstance(cpus, list) or not all(_is_int(c) and c >= 0 for c in cpus):
            raise OmniLoaderError(f"{where}: 'cpus' must be a list of CPU numbers, not {cpus!r}")
        options = req.get("options", {})
        if not isinstance(options, dict) or not set(options) <= {f.name for f in fields(LoadOptions)}:
            raise OmniLoaderError(f"{where}: 'options' must be an object of {', '.join(f.name for f in fields(LoadOptions))}"
                                  f", not {options!r}")
        if not isinstance(req["variant"], (str, dict)):
            raise OmniLoaderError(f"{where}: 'variant' must be a name or a variant's object, not {req['variant']!r}")
        request = LoadRequest(**{**req, "options": LoadOptions(device="cpu").replace(**options), "cpus": tuple(cpus)})
        return cls(request, data.get("out"), repeat)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_call(argv: list[str]) -> WorkerCall:
    """The worker's one option, ``--request FILE`` (``-``: standard input), read as a :class:`WorkerCall`."""
    if len(argv) != 2 or argv[0] != "--request":
        raise OmniLoaderError("usage: python -m omni_loader.bench.worker --request FILE (see --help)")
    path = argv[1]
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OmniLoaderError(f"--request {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    return WorkerCall.from_json(text, f"--request {path}")


def main(argv: list[str] | None = None) -> int:
    """``python -m omni_loader.bench.worker --request FILE``: one load (or ``repeat``), its JSON to ``out`` or stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "-h" in args or "--help" in args:
        print(USAGE)
        return 0
    try:
        call = read_call(args)
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
    announce_phases()  # a worker process of its own (main() called in-process leaves its caller's name alone)
    sys.exit(main())
