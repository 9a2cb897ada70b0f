"""Where startup goes: vLLM and vLLM-Omni startup logs read into a per-stage timeline.

A vLLM line is ``(EngineCore_DP0 pid=330463) [Stage-2] INFO 02-27 08:54:08 [default_loader.py:293]
Loading weights took 1.51 seconds``: process tag and pid, vLLM-Omni's stage tag, level, month-day
time to the second, file:line, message; newer vLLM-Omni names the stage in the process tag
(``(StageEngineCoreProc_stage0_replica1 pid=...)``). Stages start together and their lines
interleave, so a figure is keyed by its lane (stage and replica; else the process; else ``server``),
never by its order in the file. What is read is data: :data:`~omni_loader.startup.logfigures.DEFAULT_MARKERS`
(:class:`~omni_loader.startup.logfigures.Marker`: name, regular expression, kind), which a caller extends
(``DEFAULT_MARKERS + (Marker(...),)``, or :func:`parse_marker_args` of ``NAME=REGEX`` strings):

- ``took``: the line reports its phase's length (group ``seconds``, or the first group, its unit
  after it): the phase ends at the line's timestamp and starts that long before; source ``reported``.
- ``until``: the line ends a phase it does not time (``[Model Loaded] name=...``): it starts at the
  lane's latest marker named in ``after``, else its previous marker, else its first line; ``inferred``.
- ``event``: a point in time; groups ``value`` (GiB, MB), ``detail`` and ``stage`` (whose lane) are kept.

Timestamps have one-second resolution: a reported start can be a second off, and gaps up to
``min_gap`` (1 s) are not reported. A file is read in blocks of lines in which C-level searches find
the few lines that matter, so 200 MB take seconds in constant memory. :meth:`Timeline.critical_path`
says which stage gated readiness and by how much; :meth:`Timeline.gaps`, what no marker explains.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from .logfigures import (ANSI, DEFAULT_MARKERS, HEADER, PID, SERVE_AB_HEADER, STAMPED, line_tags,
                         TOKEN2WAV, LogClock, Marker, line_blocks, to_seconds)

SERVER_LANE, UNEXPLAINED, AFTER_STAGES = "server", "(unexplained)", "after stages"
RESOLUTION = 1.0  # seconds: vLLM's timestamps are to the second
class NoStartupMarkers(OmniLoaderError):
    """A file in which no startup marker was found (not a vLLM log, or cut before any phase ended)."""


@dataclass(frozen=True)
class Record:
    """One phase (start, end, seconds) or event (``kind`` event: start == end) of one lane, in seconds from
    the log's first timestamp; ``source``: its extent was ``reported`` by the line or ``inferred``."""

    stage: str
    replica: int
    pid: int | None
    phase: str
    start: float
    end: float
    seconds: float
    source: str
    line: int
    kind: str = "phase"
    level: int = 0
    scope: str = "stage"
    ready: str = ""
    timestamp: str = ""
    process: str = ""
    value: float | None = None
    detail: str = ""
    log: str = ""

    @property
    def lane(self) -> str:
        return self.stage if not self.replica else f"{self.stage}/replica{self.replica}"


ROW_FIELDS = ("log", "lane", *(name for name in Record.__dataclass_fields__ if name != "log"))


@dataclass
class Lane:
    """One stage-replica (or process): its first pid and process, first timestamp, whether it is Token2Wav's."""

    stage: str
    replica: int
    pid: int | None = None
    process: str = ""
    first: float | None = None
    token2wav: bool = False

    @property
    def name(self) -> str:
        return self.stage if not self.replica else f"{self.stage}/replica{self.replica}"

    @property
    def is_stage(self) -> bool:
        return bool(re.fullmatch(r"stage-\d+", self.stage))


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


@dataclass
class Timeline:
    """The records of one log, its lanes, and what its first line said (serve-ab's run and variant)."""

    log: str
    records: list[Record]
    lanes: dict[tuple[str, int], Lane]
    lines: int = 0
    started: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def phases(self, lane: str | None = None) -> list[Record]:
        return [r for r in self.records if r.kind == "phase" and (lane is None or r.lane == lane)]

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
        for name in self.lane_names():
            mine = [r for r in self.records if r.lane == name and r.scope == "stage"]
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
        segments = _cover(gating, self.phases(gating), 0.0 if first is None else first, stage_ready[gating], min_gap)
        after = [r for r in self.phases() if r.scope == "server" and r.level >= 0 and r.end > stage_ready[gating]]
        segments += _cover(AFTER_STAGES, after, stage_ready[gating], ready_at, min_gap)
        return CriticalPath(ready_at, marker, gating, margin, runner_up, stage_ready, tuple(segments))

    def gaps(self, min_gap: float = RESOLUTION) -> list[Segment]:
        """Stretches over ``min_gap`` that no phase covers: in each stage's lane from its first line to its
        ready, and on the critical path from the last stage ready to the server's."""
        out: list[Segment] = []
        ready = self.stage_ready()
        for name in self.lane_names():
            phases = [r for r in self.phases(name) if r.level >= 0]
            if not any(r.scope == "stage" for r in phases):
                continue  # the API server waits for the stages: its time before them is theirs
            first = min([r.start for r in phases] + [f for f in (self.lane(name).first,) if f is not None])
            last = max([r.end for r in phases] + [ready.get(name, 0.0)])
            out += [s for s in _cover(name, phases, first, last, min_gap) if s.phase == UNEXPLAINED]
        path = self.critical_path(min_gap)
        return out + [s for s in (path.segments if path else ()) if s.lane == AFTER_STAGES and s.phase == UNEXPLAINED]

    def rows(self) -> list[dict[str, Any]]:
        """The tidy table: one dict per record, its ``lane`` included (the columns of :data:`ROW_FIELDS`)."""
        return [{"log": r.log, "lane": r.lane, **asdict(r)} for r in self.records]

    def to_dict(self, min_gap: float = RESOLUTION) -> dict[str, Any]:
        path = self.critical_path(min_gap)
        return {"log": self.log, "lines": self.lines, "started": self.started, "meta": self.meta,
                "lanes": [{**asdict(ln), "name": ln.name} for ln in self.lanes.values()], "records": self.rows(),
                "critical_path": path.to_dict() if path else None, "gaps": [g.to_dict() for g in self.gaps(min_gap)]}


def _cover(lane: str, phases: Sequence[Record], start: float, end: float, min_gap: float) -> list[Segment]:
    """The outermost phases from ``start`` to ``end`` in order, with the gaps over ``min_gap`` between them."""
    def inside(p: Record, q: Record) -> bool:  # nested by level (within the clock's resolution), or strictly
        if q.level < p.level:
            return q.start - RESOLUTION <= p.start and p.end <= q.end + RESOLUTION
        return q.start <= p.start and p.end <= q.end and (q.seconds > p.seconds or q.line < p.line)

    segments: list[Segment] = []
    cursor = start
    for p in sorted((p for p in phases if not any(q is not p and inside(p, q) for q in phases)),
                    key=lambda r: (r.start, -r.end)):
        if p.end > cursor:
            if p.start - cursor > min_gap:
                segments.append(Segment(lane, UNEXPLAINED, cursor, min(p.start, end)))
            segments.append(Segment(lane, p.phase, max(p.start, cursor), p.end, p.source))
            cursor = p.end
    if end - cursor > min_gap:
        segments.append(Segment(lane, UNEXPLAINED, cursor, end))
    return segments


# --------------------------------------------------------------------------- reading


def _lane_key(head: re.Match[str] | None, named_stage: str | None = None) -> tuple[str, int, str, int | None]:
    """(stage, replica, process, pid) of a line: its stage tag, else the stage its process names, else the process."""
    if named_stage is not None:  # the orchestrator's "Stage-1 reported ready" is stage 1's
        return f"stage-{int(named_stage)}", 0, "", None
    stage, replica, process, pid = line_tags(head)
    return stage or process or SERVER_LANE, replica, process, pid


class _Scanner:
    """The state of one log read in blocks of whole lines: only lines that can matter are parsed.

    Per block, C-level searches find the lines holding a marker's keyword (or matching a marker
    without one), a pid not seen before (a lane's first line) or a Token2Wav name; each such line is
    parsed in file order. A line without a timestamp takes the latest one before it.
    """

    def __init__(self, markers: Sequence[Marker], log: str) -> None:
        self.markers, self.log = tuple(markers), log
        self.clock, self.lanes, self.records, self.meta = LogClock(), {}, [], {}
        self.latest: dict[tuple[str, int], dict[str, float]] = {}  # lane -> marker name ("" any) -> its latest time
        self.pids: set[str] = set()
        self.lines, self.now, self.started = 0, None, ""

    def feed(self, block: str) -> None:
        if "\x1b" in block:
            block = ANSI.sub("", block)
        if not self.lines and (m := SERVE_AB_HEADER.match(block)):
            self.meta = {"run": int(m["run"]), "variant": m["variant"], "warmup": bool(m["warmup"])}
        if self.clock.t0 is None and (first := STAMPED.search(block)):
            self.started = first["stamp"]
            self.clock(first["stamp"])  # the origin: the first timestamp in the file
        def lines_with(needle: str) -> Iterator[int]:  # where needle is, once per line
            at = block.find(needle)
            while at >= 0:
                yield at
                at = block.find(needle, block.find("\n", at) + 1)
        hits: list[tuple[int, int, Marker | None]] = []
        for pid in set(PID.findall(block)) - self.pids:
            self.pids.add(pid)
            hits.append((block.find(f"pid={pid})"), 0, None))
        for marker in self.markers:
            hits += [(at, 1, marker) for at in (lines_with(marker.keyword) if marker.keyword else
                                                (m.start() for m in marker.regex.finditer(block)))]
        hits += [(at, 2, None) for needle in ("2wav", "2Wav", "2WAV") for at in lines_with(needle)]
        cursor, number, seen = 0, self.lines, set()
        for at, what, marker in sorted(hits, key=lambda h: (h[0], h[1])):
            start = block.rfind("\n", 0, at) + 1
            number += block.count("\n", cursor, start)
            cursor = start
            if (start, what, marker) in seen:
                continue
            seen.add((start, what, marker))
            self._line(block, start, number + 1, what, marker)
        self.lines += block.count("\n")
        self.now = self._stamp_before(block, len(block))

    def _stamp_before(self, block: str, end: int, limit: int = 10000) -> float | None:
        """The timestamp of the last line before ``end`` that has one (else the previous block's)."""
        while end > 0 and limit:
            start = block.rfind("\n", 0, end - 1) + 1
            head = HEADER.match(block, start, end)
            if head["stamp"]:
                return self.clock(head["stamp"])
            end, limit = start, limit - 1
        return self.now

    def _line(self, block: str, start: int, number: int, what: int, marker: Marker | None) -> None:
        end = block.find("\n", start)
        line = block[start:end if end >= 0 else len(block)]
        head = HEADER.match(line)
        head = head if head.end() else (STAMPED.search(line) if "-" in line else None)
        now = self.clock(head["stamp"]) if head is not None and head["stamp"] else self._stamp_before(block, start)
        if marker is None:
            lane = self._touch(_lane_key(head), now)
            lane.token2wav = lane.token2wav or (what == 2 and TOKEN2WAV.search(line) is not None)
            return
        mm = marker.regex.search(line, head.end() if head is not None else 0)
        if mm is None:
            return
        own = _lane_key(head)
        self._touch(own, now)
        stage, replica, *_ = key = _lane_key(head, mm.groupdict().get("stage"))
        lane = self._touch(key, now)
        end_t = now if now is not None else 0.0
        latest = self.latest.setdefault((stage, replica), {})
        record = _record(marker, mm, end_t, latest, lane.first)
        self.records.append(replace(record, stage=stage, replica=replica, pid=own[3], line=number, log=self.log,
                                    process=own[2], timestamp=(head["stamp"] or "") if head else ""))
        latest[marker.name] = latest[""] = end_t

    def _touch(self, key: tuple[str, int, str, int | None], now: float | None) -> Lane:
        stage, replica, process, pid = key
        lane = self.lanes.get((stage, replica))
        if lane is None:
            lane = self.lanes[(stage, replica)] = Lane(stage, replica, pid, process)
        if now is not None:
            lane.first = now if lane.first is None else min(lane.first, now)
        return lane

    def timeline(self) -> Timeline:
        return Timeline(self.log, self.records, self.lanes, self.lines, self.started, self.meta)


def _record(marker: Marker, mm: re.Match[str], end: float, latest: dict[str, float], first: float | None) -> Record:
    groups = mm.groupdict()
    common = dict(stage="", replica=0, pid=None, phase=marker.name, line=0, level=marker.level, scope=marker.scope,
                  ready=marker.ready, value=float(groups["value"]) if groups.get("value") else None,
                  detail=(groups.get("detail") or "").strip())
    if marker.kind == "event":
        return Record(start=end, end=end, seconds=0.0, source="reported", kind="event", **common)
    if marker.kind == "until":
        begun = [latest[a] for a in marker.after if a in latest]
        start = max(begun) if begun else latest.get("", first if first is not None else end)
        return Record(start=start, end=end, seconds=end - start, source="inferred", **common)
    group: int | str = "seconds" if "seconds" in mm.re.groupindex else 1
    unit = groups.get("unit")
    if unit is None and (after := re.match(r"\s*([A-Za-zµμ]+)", mm.string[mm.end(group):])):
        unit = after.group(1)
    seconds = to_seconds(float(mm.group(group)), unit)
    return Record(start=end - seconds, end=end, seconds=seconds, source="reported", **common)


def parse_text(text: str | Iterable[str], markers: Sequence[Marker] = DEFAULT_MARKERS, log: str = "") -> Timeline:
    """The timeline of ``text``: one string, or an iterable of blocks that each end at a line's end."""
    scanner = _Scanner(markers, log)
    for block in ([text] if isinstance(text, str) else text):
        scanner.feed(block if block.endswith("\n") else block + "\n")
    return scanner.timeline()


def read_timeline(path: str | os.PathLike[str], markers: Sequence[Marker] = DEFAULT_MARKERS,
                  block_size: int = 1 << 22) -> Timeline:
    """Stream ``path`` (plain, ANSI-coloured, or a serve-ab run log) into its :class:`Timeline`, in blocks."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_text(line_blocks(fh, block_size), markers, log=str(path))


def read_timelines(paths: Iterable[str | os.PathLike[str]], markers: Sequence[Marker] = DEFAULT_MARKERS,
                   require: bool = True) -> list[Timeline]:
    """:func:`read_timeline` of each path; with ``require``, a file without a marker is one line (exit 2)."""
    out = []
    for path in paths:
        if not Path(path).is_file():
            raise OmniLoaderError(f"{path}: no such log file")
        timeline = read_timeline(path, markers)
        if require and not (timeline.records and timeline.started):  # a log has timestamped lines
            raise NoStartupMarkers(f"{path}: no vLLM or vLLM-Omni startup marker in its {timeline.lines} lines "
                                   "(is it a server log?)")
        out.append(timeline)
    return out
