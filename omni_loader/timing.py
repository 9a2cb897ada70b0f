"""Named phases timed with a monotonic clock, with the memory each one reached.

Each phase is also a ``torch.profiler.record_function`` range, so a profile taken around a load
shows the same phase names as the timing table (the call costs nothing without a profiler).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import torch

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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class PhaseClock:
    """Collects :class:`PhaseRecord` s for one load, in the order the phases ended."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.records: list[PhaseRecord] = []
        self._stack: list[str] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time ``name``; on a GPU, queued work is drained at both edges so the clock is honest."""
        parent = self._stack[-1] if self._stack else None
        synchronize(self.device)
        if not self._stack:
            reset_device_peak(self.device)
        self._stack.append(name)
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(f"phase::{name}"):
                yield
            synchronize(self.device)
        finally:
            seconds = time.perf_counter() - start
            self._stack.pop()
        self.records.append(
            PhaseRecord(
                name=name,
                seconds=seconds,
                parent=parent,
                rss_bytes=current_rss_bytes(),
                rss_peak_bytes=peak_rss_bytes(),
                device_peak_bytes=device_peak_bytes(self.device),
            )
        )

    def seconds(self) -> dict[str, float]:
        return {r.name: r.seconds for r in self.records}
