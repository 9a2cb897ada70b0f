"""The differential flamegraph of a :class:`~omni_loader.profiling.diff.ProfileDiff`: both variants' trees merged.

A call path's time in a variant is its median over that variant's sampled runs (0 where a run never reached
it); a frame's width is the larger of its two medians (children scaled down where they would overflow their
caller, since medians do not add) and its colour its function's verdict in ``functions.csv`` (Okabe-Ito hues:
blue B faster, orange slower, grey no claim, pale untested). Drawn by
:func:`~omni_loader.profiling.flamegraph.svg_body`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OmniLoaderError
from ..formatting import short_duration, span
from . import flamegraph
from .diff_words import equals
from .flamegraph import IMPORT, Flame, Node

ProfileDiff = Any  # omni_loader.profiling.diff.ProfileDiff (which imports this module; not the other way round)

COLOURS = {"faster": "#56B4E9", "slower": "#E69F00", "no difference claimed": "#cfcfcf", "untested": "#ececec"}
UNIT = 1e6  # a node's "samples" are microseconds of the larger median: svg_body draws widths from them


def path_medians(diff: ProfileDiff) -> dict[tuple[tuple[str, str], ...], dict[str, float]]:
    """Per call path (``(name, file)`` from the entry down): the median seconds of each variant over its runs."""
    runs = diff.measured()
    runs = runs[runs["sampled"] & runs["variant"].isin([diff.a, diff.b])]  # not the A/A arms of --aa
    per_run: dict[str, list[dict[tuple[tuple[str, str], ...], float]]] = {diff.a: [], diff.b: []}
    for _, r in runs.iterrows():
        times: dict[tuple[tuple[str, str], ...], float] = {}
        stacks, _ = flamegraph.load_stacks(diff.directory / r["speedscope"])
        for path, weight in stacks:
            for i in range(1, len(path) + 1):
                times[tuple(path[:i])] = times.get(tuple(path[:i]), 0.0) + weight
        per_run[r["variant"]].append(times)
    paths = {p for times in (*per_run[diff.a], *per_run[diff.b]) for p in times}
    return {p: {v: float(np.median([t.get(p, 0.0) for t in per_run[v]])) if per_run[v] else 0.0
                for v in (diff.a, diff.b)} for p in paths}


def build(diff: ProfileDiff) -> tuple[Flame, dict[int, dict[str, Any]]]:
    """The merged tree and, per node (by ``id``), what its frame says: medians, the function's row."""
    from .sources import short_path

    medians = path_medians(diff)
    rows = {(r["function"], r["file"]): r for _, r in diff.functions.iterrows()}
    info: dict[int, dict[str, Any]] = {}
    paths = sorted(medians, key=len)  # the entry's own path first: the root
    if not paths:
        raise OmniLoaderError(f"no sampled load under {flamegraph.ENTRY}() in {diff.directory}")
    root = Node(*paths[0][0])
    for path in paths:
        node = root
        for n, f in path[1:]:
            node = node.child(n, f)
        name, file = path[-1]
        m = medians[path]
        node.samples = round(max(m.values()) * UNIT)
        node.seconds = max(m.values())
        info[id(node)] = {"medians": m, "row": rows.get((name, short_path(file) if file else ""))}
    _fit(root)
    claimed = len(diff.claimed)
    flame = Flame(root=root, samples_total=0, samples_kept=0,
                  title=f"{diff.a} (A) against {diff.b} (B): differential flamegraph",
                  caption=(f"width: the larger median of the two; colour: blue B faster, orange B slower, grey no "
                           f"difference claimed ({claimed} function{'' if claimed == 1 else 's'} claimed at a "
                           f"{diff.settings.get('fdr', 0.05):.0%} FDR)"))
    return flame, info


def _fit(node: Node) -> None:
    """Scale children down where their widths add up past their caller's (medians do not add)."""
    total = sum(c.samples for c in node.children.values())
    if total > node.samples and total:
        for c in node.children.values():
            _scale(c, node.samples / total)
    for c in node.children.values():
        _fit(c)


def _scale(node: Node, factor: float) -> None:
    node.samples = int(node.samples * factor)
    for c in node.children.values():
        _scale(c, factor)


def drawing(diff: ProfileDiff, info: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """:func:`~omni_loader.profiling.flamegraph.svg_body`'s ``colour``, ``tip`` and ``hint`` for the merged tree."""

    def colour(node: Node) -> str:
        row = info.get(id(node), {}).get("row")
        if row is None or not row["tested"]:
            return COLOURS["untested"]
        return COLOURS[row["verdict"]]

    def tip(node: Node) -> str:
        data = info.get(id(node), {})
        m, row = data.get("medians", {}), data.get("row")
        where = "modules imported during the load" if node.name == IMPORT else (row["file"] if row is not None else "")
        text = (f"{node.name} ({where}): on this path A {short_duration(m.get(diff.a))}, "
                f"B {short_duration(m.get(diff.b))} (medians)")
        if row is None or not row["tested"]:
            return text + "; function too rarely sampled to test"
        return (text + f"; the function, all paths: B − A {short_duration(row['delta_s'])}, 95% interval "
                f"{span(short_duration(row['ci_low']), short_duration(row['ci_high']))}, q {equals(row['q'])}"
                + ("" if np.isnan(row.get("aa_floor_s", np.nan)) else f", A/A floor {short_duration(row['aa_floor_s'])}")
                + f": {row['verdict']}")

    return {"colour": colour, "tip": tip,
            "hint": "Hover a frame for both medians, the interval and the verdict; click to zoom, the top frame to zoom out."}


def write_svg(diff: ProfileDiff, path: str | os.PathLike[str]) -> Path:
    """Write ``flame-diff.svg`` (standalone; its script runs when a browser opens it)."""
    flame, info = build(diff)
    return flamegraph.svg(flame, path, **drawing(diff, info))


class DiffFlameView(flamegraph.FlameView):
    """The differential flamegraph inline in a notebook (HTML: the SVG, its script, links to ``files``)."""

    FILES_NOTE = ""

    def __init__(self, diff: ProfileDiff, link_from: str | os.PathLike[str] | None = None,
                 files: tuple[str, ...] = ()) -> None:
        flame, info = build(diff)
        super().__init__(flame, link_from, {name: diff.directory / name for name in files}, **drawing(diff, info))

    def __repr__(self) -> str:
        return f"<differential flamegraph: {self.flame.title}; {self.flame.note()}>"
