"""``stage-server``: Token2Wav behind an HTTP ``/health``, and the ``serve-ab`` command that times it.

``omni-loader stage-server --variant baseline --port 8091`` stands in for one vLLM-Omni stage
server: it binds the port first (a port in use fails at once, in one line, exit 2), then loads
Token2Wav in a background thread while ``GET /health`` answers 503; once the model is loaded,
``/health`` answers 200 and ``GET /stats`` returns the :class:`~omni_loader.loader.LoadResult`
(``to_dict()``) with ``"ready": true``. Nothing answers 200 on ``/health`` before the load ends.

When loading ends it logs, to stdout and flushed, lines shaped like vLLM's, so that
``serve-ab``'s log patterns read the same figures from this server as from ``vllm serve``::

    Buffer discovery took 1.564 ms (variant optimized, state_dict() calls 0, persistent buffers 1)
    Loading weights took 0.620436 seconds
    Model loading took 1.67 GiB memory and 8.123456 seconds

SIGTERM or SIGINT closes the listening socket and exits with status 0 (a load still in
progress is abandoned). A load that fails prints one line and exits with status 2.

What a server loads and where it listens is one :class:`StageServerOptions` value (the command
layer, :mod:`omni_loader.cli.serve`, makes it from the options typed). The A/B harness lives in
:mod:`omni_loader.serve_ab` (re-exported here: ``serve_ab``, ``stage_server_commands``, ``free_port``).
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
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .errors import OmniLoaderError
from .options import LoadOptions
from .serve_ab import DEFAULT_PATTERNS, extract_figures, free_port, serve_ab, stage_server_commands

__all__ = [
    "DEFAULT_PATTERNS",
    "SnapshotChoice",
    "StageServerOptions",
    "extract_figures",
    "free_port",
    "run_stage_server",
    "serve_ab",
    "stage_server_commands",
]

DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True)
class SnapshotChoice:
    """Which snapshot a stage server loads, as the checkpoint options name it (a directory, a model id
    in the Hugging Face cache, or the synthetic one of ``size`` and ``seed``).

    A choice, not a snapshot: it is resolved in the loader thread, after the port is bound, because
    making a synthetic snapshot or finding a model takes time that ``/health`` must already cover.
    """

    checkpoint: str | None = None
    model_id: str | None = None
    size: str = "full"
    seed: int = 0
    cache_dir: str | None = None
    download: bool = False

    def resolve(self) -> Any:  # -> checkpoint.Snapshot
        from .checkpoint import resolve_snapshot

        return resolve_snapshot(checkpoint=self.checkpoint, model_id=self.model_id, size=self.size, seed=self.seed,
                                cache_dir=self.cache_dir, download=self.download, progress=False)


@dataclass(frozen=True)
class StageServerOptions:
    """One stage server: the variant it loads, from which snapshot, with which load options, and where it listens."""

    variant: str
    port: int
    snapshot: SnapshotChoice = field(default_factory=SnapshotChoice)
    load: LoadOptions = field(default_factory=LoadOptions)
    host: str = DEFAULT_HOST
    digest: bool = False  # also hash every tensor (reported in /stats; adds to the startup time)
    tag: str | None = None  # free text echoed in the log and in /stats


# --------------------------------------------------------------------------- state


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
            data = {"variant": self.variant, "tag": self.tag, **self.stats}
            data.update(ready=self.ready.is_set(), state=self.state, error=self.error)
            return data


# --------------------------------------------------------------------------- HTTP


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


# --------------------------------------------------------------------------- the load


def _log(line: str) -> None:
    print(line, flush=True)


def _weights_bytes(model: Any) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def load_in_background(options: StageServerOptions, state: StageState, bound_at: float) -> None:
    """The loader thread: resolve the snapshot, load, log vLLM-style lines, flip /health to 200."""
    try:
        from .loader import load_token2wav

        snapshot = options.snapshot.resolve()
        model, result = load_token2wav(snapshot, options.variant, options.load, digest=options.digest)
        seconds = result.phase_seconds()
        _log(f"Buffer discovery took {seconds['buffer_discovery'] * 1e3:.3f} ms (variant {result.variant}, "
             f"state_dict() calls {result.state_dict_calls}, persistent buffers {len(result.persistent_buffers)})")
        _log(f"Loading weights took {seconds['weight_loading']:.6f} seconds")
        _log(f"Model loading took {_weights_bytes(model) / 2**30:.4f} GiB memory and {seconds['total']:.6f} seconds")
        stats = result.to_dict()
        stats["checkpoint"] = snapshot.describe()
        state.set_ready(model, stats)
        _log(f"stage-server: ready, /health answers 200 ({time.perf_counter() - bound_at:.3f} s after binding; "
             f"{result.weights_loaded} weights loaded)")
    except OmniLoaderError as exc:
        state.set_failed(str(exc))
    except BaseException as exc:  # noqa: BLE001 (a bug: keep its traceback in the log)
        traceback.print_exc()
        sys.stderr.flush()
        state.set_failed(f"{type(exc).__name__}: {exc}")


def run_stage_server(options: StageServerOptions) -> int:
    """Bind, start the load and the HTTP loop, and wait for a signal (or a failed load)."""
    state = StageState(options.variant, options.tag)
    server = bind_server(options.host, options.port, state)
    bound_at = time.perf_counter()
    host, port = server.server_address[:2]
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, _frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    http_thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                   name="stage-server-http", daemon=True)
    http_thread.start()
    tag = f", tag {options.tag}" if options.tag else ""
    _log(f"stage-server: listening on http://{host}:{port} (variant {options.variant}{tag}); "
         "/health answers 503 until the model is loaded")
    loader = threading.Thread(target=load_in_background, args=(options, state, bound_at),
                              name="stage-server-load", daemon=True)
    loader.start()
    try:
        while not stop.is_set():
            if state.done.is_set() and state.state == "failed":
                break
            stop.wait(0.2)
    finally:
        server.shutdown()
        server.server_close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if state.state == "failed" and not received:
        raise OmniLoaderError(state.error or "load failed")
    _log(f"stage-server: {received[0] if received else 'stop'} received, shut down")
    if loader.is_alive():
        # The load cannot be interrupted; leave at once rather than finalise torch under a live thread.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
