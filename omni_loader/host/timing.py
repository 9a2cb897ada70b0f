"""Named phases timed with a monotonic clock, with the memory each one reached and what the kernel did meanwhile.

Each phase is also a ``torch.profiler.record_function`` range, so a profile shows the timing table's names. Every
phase records ``getrusage`` deltas, the evidence of *why* it took what it took: minor and major page faults
(where first touches land: about 460,000 minor faults for 1.8 GB of fresh parameters) and voluntary and
involuntary context switches (a neighbour taking the CPU); and the bytes fetched from storage (``read_bytes`` of
``/proc/self/io``, one ``pread``: about 2 µs), nothing in a warm load (:mod:`omni_loader.host.pagecache`).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

from .procs import announce
from .devices import current_rss_bytes, device_peak_bytes, peak_rss_bytes, reset_device_peak, synchronize


@dataclass(frozen=True)
class PhaseRecord:
    """One timed phase. ``parent`` names the enclosing phase for nested spans, else None."""

    name: str
    seconds: float
    parent: str | None
    rss_bytes: int
    rss_peak_bytes: int
    device_peak_bytes: int | None
    minor_faults: int = 0
    major_faults: int = 0
    voluntary_switches: int = 0
    involuntary_switches: int = 0
    read_bytes: int | None = None  # bytes fetched from storage during the phase (/proc/self/io), None: unknown

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class PhaseClock:
    """Collects :class:`PhaseRecord` s for one load, in the order the phases ended."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.records: list[PhaseRecord] = []
        self._stack: list[str] = []
        self._io = IoCounter()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time ``name``; on a GPU, queued work is drained at both edges so the clock is honest."""
        parent = self._stack[-1] if self._stack else None
        synchronize(self.device)
        if not self._stack:
            reset_device_peak(self.device)
        self._stack.append(name)
        announce(name)  # before the clock starts: the phase's own time does not hold it
        usage, read_before = resource.getrusage(resource.RUSAGE_SELF), self._io.read_bytes()
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(f"phase::{name}"):
                yield
            synchronize(self.device)
        finally:
            seconds = time.perf_counter() - start
            after, read_after = resource.getrusage(resource.RUSAGE_SELF), self._io.read_bytes()
            self._stack.pop()
        self.records.append(PhaseRecord(
            name=name, seconds=seconds, parent=parent, rss_bytes=current_rss_bytes(), rss_peak_bytes=peak_rss_bytes(),
            device_peak_bytes=device_peak_bytes(self.device), minor_faults=after.ru_minflt - usage.ru_minflt,
            major_faults=after.ru_majflt - usage.ru_majflt, voluntary_switches=after.ru_nvcsw - usage.ru_nvcsw,
            involuntary_switches=after.ru_nivcsw - usage.ru_nivcsw,
            read_bytes=None if read_before is None or read_after is None else read_after - read_before))


class IoCounter:
    """``read_bytes`` of ``/proc/self/io``: what this process had the kernel fetch from storage. Opened once by the
    process that counts and read with ``pread`` at offset 0, which makes the kernel write it anew."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        try:
            self.fd: int | None = os.open("/proc/self/io", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.fd = None

    def read_bytes(self) -> int | None:
        if self.fd is None or os.getpid() != self.pid:
            return None
        try:
            text = os.pread(self.fd, 512, 0)
        except OSError:
            return None
        at = text.find(b"\nread_bytes: ")
        return int(text[at + 13:text.index(b"\n", at + 1)]) if at >= 0 else None

    def __del__(self) -> None:
        if self.fd is not None and os.getpid() == self.pid:
            os.close(self.fd)


def phase_tree(records: list[PhaseRecord]) -> list[tuple[int, PhaseRecord]]:
    """The phases as an outline: (depth, record), each enclosing phase right above those it encloses (records
    come in the order phases *ended*: a depth-first walk from the outermost gives the reading order)."""
    def walk(parent: str | None, depth: int) -> Iterator[tuple[int, PhaseRecord]]:
        for r in records:
            if r.parent == parent:
                yield depth, r
                yield from walk(r.name, depth + 1)

    return list(walk(None, 0))
