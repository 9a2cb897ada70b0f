"""Where startup goes: vLLM and vLLM-Omni startup logs read into a per-stage timeline.

Stages start together and their lines interleave, so a figure is keyed by its lane (stage and replica; else the
process; else ``server``), never by its order in the file. What is read is data,
:data:`~omni_loader.startup.logfigures.DEFAULT_MARKERS`, which a caller extends; a marker's kind says how:

- ``took``: the line reports its phase's length (group ``seconds``, or the first group, its unit
  after it): the phase ends at the line's timestamp and starts that long before; source ``reported``.
- ``until``: the line ends a phase it does not time (``[Model Loaded] name=...``): it starts at the
  lane's latest marker named in ``after``, else its previous marker, else its first line; ``inferred``.
- ``event``: a point in time; groups ``value`` (GiB, MB), ``detail`` and ``stage`` (whose lane) are kept.

Timestamps have one-second resolution, so gaps up to ``min_gap`` (1 s) are not reported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from .logfigures import DEFAULT_MARKERS, MAX_LINE, Marker, line_blocks
from .timeline_cover import UNEXPLAINED, CriticalPath, Segment, cover
from .timeline_scan import RESOLUTION, WARNINGS_SHOWN, Lane, Record, Scanner

AFTER_STAGES = "after stages"

# The kit's stage server's first load line, read whatever markers a caller passes: a phase, not a gap.
STAGE_SERVER_MARKERS: tuple[Marker, ...] = (
    Marker("imports_and_snapshot", r"torch and the model code imported, snapshot found: "
                                   r"(?P<seconds>[0-9]+(?:\.[0-9]+)?) ?(?P<unit>ms|s)\b"),
)


class NoStartupMarkers(OmniLoaderError):
    """A file in which no startup marker was found (not a vLLM log, or cut before any phase ended)."""


ROW_FIELDS = ("log", "lane", *(name for name in Record.__dataclass_fields__ if name != "log"))


@dataclass
class Timeline:
    """The records of one log, its lanes, and what its first line said (serve-ab's run and variant)."""

    log: str
    records: list[Record]
    lanes: dict[tuple[str, int], Lane]
    lines: int = 0
    started: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what in the log no clock gives, each a line

    def by_lane(self) -> dict[str, list[Record]]:
        """Each lane's records, in log order (one pass: what a per-lane question reads)."""
        out: dict[str, list[Record]] = {}
        for r in self.records:
            out.setdefault(r.lane, []).append(r)
        return out

    def phases(self) -> list[Record]:
        return [r for r in self.records if r.kind == "phase"]

    def find(self, phase: str, lane: str | None = None) -> list[Record]:
        return [r for r in self.records if r.phase == phase and (lane is None or r.lane == lane)]

    def lane_names(self) -> list[str]:
        """Stages in number and replica order, then the other lanes in order of appearance."""
        stages = sorted((ln for ln in self.lanes.values() if ln.is_stage), key=lambda ln: (int(ln.stage[6:]), ln.replica))
        return [ln.name for ln in stages] + [ln.name for ln in self.lanes.values() if not ln.is_stage]

    def lane(self, name: str) -> Lane:
        return next(ln for ln in self.lanes.values() if ln.name == name)

    def token2wav_lanes(self) -> list[str]:
        return [ln.name for ln in self.lanes.values() if ln.token2wav]

    def stage_ready(self) -> dict[str, float]:
        """When each lane doing a stage's work was ready: its ``ready`` event, else the end of its last phase."""
        out: dict[str, float] = {}
        grouped = self.by_lane()
        for name in self.lane_names():
            mine = [r for r in grouped.get(name, ()) if r.scope == "stage"]
            ready = [r.end for r in mine if r.ready == "stage"] or [r.end for r in mine if r.kind == "phase"
                                                                     and r.level >= 0]
            if ready:
                out[name] = max(ready)
        return out

    def critical_path(self, min_gap: float = RESOLUTION) -> CriticalPath | None:
        """The lane ready last gated readiness: its phases and gaps, then the server's after it, up to ready."""
        if not self.records:
            return None
        stage_ready = self.stage_ready()
        server = [r for r in self.records if r.ready == "server"]
        ready_at, marker = ((max(r.end for r in server), server[-1].phase) if server else
                            (max(stage_ready.values()), "last stage ready") if stage_ready else
                            (max(r.end for r in self.records), "last marker"))
        if not stage_ready:
            return CriticalPath(ready_at, marker, None, None, None, {}, ())
        gating, *others = sorted(stage_ready, key=lambda n: stage_ready[n], reverse=True)
        runner_up = others[0] if others else None
        margin = stage_ready[gating] - stage_ready[runner_up] if runner_up else None
        first = self.lane(gating).first
        segments = cover(gating, [r for r in self.by_lane()[gating] if r.kind == "phase"], 0.0 if first is None else first,
                         stage_ready[gating], min_gap)
        after = [r for r in self.phases() if r.scope == "server" and r.level >= 0 and r.end > stage_ready[gating]]
        segments += cover(AFTER_STAGES, after, stage_ready[gating], ready_at, min_gap)
        return CriticalPath(ready_at, marker, gating, margin, runner_up, stage_ready, tuple(segments))

    def gaps(self, min_gap: float = RESOLUTION) -> list[Segment]:
        """Stretches over ``min_gap`` that no phase covers: in each stage's lane from its first line to its
        ready, and on the critical path from the last stage ready to the server's."""
        out: list[Segment] = []
        ready, grouped, firsts = self.stage_ready(), self.by_lane(), {ln.name: ln.first for ln in self.lanes.values()}
        for name in self.lane_names():
            phases = [r for r in grouped.get(name, ()) if r.kind == "phase" and r.level >= 0]
            if not any(r.scope == "stage" for r in phases):
                continue  # the API server waits for the stages: its time before them is theirs
            first = min([r.start for r in phases] + [f for f in (firsts[name],) if f is not None])
            last = max([r.end for r in phases] + [ready.get(name, 0.0)])
            out += [s for s in cover(name, phases, first, last, min_gap) if s.phase == UNEXPLAINED]
        path = self.critical_path(min_gap)
        return out + [s for s in (path.segments if path else ()) if s.lane == AFTER_STAGES and s.phase == UNEXPLAINED]

    def rows(self) -> list[dict[str, Any]]:
        """The tidy table: one dict per record, its ``lane`` included (the columns of :data:`ROW_FIELDS`)."""
        return [{"log": r.log, "lane": r.lane, **asdict(r)} for r in self.records]

    def to_dict(self, min_gap: float = RESOLUTION) -> dict[str, Any]:
        path = self.critical_path(min_gap)
        return {"log": self.log, "lines": self.lines, "started": self.started, "meta": self.meta,
                "warnings": list(self.warnings),
                "lanes": [{**asdict(ln), "name": ln.name} for ln in self.lanes.values()], "records": self.rows(),
                "critical_path": path.to_dict() if path else None, "gaps": [g.to_dict() for g in self.gaps(min_gap)]}


def parse_text(text: str | Iterable[str], markers: Sequence[Marker] = DEFAULT_MARKERS, log: str = "") -> Timeline:
    """The timeline of ``text``: one string, or an iterable of blocks that each end at a line's end."""
    names = {m.name for m in markers}
    scanner = Scanner((*markers, *(m for m in STAGE_SERVER_MARKERS if m.name not in names)), log)
    for block in ([text] if isinstance(text, str) else text):
        scanner.feed(block if block.endswith("\n") else block + "\n")
    return Timeline(log, scanner.records, scanner.lanes, scanner.lines, scanner.started, scanner.meta,
                    scanner.warnings())


def read_timeline(path: str | os.PathLike[str], markers: Sequence[Marker] = DEFAULT_MARKERS,
                  block_size: int = 1 << 22, max_line: int = MAX_LINE) -> Timeline:
    """Stream ``path`` into its :class:`Timeline`; a line longer than ``max_line`` is cut (a ``line-cut`` warning)."""
    cut: list[int] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        timeline = parse_text(line_blocks(fh, block_size, max_line, cut), markers, log=str(path))
    if cut:
        more = f" and {len(cut) - WARNINGS_SHOWN} more" if len(cut) > WARNINGS_SHOWN else ""
        timeline.warnings.append(f"line-cut: {path} {'line' if len(cut) == 1 else 'lines'} "
                                 f"{', '.join(map(str, cut[:WARNINGS_SHOWN]))}{more} longer "
                                 f"than {max_line:,} characters: read to their first {max_line:,}")
    return timeline


def read_timelines(paths: Iterable[str | os.PathLike[str]], markers: Sequence[Marker] = DEFAULT_MARKERS) -> list[Timeline]:
    """:func:`read_timeline` of each path (a file without a marker is an error); warnings to stderr."""
    out = []
    for path in paths:
        if not Path(path).is_file():
            raise OmniLoaderError(f"{path}: no such log file")
        timeline = read_timeline(path, markers)
        if not (timeline.records and timeline.started):  # a log has timestamped lines
            raise NoStartupMarkers(f"{path}: no vLLM or vLLM-Omni startup marker in its {timeline.lines} lines "
                                   "(is it a server log?)")
        for text in timeline.warnings:
            print(f"omni-loader: warning: {text}", file=sys.stderr)
        out.append(timeline)
    return out
