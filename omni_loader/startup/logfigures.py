"""Named figures read from a server's log: ``Loading weights took 0.62 seconds`` -> ``weight_loading``, 0.62 s.

A real server reports its phases only in its log, and serve-ab times servers it cannot instrument. Every figure
is stored in seconds, so a log's ``1.5 ms`` and the loader's own phases share one unit.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from ..errors import OmniLoaderError

# The first capture group (or one named ``value``) is the number; its unit a group named ``unit``, else the word
# after the number, else seconds. vLLM and stage-server log the same lines, so one set reads both.
DEFAULT_PATTERNS: dict[str, str] = {
    "weight_loading": r"Loading weights took ([0-9.]+) seconds",
    "model_loading": r"Model loading took [0-9.]+ ?GiB(?: memory)? and ([0-9.]+) ?s",
    "init_engine": r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) seconds",
    "buffer_discovery": r"Buffer discovery took ([0-9.]+) ms",
    "token2wav_weight_loading": r"Token2Wav load_weights took ([0-9.]+) ms",
}

_UNITS = {
    "ns": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}
_UNIT_ALTERNATIVES = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))
_UNIT_AFTER = re.compile(r"\s*(" + _UNIT_ALTERNATIVES + r")(?!\w)", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def compile_patterns(patterns: Mapping[str, str | re.Pattern[str]]) -> dict[str, re.Pattern[str]]:
    """Check names and regular expressions; each needs a capture group (or one named ``value``)."""
    compiled: dict[str, re.Pattern[str]] = {}
    for name, pattern in patterns.items():
        if not _NAME.match(name):
            raise OmniLoaderError(f"log pattern name {name!r} must be letters, digits, '_', '.' or '-'")
        try:
            rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        except re.error as exc:
            raise OmniLoaderError(f"log pattern {name}={pattern!r} is not a valid regular expression ({exc})") from None
        if rx.groups < 1:
            raise OmniLoaderError(f"log pattern {name}={rx.pattern!r} has no capture group for the figure")
        compiled[name] = rx
    return compiled


def parse_pattern_args(specs: Iterable[str], defaults: bool = True) -> dict[str, str]:
    """``NAME=REGEX`` strings on top of :data:`DEFAULT_PATTERNS` (a same-named one replaces the default)."""
    patterns = dict(DEFAULT_PATTERNS) if defaults else {}
    for spec in specs:
        name, sep, regex = spec.partition("=")
        if not sep or not name or not regex:
            raise OmniLoaderError(f"--log-pattern {spec!r} is not NAME=REGEX")
        patterns[name.strip()] = regex
    compile_patterns(patterns)
    return patterns


def to_seconds(value: float, unit: str | None) -> float:
    """``value`` in ``unit`` (ms, s, seconds, min, ...) as seconds; no or unknown unit: seconds."""
    if not unit:
        return value
    key = unit.strip()
    factor = _UNITS.get(key, _UNITS.get(key.lower()))
    return value if factor in (None, 1.0) else float(f"{value * factor:.12g}")  # 0.434 ms -> 0.000434


def extract_figures(text: str, patterns: Mapping[str, str | re.Pattern[str]]) -> list[tuple[str, float]]:
    """Every figure the patterns find in ``text``, as ``(name, seconds)``, in pattern order; where a pattern matches
    lines of several stages, each is named by its stage (``NAME@stage-2``), repeats ``NAME#2``."""
    return _extract(io.StringIO(text), patterns)


LINE_CHUNK = 1 << 20  # characters read at a time from a log file: a line longer than this is read in pieces


def extract_figures_from_file(path: str | os.PathLike[str],
                              patterns: Mapping[str, str | re.Pattern[str]]) -> list[tuple[str, float]]:
    """:func:`extract_figures` of a log file read a line at a time, so a huge log never costs its size in memory."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return _extract(fh, patterns)


def _extract(fh: IO[str], patterns: Mapping[str, str | re.Pattern[str]]) -> list[tuple[str, float]]:
    """The figures of ``fh``'s lines, keyed by stage where one pattern's matches span several."""
    compiled = compile_patterns(patterns)
    found: dict[str, list[tuple[str | None, float]]] = {name: [] for name in compiled}
    while line := fh.readline(LINE_CHUNK):
        for name, rx in compiled.items():
            if values := _matches(rx, line):
                lane = figure_lane(line)
                found[name] += [(lane, value) for value in values]
    out: list[tuple[str, float]] = []
    for name, hits in found.items():
        keyed = len({lane for lane, _ in hits}) > 1
        seen: dict[str, int] = {}
        for lane, value in hits:
            key = f"{name}@{lane}" if keyed and lane else name
            seen[key] = seen.get(key, 0) + 1
            out.append((key if seen[key] == 1 else f"{key}#{seen[key]}", value))
    return out


def _matches(rx: re.Pattern[str], text: str) -> list[float]:
    """The seconds of every match of ``rx`` in ``text``, in order."""
    out: list[float] = []
    group: int | str = "value" if "value" in rx.groupindex else 1
    for m in rx.finditer(text):
        try:
            value = float(m.group(group))
        except (TypeError, ValueError):  # the group took no part (None), or holds no number
            continue
        out.append(to_seconds(value, unit_of(m, group)))
    return out


def unit_of(m: re.Match[str], group: int | str) -> str | None:
    """The unit of the figure in ``m``'s ``group``: the pattern's ``unit`` group where it has one, else a known
    unit written right after the figure (``0.4 ms``, not ``0.4 ms2``); None: seconds."""
    if "unit" in m.re.groupindex and m.group("unit"):
        return m.group("unit")
    after = _UNIT_AFTER.match(m.string, m.end(group))
    return after.group(1) if after else None


# What the timeline reads from vLLM and vLLM-Omni startup logs: tags, timestamps, and markers.

MARKER_KINDS = ("took", "until", "event")
TOKEN2WAV = re.compile(r"code2wav|token2wav", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_TAGS = r"(?:\((?P<process>[^()]*?)\s*pid=(?P<pid>\d+)\)\s*)?(?:\[Stage-(?P<stage>\d+)\]\s*)?"
_STAMP = (r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)"
          r"(?:\s+\[[^\]]*\])?\s?")
HEADER = re.compile(_TAGS + f"(?:{_STAMP})?")  # at the start of a line: tags, a timestamp, or both
STAMPED = re.compile(_TAGS + _STAMP)  # after a prefix (a container runtime's): the timestamp is required
PID = re.compile(r"pid=(\d+)\)")
PROCESS_STAGE = re.compile(r"stage_?(\d+)", re.IGNORECASE)
PROCESS_REPLICA = re.compile(r"(?:replica_?|_DP)(\d+)")
SERVE_AB_HEADER = re.compile(r"# omni-loader serve-ab: run (?P<run>\d+), (?P<variant>[\w-]+)(?P<warmup>, warm-up)?")


def line_tags(head: re.Match[str] | None) -> tuple[str | None, int, str, int | None]:
    """(stage, replica, process, pid) of a line's :data:`HEADER` match: ``stage-N`` from its stage tag, else
    from the stage its process tag names (``StageEngineCoreProc_stage0_replica1``), else None."""
    process, pid, stage = ((head["process"] or "").strip(), head["pid"], head["stage"]) if head else ("", None, None)
    if stage is None and process and (m := PROCESS_STAGE.search(process)):
        stage = m.group(1)
    m = PROCESS_REPLICA.search(process) if process and stage is not None else None
    return (f"stage-{int(stage)}" if stage is not None else None), int(m.group(1)) if m else 0, process, \
        int(pid) if pid else None


def lane_name(stage: str, replica: int) -> str:
    """A lane's name: its stage (or process), ``/replicaR`` after it for a replica other than 0."""
    return stage if not replica else f"{stage}/replica{replica}"


def figure_lane(line: str) -> str | None:
    """Whose figure a log line holds: ``stage-2``, ``stage-0/replica1``, the process tag, or None (untagged)."""
    stage, replica, process, _ = line_tags(HEADER.match(ANSI.sub("", line)))
    return lane_name(stage, replica) if stage else process or None


def literal_part(pattern: str) -> str | None:
    """The longest literal text (3 characters or more, outside groups) every match of ``pattern`` contains, else
    None (then the pattern is tried on every line)."""
    if re.compile(pattern).flags & re.IGNORECASE:
        return None
    runs, run, depth, i = [], [], 0, 0
    while i < len(pattern):
        c, nxt = pattern[i], pattern[i + 1:i + 2]
        if c == "\\" and depth == 0 and nxt and not nxt.isalnum():
            run.append(nxt)
            i += 2
            continue
        if c == "\\":  # \d, \s, \b... (or anything inside a group): not literal
            i += 2
        elif c == "[":  # a class: skip it
            i += 2 if nxt == "^" else 1
            i += 1 if pattern[i:i + 1] == "]" else 0
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
        elif c in "()":
            depth += 1 if c == "(" else -1
            i += 1
        elif depth:
            i += 1
            continue
        elif c == "|":
            return None
        elif c in "*+?{":  # a quantifier: the character before it may be absent (or repeated)
            if c != "+" and run:
                run.pop()
            i = pattern.index("}", i) + 1 if c == "{" and "}" in pattern[i:] else i + 1
        elif c not in ".^$":
            run.append(c)
            i += 1
            continue
        else:
            i += 1
        runs.append("".join(run))
        run = []
    best = max(runs + ["".join(run)], key=len)
    return best if len(best) >= 3 else None


@dataclass(frozen=True)
class Marker:
    """One thing a startup log says: ``name`` (a phase or event), ``pattern``, ``kind`` (see the module).

    ``level``: how deep the phase nests (-1: a span over the whole startup); ``scope`` ``server``: the API
    server's work; ``ready`` ``server`` or ``stage``: the line says that one is ready.
    """

    name: str
    pattern: str
    kind: str = "took"
    after: tuple[str, ...] = ()
    level: int = 0
    scope: str = "stage"
    ready: str = ""

    def __post_init__(self) -> None:
        what = f"timeline pattern {self.name}={self.pattern!r}"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", self.name) or self.kind not in MARKER_KINDS:
            raise OmniLoaderError(f"{what}: the name must be letters, digits, '_', '.' or '-' and the kind one of "
                                  f"{', '.join(MARKER_KINDS)}")
        try:
            rx = re.compile(self.pattern)
        except re.error as exc:
            raise OmniLoaderError(f"{what} is not a valid regular expression ({exc})") from None
        if self.kind == "took" and not rx.groups:
            raise OmniLoaderError(f"{what} has no group for the seconds")
        object.__setattr__(self, "regex", rx)
        object.__setattr__(self, "keyword", literal_part(self.pattern))


_S = r"(?P<seconds>[0-9]+(?:\.[0-9]+)?) ?(?P<unit>ms|seconds|secs|sec|s)\b"
DEFAULT_MARKERS: tuple[Marker, ...] = (
    Marker("weight_loading", r"Loading weights took " + _S, level=1),
    Marker("token2wav_weight_loading", r"Token2Wav load_weights took " + _S, level=2),
    Marker("model_loading", r"Model loading took (?P<value>[0-9.]+) ?GiB(?: memory)? and " + _S),
    Marker("torch_compile", r"torch\.compile (?:takes|took) " + _S + " in total", level=1),
    Marker("dynamo_transform", r"Dynamo bytecode transform time: " + _S, level=2),
    Marker("graph_capture", r"Graph capturing finished in " + _S + r",? took (?P<value>[0-9.]+) ?GiB", level=1),
    Marker("init_engine", r"init engine \([^)]*\) took " + _S),
    Marker("kv_cache_memory", r"Available KV cache memory: (?P<value>[0-9.]+) ?GiB", "event"),
    Marker("weights_format", r"Using model weights format (?P<detail>.+)", "event"),
    Marker("model_loaded", r"\[Model Loaded\] name=(?P<detail>[^,]*), success=True, size=(?P<value>[0-9.]+) ?MB",
           "until", after=("weights_format",)),
    Marker("stage_ready", r"Stage-(?P<stage>\d+) reported ready", "event", ready="stage"),
    Marker("all_stages_ready", r"All stages initialized successfully", "event", scope="server"),
    Marker("api_server_start", r"Starting vLLM API server", "event", scope="server"),
    Marker("chat_template_warmup", r"Chat template warmup completed in " + _S, scope="server"),
    Marker("application_ready", r"Application startup complete\.", "event", scope="server", ready="server"),
    Marker("omni_server_startup", r"OmniServer startup took " + _S, level=-1, scope="server"),
)


def parse_marker_args(specs: Iterable[str], markers: Sequence[Marker] = DEFAULT_MARKERS) -> tuple[Marker, ...]:
    """``NAME=REGEX`` strings on top of ``markers``: a ``took`` phase with a group, else an ``event``."""
    out = {m.name: m for m in markers}
    for spec in specs:
        name, sep, regex = spec.partition("=")
        if not sep or not name.strip() or not regex:
            raise OmniLoaderError(f"--pattern {spec!r} is not NAME=REGEX")
        try:
            kind = "took" if re.compile(regex).groups else "event"
        except re.error:
            kind = "took"  # Marker says what is wrong with it
        out[name.strip()] = Marker(name.strip(), regex, kind)
    return tuple(out.values())


MAX_LINE = 1 << 20  # characters of a log line read by the timeline; the rest of a longer line is dropped (and said)


class LogClock:
    """``MM-DD HH:MM:SS`` strings as seconds from the first one (the year rolls over at a backwards jump of months)."""

    def __init__(self) -> None:
        self.year, self.cache, self.t0, self.last = 2000, {}, None, 0.0  # 2000: a leap year, so 02-29 parses

    def __call__(self, stamp: str) -> float:
        """Seconds from the first stamp; a stamp that is no date and time (``02-30``, ``25:00:00``) is one line."""
        rel = self.cache.get(stamp)
        if rel is None:
            day, _, fraction = stamp.partition(".")  # strptime takes 6 digits of a fraction; a log may print more
            try:
                when = dt.datetime.strptime(f"{self.year}-{day}" + (f".{fraction[:6]}" if fraction else ""),
                                            "%Y-%m-%d %H:%M:%S.%f" if fraction else "%Y-%m-%d %H:%M:%S")
            except ValueError:
                raise OmniLoaderError(f"timestamp {stamp[:40]!r} is not a date and time (month-day hour:minute:second)") \
                    from None
            when = when.replace(tzinfo=dt.timezone.utc).timestamp()
            self.t0 = when if self.t0 is None else self.t0
            if when - self.t0 < self.last - 30 * 86400:  # December to January
                self.year += 1
                self.cache.clear()
                return self(stamp)
            rel = self.cache[stamp] = when - self.t0
        self.last = max(self.last, rel)
        return rel


def line_blocks(fh: IO[str], size: int, max_line: int, cut: list[int]) -> Iterator[str]:
    """Text in blocks of whole lines (about ``size`` characters each); a line longer than ``max_line`` is cut there,
    the rest dropped unread and its number appended to ``cut``, so memory stays bounded."""
    rest, skipping, lines = "", False, 0
    while block := fh.read(size):
        if skipping:  # inside a line already cut: drop up to its end
            at = block.find("\n")
            if at < 0:
                continue
            block, skipping = block[at:], False
        block = rest + block
        end = block.rfind("\n") + 1
        rest = block[end:]
        if len(rest) > max_line:
            skipping, rest = True, rest[:max_line]
            cut.append(lines + block.count("\n", 0, end) + 1)
        if end:
            lines += block.count("\n", 0, end)
            yield block[:end]
    if rest:
        yield rest + "\n"
