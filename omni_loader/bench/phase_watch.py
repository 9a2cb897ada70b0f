"""What the run in progress is doing, on the benchmark's progress bar: constructing, loading, digest.

Why: a default run spends a second or more in one process the parent only waits for, and a bar that says
"run 6/12 optimized" for all of it hides whether it is building the model or hashing 1.7 GB. A worker names
itself after each top-level step it enters (:func:`omni_loader.host.procs.announce`, before that step's clock
starts); while the parent waits, a thread here reads the name a few times a second and puts the step in words
on the bar. Nothing crosses into the worker, and nothing is added inside a timed phase.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..host.procs import process_phase

# The steps a worker announces, as the bar says them.
STEP_WORDS = {"construct": "constructing", "outer_load_weights": "loading weights", "post_load": "post-load check",
              "digest": "digest", "reference_copy": "reference copy"}
POLL_SECONDS = 0.2


class PhaseWatch:
    """``with PhaseWatch(bar, "run 6/12 optimized", " (limit 120 s)") as w: run_isolated(..., on_start=w.started)``.

    ``started(pid)`` (the worker's pid, as :func:`~omni_loader.bench.worker.run_isolated` reports it) starts the
    reading; ``chain`` is called with the pid too (the caller's own ``on_start``).
    """

    def __init__(self, bar: Any, label: str, suffix: str = "", chain: Callable[[int], None] | None = None) -> None:
        self.bar, self.label, self.suffix, self.chain = bar, label, suffix, chain
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.seen: list[str] = []  # the steps shown, in order (what a test reads)

    def started(self, pid: int) -> None:
        self.thread = threading.Thread(target=self._read, args=(pid,), name=f"phase-watch-{pid}", daemon=True)
        self.thread.start()
        if self.chain:
            self.chain(pid)

    def _read(self, pid: int) -> None:
        shown = None
        while not self.stop.wait(POLL_SECONDS if shown else POLL_SECONDS / 4):
            phase = process_phase(pid)
            if phase is not None and phase != shown:
                shown = phase
                self.seen.append(phase)
                self.bar.set_postfix_str(f"{self.label}: {STEP_WORDS.get(phase, phase)}")  # short: a log line is 80

    def __enter__(self) -> PhaseWatch:
        self.bar.set_postfix_str(f"{self.label}{self.suffix}")
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
