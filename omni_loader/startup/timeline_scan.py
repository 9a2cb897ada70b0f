"""One startup log read into records (:class:`Scanner`): the reading half of :mod:`omni_loader.startup.timeline`.

What a hostile log can hold (dates that do not exist, figures that are words, a clock that goes back) is refused
or said here, line by line, and the reading stays linear in the log.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from ..errors import OmniLoaderError
from .logfigures import (ANSI, HEADER, PID, SERVE_AB_HEADER, STAMPED, TOKEN2WAV, LogClock, Marker, lane_name,
                         line_tags, to_seconds, unit_of)

STAGE_TAG = re.compile(r"\[Stage-(\d+)\]")  # a stage tag (vLLM-Omni's [Stage-N])

SERVER_LANE = "server"
RESOLUTION = 1.0  # seconds: vLLM's timestamps are to the second


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
        return lane_name(self.stage, self.replica)


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
        return lane_name(self.stage, self.replica)

    @property
    def is_stage(self) -> bool:
        return bool(re.fullmatch(r"stage-\d+", self.stage))


def _lane_key(head: re.Match[str] | None, named_stage: str | None = None) -> tuple[str, int, str, int | None]:
    """(stage, replica, process, pid) of a line: its stage tag, else the stage its process names, else the process."""
    if named_stage is not None:  # the orchestrator's "Stage-1 reported ready" is stage 1's
        return f"stage-{int(named_stage)}", 0, "", None
    stage, replica, process, pid = line_tags(head)
    return stage or process or SERVER_LANE, replica, process, pid


class BadFigure(OmniLoaderError):
    """A marker's figure that no clock gives: not a number, not finite, negative, or longer than a day."""


MAX_FIGURE_SECONDS = 86400.0  # a startup phase longer than a day is no clock's figure: refused
MAX_FIGURE_VALUE = 1e9  # a memory figure (GiB, MB) above this is no machine's: refused
WARNINGS_SHOWN = 5  # lines of one kind of warning kept; the rest are counted


class Scanner:
    """The state of one log read in blocks of whole lines: C-level searches find the few lines that can matter, and
    a line without a timestamp walks back no further than ``floor``, so the work stays linear in the log."""

    def __init__(self, markers: Sequence[Marker], log: str) -> None:
        self.markers, self.log = tuple(markers), log
        self.clock, self.lanes, self.records, self.meta = LogClock(), {}, [], {}
        self.latest: dict[tuple[str, int], dict[str, float]] = {}  # lane -> marker name ("" any) -> its latest time
        self.lane_clock: dict[tuple[str, int], tuple[float, int]] = {}  # lane -> its latest time and that line
        self.pids: set[str] = set()
        self.stage_tags: set[str] = set()  # the N of each [Stage-N] tag seen: a stage's first tagged line starts it
        self.lines, self.now, self.started = 0, None, ""
        self.floor, self.floor_time = 0, None
        self.warned: dict[str, list[str]] = {}
        self.counted: dict[str, int] = {}

    def warn(self, kind: str, text: str) -> None:
        self.counted[kind] = self.counted.get(kind, 0) + 1
        if self.counted[kind] <= WARNINGS_SHOWN:
            self.warned.setdefault(kind, []).append(f"{kind}: {self.log or 'log'} {text}")

    def _clock(self, stamp: str, number: int | None, block: str = "", at: int = 0) -> float:
        """``stamp`` in seconds from the log's first; an error naming the line when it is no date and time."""
        try:
            now = self.clock(stamp)
        except OmniLoaderError as exc:
            number = number or self.lines + block.count("\n", 0, at) + 1
            raise OmniLoaderError(f"{self.log or 'log'} line {number}: {exc}") from None
        if now > MAX_FIGURE_SECONDS and "long-clock" not in self.counted:
            self.warn("long-clock", f"line {number or '?'}: {stamp} is {now / 86400:.1f} days after the log's first "
                                    f"timestamp ({self.started}): is it one startup?")
        return now

    def feed(self, block: str) -> None:
        if "\x1b" in block:
            block = ANSI.sub("", block)
        if not self.lines and (m := SERVE_AB_HEADER.match(block)):
            self.meta = {"run": int(m["run"]), "variant": m["variant"], "warmup": bool(m["warmup"])}
        if self.clock.t0 is None and (first := STAMPED.search(block)):
            self.started = first["stamp"]
            self._clock(first["stamp"], self.lines + block.count("\n", 0, first.start()) + 1)  # the origin
        self.floor, self.floor_time = 0, self.now

        def lines_with(needle: str) -> Iterator[int]:  # where needle is, once per line
            at = block.find(needle)
            while at >= 0:
                yield at
                at = block.find(needle, block.find("\n", at) + 1)
        hits: list[tuple[int, int, Marker | None]] = []
        for rx, seen in ((PID, self.pids), (STAGE_TAG, self.stage_tags)):  # a lane's first line: a new pid or stage
            for m in rx.finditer(block):  # one set lookup per tag
                if m.group(1) not in seen:
                    seen.add(m.group(1))
                    hits.append((m.start(), 0, None))
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
        self.now = self._stamp_before(block, len(block))
        self.lines += block.count("\n")

    def _stamp_before(self, block: str, end: int) -> float | None:
        """The timestamp of the last line before ``end`` that has one (else the previous block's), back to ``floor``."""
        pos, found = end, None
        while pos > self.floor:
            start = max(block.rfind("\n", self.floor, pos - 1) + 1, self.floor)
            head = HEADER.match(block, start, pos)
            if head["stamp"]:
                found = self._clock(head["stamp"], None, block, start)
                break
            pos = start
        self.floor, self.floor_time = end, found if found is not None else self.floor_time
        return self.floor_time

    def _line(self, block: str, start: int, number: int, what: int, marker: Marker | None) -> None:
        end = block.find("\n", start)
        line = block[start:end if end >= 0 else len(block)]
        head = HEADER.match(line)
        at_start = bool(head.end() and head["stamp"])
        head = head if head.end() else (STAMPED.search(line) if "-" in line else None)
        if head is not None and head["stamp"]:
            now = self._clock(head["stamp"], number)
            if at_start and start + len(line) + 1 > self.floor:  # the walk back of a later line stops here
                self.floor, self.floor_time = start + len(line) + 1, now
        else:
            now = self._stamp_before(block, start)
        own = _lane_key(head)
        last = self.lane_clock.get(own[:2]) if now is not None else None  # one process's lines come in time order
        if last is not None and now < last[0] - RESOLUTION:
            self.warn("clock-back", f"line {number}: {own[0]} is stamped {last[0] - now:g} s before its line "
                                    f"{last[1]}")
        if now is not None and (last is None or now >= last[0]):
            self.lane_clock[own[:2]] = (now, number)
        if marker is None:
            lane = self._touch(own, now)
            lane.token2wav = lane.token2wav or (what == 2 and TOKEN2WAV.search(line) is not None)
            return
        mm = marker.regex.search(line, head.end() if head is not None else 0)
        if mm is None:
            return
        self._touch(own, now)
        stage, replica, *_ = key = _lane_key(head, mm.groupdict().get("stage"))
        lane = self._touch(key, now)
        end_t = now if now is not None else 0.0
        latest = self.latest.setdefault((stage, replica), {})
        try:
            record = _record(marker, mm, end_t, latest, lane.first)
        except BadFigure as exc:
            raise BadFigure(f"{self.log or 'log'} line {number}: {exc}") from None
        if record.start < -RESOLUTION:
            self.warn("before-start", f"line {number}: {marker.name} began {-record.start:g} s before the log's "
                                      f"first timestamp ({self.started})")
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

    def warnings(self) -> list[str]:
        """The warnings, each kind's first :data:`WARNINGS_SHOWN` and a count of the rest."""
        out = [w for lines in self.warned.values() for w in lines]
        return out + [f"{kind}: {self.log or 'log'}: {n - WARNINGS_SHOWN} more" for kind, n in self.counted.items()
                      if n > WARNINGS_SHOWN]


def _figure(marker: Marker, text: str | None, what: str) -> float:
    """``text`` captured by ``marker`` as a number; one line when it is none (a word, ``1.2.3``) or not finite."""
    try:
        value = float(text or "")
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        raise BadFigure(f"{marker.name} captured {str(text)[:40]!r}, not a finite number ({what}); does its "
                        "pattern's group hold the figure?")
    return value


def _record(marker: Marker, mm: re.Match[str], end: float, latest: dict[str, float], first: float | None) -> Record:
    groups = mm.groupdict()
    value = _figure(marker, groups["value"], "a value") if groups.get("value") else None  # GiB, MB
    if value is not None and not 0 <= value <= MAX_FIGURE_VALUE:
        raise BadFigure(f"{marker.name}'s value {groups['value'][:40]}: no machine has that (0 to {MAX_FIGURE_VALUE:g})")
    common = dict(stage="", replica=0, pid=None, phase=marker.name, line=0, level=marker.level, scope=marker.scope,
                  ready=marker.ready, value=value, detail=(groups.get("detail") or "").strip())
    if marker.kind == "event":
        return Record(start=end, end=end, seconds=0.0, source="reported", kind="event", **common)
    if marker.kind == "until":
        begun = [latest[a] for a in marker.after if a in latest]
        start = max(begun) if begun else latest.get("", first if first is not None else end)
        return Record(start=start, end=end, seconds=end - start, source="inferred", **common)
    group: int | str = "seconds" if "seconds" in mm.re.groupindex else 1
    unit = unit_of(mm, group)
    raw = mm.group(group)
    seconds = to_seconds(_figure(marker, raw, "seconds"), unit)
    if not 0 <= seconds <= MAX_FIGURE_SECONDS:
        raise BadFigure(f"{marker.name} took {raw[:40]}{f' {unit}' if unit else ''}: no clock gives that for a "
                        f"startup phase (0 to {MAX_FIGURE_SECONDS:g} s)")
    return Record(start=end - seconds, end=end, seconds=seconds, source="reported", **common)
