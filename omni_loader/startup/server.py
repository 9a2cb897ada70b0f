"""``stage-server``: Token2Wav behind an HTTP ``/health``, and the ``serve-ab`` command that times it.

``omni-loader stage-server --variant baseline --port 8091`` stands in for one vLLM-Omni stage
server: it binds the port first (a port in use fails at once, in one line, exit 2; ``--port 0``
takes a free one, named in the log), then loads Token2Wav in a background thread while
``GET /health`` answers 503; once the model is loaded, ``/health`` answers 200 and ``GET /stats``
returns the :class:`~omni_loader.token2wav.loader.LoadResult` (``to_dict()``) with ``"ready": true``.
Nothing answers 200 on ``/health`` before the load ends. ``--simulate S`` stands in for a stage
that is not Token2Wav (vLLM-Omni's thinker or talker): no model, a sleep of S seconds as its load.

It logs to stdout, flushed, in vLLM-Omni's format (:class:`StageLog`): process tag and pid, stage
tag (``--stage N``; ``--replica R`` gives the newer ``(StageEngineCoreProc_stage<N>_replica<R> pid=...)``
tag instead), level, month-day time to the second, file:line, message; and with the markers that
``serve-ab``'s log patterns and :mod:`omni_loader.startup.timeline` read from ``vllm serve``::

    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:01 [server.py:250] Using model weights format ['*.safetensors']
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:02 [server.py:252] Buffer discovery took 1.564 ms (variant ...)
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:02 [server.py:254] [Model Loaded] name=..., success=True, size=1492.80 MB, device=cpu
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:02 [server.py:256] Token2Wav load_weights took 620.436 ms
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:02 [server.py:257] Loading weights took 0.702113 seconds
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:03 [server.py:257] Model loading took 1.6700 GiB memory and 8.123456 seconds
    (EngineCore_DP0 pid=4242) [Stage-2] INFO 03-14 10:00:03 [server.py:262] init engine (stats) took 0.000412 seconds

``Loading weights took`` is the load's ``outer_load_weights`` phase, the region vLLM's default loader
times (the outer ``load_weights``: the lists, the Hub check, speaker conditioning and Token2Wav's own
``load_weights``; vLLM prints it to the hundredth, the stage server to the microsecond so that a tiny
model's A/B still resolves); ``Token2Wav load_weights took`` is ``weight_loading``, the PR's row, a line
of the kit's own (vLLM-Omni prints none); ``Model loading took`` is the load's ``total``
(construction through post-load), ``init engine (...)`` what the server does after it before
``/health`` answers 200 (the digest with ``--digest``, the stats): the lane's ready. Each phase's
line carries the time the phase *ended* (noted by the clock, :class:`EdgeClock`): the lines are
written once the load returns, so that writing them is in no phase's time.

SIGTERM or SIGINT closes the listening socket and exits with status 0 (a load still in
progress is abandoned). A load that fails prints one line and exits with status 2.

What a server loads and where it listens is one :class:`StageServerOptions` value (the command
layer, :mod:`omni_loader.cli.serve`, makes it from the options typed). Several stages started
together are :mod:`omni_loader.startup.stage_group`. The A/B harness lives in :mod:`omni_loader.startup.serve_ab`
(``serve_ab``) and :mod:`omni_loader.startup.one_run` (``stage_server_commands``, ``free_port``).
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from ..errors import OmniLoaderError
from ..host.procs import die_with_parent
from ..names import OUTER_LOAD_WEIGHTS
from ..token2wav.options import CheckpointOptions, LoadOptions

__all__ = ["READY_MESSAGE", "StageLog", "StageServerOptions", "run_stage_server"]

DEFAULT_HOST = "127.0.0.1"
READY_MESSAGE = "stage-server: ready, /health answers 200"  # what a stage group waits for in a stage's log
MAX_SIMULATE = 3600.0  # seconds: the longest simulated load (time.sleep cannot take 1e10; an hour is plenty)


@dataclass(frozen=True)
class StageServerOptions:
    """One stage server: the variant it loads, from which snapshot, with which load options, and where it listens."""

    variant: str
    port: int
    snapshot: CheckpointOptions = field(default_factory=CheckpointOptions)
    load: LoadOptions = field(default_factory=LoadOptions)
    host: str = DEFAULT_HOST
    digest: bool = False  # also hash every tensor (reported in /stats; adds to the startup time)
    tag: str | None = None  # free text echoed in the log and in /stats
    stage: int = 0  # vLLM-Omni's stage number, in every line's tag
    replica: int | None = None  # None: the [Stage-N] tag; a number: the StageEngineCoreProc_stageN_replicaR tag
    simulate: float | None = None  # seconds a stage that is not Token2Wav sleeps as its load (no model)

    def __post_init__(self) -> None:
        if self.simulate is not None and not 0 < self.simulate < MAX_SIMULATE:  # nan fails this too
            raise OmniLoaderError(f"stage-server --simulate {self.simulate:g}: a load of more than 0 and under "
                                  f"{MAX_SIMULATE:g} seconds")


class StageLog:
    """Lines in vLLM-Omni's format: ``(EngineCore_DP0 pid=P) [Stage-N] INFO MM-DD HH:MM:SS [file.py:L] message``;
    ``replica`` gives the newer ``StageEngineCoreProc`` tag, ``process`` a process tag of its own and no stage."""

    def __init__(self, stage: int = 0, replica: int | None = None, *, process: str | None = None,
                 pid: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        if process is not None:
            self.tag = f"({process} pid={pid}) "
        elif replica is None:
            self.tag = f"(EngineCore_DP0 pid={pid}) [Stage-{stage}] "
        else:
            self.tag = f"(StageEngineCoreProc_stage{stage}_replica{replica} pid={pid}) "
        self.lock = threading.Lock()

    def line(self, message: str, level: str = "INFO", when: float | None = None, depth: int = 1) -> str:
        frame = sys._getframe(depth)
        stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(time.time() if when is None else when))
        return f"{self.tag}{level} {stamp} [{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}] {message}"

    def __call__(self, message: str, level: str = "INFO", when: float | None = None) -> None:
        text = self.line(message, level, when, depth=2)
        with self.lock:
            print(text, flush=True)


class StageState:
    """What the HTTP handlers report: loading, ready (with the load's figures) or failed."""

    def __init__(self, variant: str, tag: str | None) -> None:
        self.variant = variant
        self.tag = tag
        self.state = "loading"
        self.error: str | None = None
        self.stats: dict[str, Any] = {}
        self.model: Any = None  # kept alive: the server "serves" it
        self.ready = threading.Event()
        self.done = threading.Event()  # set when the load ended, either way
        self._lock = threading.Lock()

    def set_ready(self, model: Any, stats: dict[str, Any]) -> None:
        with self._lock:
            self.model = model
            self.stats = stats
            self.state = "ready"
        self.ready.set()
        self.done.set()

    def set_failed(self, error: str) -> None:
        with self._lock:
            self.error = error
            self.state = "failed"
        self.done.set()

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"variant": self.variant, "tag": self.tag, **self.stats, "ready": self.ready.is_set(),
                    "state": self.state, "error": self.error}


class _Handler(BaseHTTPRequestHandler):
    server_version = "omni-loader-stage-server"
    protocol_version = "HTTP/1.0"  # one request per connection, like a health probe

    def do_GET(self) -> None:
        state: StageState = self.server.stage_state  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        if path == "/health":
            if state.ready.is_set():
                self._send(200, b"")
            else:
                self._send(503, json.dumps({"state": state.state}).encode(), "application/json")
        elif path == "/stats":
            self._send(200, json.dumps(state.to_dict(), default=str).encode(), "application/json")
        else:
            self._send(404, b'{"error": "not found"}', "application/json")

    def _send(self, code: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a health probe every 50 ms would drown the log that serve-ab reads


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # a server stopped a moment ago leaves TIME_WAIT sockets, not a listener
    allow_reuse_port = False  # never share the port with a running server: that must fail


class _Server6(_Server):
    address_family = socket.AF_INET6


def bind_server(host: str, port: int, state: StageState) -> ThreadingHTTPServer:
    """Bind and listen at once; a port in use is one clear line (:class:`OmniLoaderError`)."""
    cls = _Server6 if ":" in host else _Server
    try:
        server = cls((host, port), _Handler)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE or "in use" in reason.lower():
            reason = "address already in use (is another server running there?)"
        raise OmniLoaderError(f"cannot listen on {host}:{port}: {reason}") from None
    server.stage_state = state  # type: ignore[attr-defined]
    return server


@contextmanager
def serving(server: ThreadingHTTPServer, name: str, *woken: threading.Event) -> Iterator[list[str]]:
    """Serve HTTP in a thread while inside; SIGTERM and SIGINT set every event of ``woken`` and are named in the
    list yielded. On the way out the server closes and the signals get their handlers back."""
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        for event in woken:
            event.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, name=name, daemon=True).start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def edge_clock(device: Any) -> Any:
    """An :class:`EdgeClock` on ``device`` (made here so that importing this module imports no torch)."""
    from ..host.timing import PhaseClock

    class EdgeClock(PhaseClock):
        """The loader's clock, noting also the wall-clock time (``time.time()``) each phase started and ended."""

        def __init__(self, dev: Any) -> None:
            super().__init__(dev)
            self.started: dict[str, float] = {}
            self.ended: dict[str, float] = {}

        @contextmanager
        def phase(self, name: str) -> Iterator[None]:
            self.started[name] = time.time()
            with super().phase(name):
                yield
            self.ended[name] = time.time()

    return EdgeClock(device)


def _model_loaded_line(result: Any, model: Any) -> str:
    """vLLM-Omni's ``[Model Loaded]`` line: the loader's own where it makes one, else the same sum of parameters."""
    line = getattr(result, "model_loaded", None)
    if isinstance(line, str) and line.startswith("[Model Loaded]"):
        return line
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return (f"[Model Loaded] name=Qwen2_5OmniToken2WavForConditionalGenerationVLLM, success=True, "
            f"size={size / 2**20:.2f} MB, device={next(model.parameters()).device}")


def _post_load(log: StageLog, state: StageState, bound_at: float, loaded_at: float, stats: dict[str, Any],
               model: Any, what: str, note: str) -> None:
    """The lane's ready: ``init engine (what) took`` from the load's end, then /health 200 and the ready line."""
    log(f"init engine ({what}) took {time.time() - loaded_at:.6f} seconds")
    state.set_ready(model, stats)
    log(f"{READY_MESSAGE} ({time.perf_counter() - bound_at:.3f} s after binding; {note})")


def load_in_background(options: StageServerOptions, state: StageState, bound_at: float, log: StageLog) -> None:
    """The loader thread: resolve the snapshot, load, log vLLM-Omni lines, flip /health to 200."""
    try:
        if options.simulate is not None:
            simulate_load(options, state, bound_at, log)
            return
        began = time.perf_counter()
        from ..host.devices import resolve_device
        from ..token2wav.checkpoint import resolve_snapshot
        from ..token2wav.loader import load_token2wav
        from ..token2wav.model import import_model_code

        # a checkpoint that is not there fails before transformers' model code is imported (seconds)
        snapshot = resolve_snapshot(**asdict(options.snapshot), progress=False)
        import_model_code()  # the loader would (outside its phases): here, so that the log says what it took
        log(f"Initializing Token2Wav (model_stage=code2wav), variant {options.variant}, layout {options.load.layout}, "
            f"from {snapshot.root} (torch and the model code imported, snapshot found: "
            f"{time.perf_counter() - began:.3f} s)")
        clock = edge_clock(resolve_device(options.load.device))
        model, result = load_token2wav(snapshot, options.variant, options.load, digest=options.digest, clock=clock)
        seconds, at = result.phase_seconds(), clock.ended
        formats = sorted({"*" + os.path.splitext(name)[1] for name in snapshot.shards})
        log(f"Using model weights format {formats}", when=clock.started.get("read_checkpoint"))
        log(f"Buffer discovery took {seconds['buffer_discovery'] * 1e3:.3f} ms (variant {result.variant}, "
            f"state_dict() calls {result.state_dict_calls}, persistent buffers {len(result.persistent_buffers)})",
            when=at["buffer_discovery"])
        log(_model_loaded_line(result, model), when=at.get("model_loaded_size", at["load_parameters"]))
        log(f"Token2Wav load_weights took {seconds['weight_loading'] * 1e3:.3f} ms", when=at["weight_loading"])
        log(f"Loading weights took {seconds[OUTER_LOAD_WEIGHTS]:.6f} seconds", when=at[OUTER_LOAD_WEIGHTS])
        size = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
        log(f"Model loading took {size / 2**30:.4f} GiB memory and {seconds['total']:.6f} seconds", when=at["total"])
        stats = result.to_dict()
        stats.update(checkpoint=snapshot.describe(), stage=options.stage, replica=options.replica)
        _post_load(log, state, bound_at, at["total"], stats, model, "digest, stats" if options.digest else "stats",
                   f"{result.weights_loaded} weights loaded")
    except OmniLoaderError as exc:
        state.set_failed(str(exc))
    except BaseException as exc:  # noqa: BLE001 (a bug: keep its traceback in the log)
        traceback.print_exc()
        sys.stderr.flush()
        state.set_failed(f"{type(exc).__name__}: {exc}")


def simulate_load(options: StageServerOptions, state: StageState, bound_at: float, log: StageLog) -> None:
    """A stage that is not Token2Wav: ``options.simulate`` seconds of sleep stand for its load (no model)."""
    began = time.perf_counter()  # model loading: this line, the sleep (its weight loading) and that one's line
    log(f"stage {options.stage} simulates its load: a sleep of {options.simulate:g} s, no model, no weights")
    slept = time.perf_counter()
    time.sleep(options.simulate)
    slept = time.perf_counter() - slept
    log(f"Loading weights took {slept:.6f} seconds")
    total = time.perf_counter() - began
    log(f"Model loading took 0.0000 GiB memory and {total:.6f} seconds")
    stats = {"simulated_s": options.simulate, "phases": {"weight_loading": slept, "total": total},
             "stage": options.stage, "replica": options.replica}
    _post_load(log, state, bound_at, time.time(), stats, None, "stats", "simulated")


def run_stage_server(options: StageServerOptions) -> int:
    """Bind, start the load and the HTTP loop, and wait for a signal (or a failed load)."""
    die_with_parent()  # a stage of a stage-group (which asks for it) stops when the group ends, even killed
    state = StageState(options.variant, options.tag)
    server = bind_server(options.host, options.port, state)
    log = StageLog(options.stage, options.replica)
    bound_at = time.perf_counter()
    host, port = server.server_address[:2]
    stop = threading.Event()
    with serving(server, "stage-server-http", stop) as received:
        tag = f", tag {options.tag}" if options.tag else ""
        what = f"variant {options.variant}" if options.simulate is None else f"simulated load of {options.simulate:g} s"
        log(f"stage-server: listening on http://{host}:{port} ({what}, stage {options.stage}{tag}); "
            "/health answers 503 until the model is loaded")
        loader = threading.Thread(target=load_in_background, args=(options, state, bound_at, log),
                                  name="stage-server-load", daemon=True)
        loader.start()
        while not stop.is_set():
            if state.done.is_set() and state.state == "failed":
                break
            stop.wait(0.2)
    if state.state == "failed" and not received:
        raise OmniLoaderError(state.error or "load failed")
    log(f"stage-server: {received[0] if received else 'stop'} received, shut down")
    if loader.is_alive():
        # The load cannot be interrupted; leave at once rather than finalise torch under a live thread.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
