"""A lane's time covered: its outermost phases in order, the gaps between them, and the critical path they make.

A sweep in start order and a binary search per nesting level keep this ``n log n``: comparing every phase with
every other took minutes on a log of 20,000 markers.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import accumulate
from typing import Any

from .timeline_scan import RESOLUTION

UNEXPLAINED = "(unexplained)"


@dataclass(frozen=True)
class Segment:
    """A piece of the critical path, or a gap: ``phase`` is ``(unexplained)`` where no marker covers the time."""

    lane: str
    phase: str
    start: float
    end: float
    source: str = ""

    @property
    def seconds(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": self.seconds}


@dataclass(frozen=True)
class CriticalPath:
    """What gated readiness: ``gating`` (a lane) was ready last, ``margin`` seconds after ``runner_up``."""

    ready_at: float
    ready_marker: str
    gating: str | None
    margin: float | None
    runner_up: str | None
    stage_ready: dict[str, float]
    segments: tuple[Segment, ...]

    def sentence(self) -> str:
        text = f"ready at {self.ready_at:.1f} s ({self.ready_marker}); "
        if self.gating is None:
            return text + "no stage phases to attribute it to"
        by = f", {self.margin:.1f} s after {self.runner_up}" if self.runner_up is not None else ""
        return text + f"{self.gating} gated it, ready at {self.stage_ready[self.gating]:.1f} s{by}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "segments": [s.to_dict() for s in self.segments], "sentence": self.sentence()}


def outermost(phases: Sequence[Any]) -> list[Any]:
    """The phases that no other phase holds: a lower ``level`` holds a higher one it spans within :data:`RESOLUTION`;
    the same or a higher level, one it spans strictly, or spans alike and is longer or comes first."""
    items = list(phases)
    held = [False] * len(items)
    levels = sorted({p.level for p in items})
    reach = dict.fromkeys(levels, float("-inf"))  # per level, the latest end among the phases swept so far
    for i in sorted(range(len(items)), key=lambda i: (items[i].start, -items[i].end, -items[i].seconds,
                                                       items[i].line, i)):
        p = items[i]
        held[i] = any(reach[level] >= p.end for level in levels if level >= p.level)
        reach[p.level] = max(reach[p.level], p.end)
    for level in levels[:-1]:
        spans = sorted((p.start, p.end) for p in items if p.level == level)
        starts, ends = [a for a, _ in spans], list(accumulate((b for _, b in spans), max))
        for i, p in enumerate(items):
            if not held[i] and p.level > level:
                k = bisect_right(starts, p.start + RESOLUTION)
                held[i] = bool(k) and ends[k - 1] >= p.end - RESOLUTION
    return [p for p, h in zip(items, held) if not h]


def cover(lane: str, phases: Sequence[Any], start: float, end: float, min_gap: float) -> list[Segment]:
    """The outermost phases from ``start`` to ``end`` in order, with the gaps over ``min_gap`` named :data:`UNEXPLAINED`."""
    segments: list[Segment] = []
    cursor = start
    for p in sorted(outermost(phases), key=lambda r: (r.start, -r.end)):
        if p.end > cursor:
            if p.start - cursor > min_gap:
                segments.append(Segment(lane, UNEXPLAINED, cursor, min(p.start, end)))
            segments.append(Segment(lane, p.phase, max(p.start, cursor), p.end, p.source))
            cursor = p.end
    if end - cursor > min_gap:
        segments.append(Segment(lane, UNEXPLAINED, cursor, end))
    return segments
