"""A phase clock that also snapshots a running cProfile profiler at every phase edge.

The difference of two snapshots taken at a phase's edges is what the calls made inside it cost. This module
imports torch (through :mod:`omni_loader.host.timing`); :mod:`.cprofile` imports it only when a load is profiled.
"""

from __future__ import annotations

import cProfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..host.devices import resolve_device
from ..host.timing import PhaseClock

Counters = dict[Any, tuple[int, int, float, float]]  # code -> (calls, recursive calls, cumulative s, own s)


@dataclass(frozen=True)
class PhaseMark:
    """The profiler's counters at one edge (``enter`` or ``exit``) of one phase."""

    phase: str
    edge: str
    counters: Counters


def profiler_counters(prof: cProfile.Profile) -> Counters:
    """The profiler's counters now, by code object (labelled later: labelling costs time inside the phase)."""
    return {e.code: (e.callcount, e.reccallcount, e.totaltime, e.inlinetime) for e in prof.getstats()}


class SnapshotClock(PhaseClock):
    """A :class:`~omni_loader.host.timing.PhaseClock` that records :class:`PhaseMark` s of ``profiler``."""

    def __init__(self, device: str, profiler: cProfile.Profile) -> None:
        super().__init__(resolve_device(device))
        self.profiler = profiler
        self.marks: list[PhaseMark] = []

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with super().phase(name):
            self.marks.append(PhaseMark(name, "enter", profiler_counters(self.profiler)))
            try:
                yield
            finally:
                self.marks.append(PhaseMark(name, "exit", profiler_counters(self.profiler)))
