"""``omni-loader timeline LOG...``: where a vLLM / vLLM-Omni startup's seconds go, stage by stage.

Reads each log (plain, ANSI-coloured, or a serve-ab run log) with :mod:`omni_loader.startup.timeline`;
prints its records, the critical path to ready and the unexplained gaps (``--json``: all of it as
JSON); ``--out DIR`` also writes ``timeline.csv`` (every log's records), ``timeline.json`` and the
Gantt chart ``gantt.png`` / ``gantt.svg`` (:mod:`omni_loader.startup.timeline_plot`). A file without a startup marker is one line, exit 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

from ..startup.timeline import ROW_FIELDS, Timeline, read_timelines
from ..startup.logfigures import parse_marker_args
from .options import seconds_at_least_zero


def render(timeline: Timeline, min_gap: float) -> list[str]:
    """The text output of one log: its records, the critical path, the gaps."""
    with_records = timeline.by_lane()  # one pass over the records, not one per lane
    lanes = [n for n in timeline.lane_names() if n in with_records]
    t2w = timeline.token2wav_lanes()
    out = [f"{timeline.log}: {timeline.lines} lines, {len(timeline.records)} records; lanes {', '.join(lanes)}"
           + (f"; Token2Wav stage {', '.join(t2w)}" if t2w else "")]
    out.append(f"  {'lane':<18} {'phase':<22} {'start':>8} {'end':>8} {'seconds':>9}  {'source':<9} line")
    place = {name: i for i, name in enumerate(lanes)}
    for r in sorted(timeline.records, key=lambda r: (place.get(r.lane, len(lanes)), r.start)):
        seconds = f"{r.seconds:9.3f}" if r.kind == "phase" else f"{'event':>9}"
        extra = f"  {r.value:g}" if r.value is not None else ""
        out.append(f"  {r.lane:<18} {r.phase:<22} {r.start:8.1f} {r.end:8.1f} {seconds}  {r.source:<9} "
                   f"{r.line}{extra}{'  ' + r.detail if r.detail else ''}")
    path = timeline.critical_path(min_gap)
    if path is not None:
        out.append(f"  critical path: {path.sentence()}")
        out += [f"    {s.lane:<16} {s.phase:<22} {s.start:8.1f} -> {s.end:8.1f}  {s.seconds:8.1f} s"
                + (f"  ({s.source})" if s.source else "") for s in path.segments]
    gaps = timeline.gaps(min_gap)
    out.append("  unexplained gaps: " + ("; ".join(f"{g.lane} {g.start:.1f}-{g.end:.1f} s ({g.seconds:.1f} s)"
                                                     for g in gaps) if gaps else f"none over {min_gap:g} s"))
    return out


def write_outputs(timelines: list[Timeline], out: str | Path, min_gap: float) -> list[Path]:
    """``timeline.csv``, ``timeline.json`` and one chart per log (``gantt.png``, ``.svg`` and the ``.csv`` of its
    values; ``gantt-1-<log>.png``... for several logs)."""
    from ..reporting.figures import figure_files
    from ..safe_files import ensure_dir, open_file, refuse_links, write_text
    from ..startup.timeline_plot import write_gantt

    out = ensure_dir(out)  # a linked folder is refused, never written into
    stems = ["gantt" if len(timelines) == 1 else f"gantt-{i}-{Path(t.log).stem}" for i, t in enumerate(timelines, 1)]
    refuse_links(out, ["timeline.csv", "timeline.json", *(name for stem in stems for name in figure_files(stem))])
    table = out / "timeline.csv"
    with open_file(table, "w", newline="") as fh:  # never through a link (omni_loader.safe_files)
        writer = csv.DictWriter(fh, fieldnames=ROW_FIELDS)
        writer.writeheader()
        for timeline in timelines:
            writer.writerows({k: ("" if v is None else v) for k, v in row.items()} for row in timeline.rows())
    document = out / "timeline.json"
    write_text(document, json.dumps({"timelines": [t.to_dict(min_gap) for t in timelines]}, indent=1, allow_nan=False) + "\n")
    written = [table, document]
    for stem, timeline in zip(stems, timelines):
        written += write_gantt(timeline, out, stem, min_gap=min_gap)
    return written


def cmd_timeline(args: argparse.Namespace) -> int:
    markers = parse_marker_args(args.pattern)
    timelines = read_timelines(args.logs, markers)
    if args.json:
        print(json.dumps({"timelines": [t.to_dict(args.min_gap) for t in timelines]}, indent=1, allow_nan=False))
    else:
        for timeline in timelines:
            print("\n".join(render(timeline, args.min_gap)))
    if args.out:
        written = write_outputs(timelines, args.out, args.min_gap)
        print(f"timeline: wrote {', '.join(p.name for p in written)} to {args.out}",
              file=sys.stderr if args.json else sys.stdout)
    return 0


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "timeline",
        help="a per-stage timeline of vLLM / vLLM-Omni startup logs: phases, critical path, gaps, Gantt chart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="startup log(s): vllm serve output, or serve-ab's logs/*.log")
    p.add_argument("--json", action="store_true", help="print the records, critical path and gaps as JSON")
    p.add_argument("--out", metavar="DIR", help="also write timeline.csv, timeline.json and the chart (PNG, SVG)")
    p.add_argument("--pattern", action="append", default=[], metavar="NAME=REGEX",
                   help="another marker (repeatable): with a group, a phase that took that many seconds (unit after "
                        "it); without, an event; a default's name replaces it")
    p.add_argument("--min-gap", type=seconds_at_least_zero("--min-gap"), default=1.0, metavar="S",
                   help="report unexplained gaps longer than S seconds (default 1: the timestamps' resolution)")
    p.set_defaults(func=cmd_timeline)
