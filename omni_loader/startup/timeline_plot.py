"""The Gantt chart of a startup timeline: one lane per stage, each phase the same colour in every lane.

Reported phases are solid, inferred ones hatched, nested ones thinner inside their parent, a whole-startup span a
pale band, events ticks. The Token2Wav stage's weight loading is outlined and annotated, so the phase the PR
changed is found at a glance.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..names import LEAF_PHASES, OUTER_LOAD_WEIGHTS_CHILDREN, VARIANTS, WEIGHT_LOADING_CHILDREN
from ..reporting.figures import ShownFigure, write_figure
from .timeline import Timeline
from .timeline_scan import RESOLUTION

# The default markers' phases, coloured alike in every lane and every chart; other names get a stable colour.
PHASE_COLOURS = {
    "model_loading": "#4c72b0", "weight_loading": "#dd8452", "model_loaded": "#dd8452", "init_engine": "#55a868",
    "token2wav_weight_loading": "#c44e52",
    "torch_compile": "#8172b3", "dynamo_transform": "#937860", "graph_capture": "#da8bc3",
    "chat_template_warmup": "#8c8c8c", "omni_server_startup": "#ccb974", "imports_and_snapshot": "#64b5cd",
}
HEIGHTS = {-1: 0.9, 0: 0.62, 1: 0.4, 2: 0.22}
LEGEND_FONT = 10  # as large as the lane names'; 8 pt was unreadable in a notebook
TOP = -1.5  # the y axis's top: the band above the first lane (-0.45) holds the ready label and the Token2Wav note
# The startup phases in words. Before the kit's LABELS: a timeline's weight_loading is any stage's, not the PR's row.
PHASE_WORDS = {
    "weight_loading": "weight loading", "token2wav_weight_loading": "Token2Wav weight loading",
    "model_loading": "model loading", "model_loaded": "up to [Model Loaded]", "init_engine": "init engine",
    "imports_and_snapshot": "imports and snapshot", "torch_compile": "torch.compile",
    "dynamo_transform": "Dynamo bytecode transform", "graph_capture": "graph capture",
    "chat_template_warmup": "chat template warm-up", "omni_server_startup": "OmniServer startup",
}


def phase_words(phase: str) -> str:
    """``phase`` as a person reads it: :data:`PHASE_WORDS`, else the kit's LABELS, else its name without underscores."""
    from ..reporting.measurements import LABELS

    name, sep, repeat = phase.partition("#")  # a phase seen twice on one lane is phase#2
    words = PHASE_WORDS.get(name) or LABELS.get(name) or name.replace("_", " ")
    return f"{words} ({repeat})" if sep else words


# What the annotation points at: the PR's row where the log has it, else the regions around it, innermost first.
TOKEN2WAV_PHASES = ("token2wav_weight_loading", "weight_loading", "model_loaded", "model_loading")


# A timeline phase of the Token2Wav stage -> the load's phases it encloses. Any other phase or stage runs none of
# the loader's steps: a difference there is the machine's, not the change's.
ENCLOSED: dict[str, tuple[str, ...]] = {
    "token2wav_weight_loading": WEIGHT_LOADING_CHILDREN,  # Token2Wav's load_weights: the PR's row
    "weight_loading": OUTER_LOAD_WEIGHTS_CHILDREN,  # vLLM's "Loading weights took": the outer load_weights
    "model_loading": LEAF_PHASES,  # "Model loading took": construction through post-load
    # "[Model Loaded]", inferred from the weights format line (read_checkpoint starts) to its own
    "model_loaded": OUTER_LOAD_WEIGHTS_CHILDREN[:OUTER_LOAD_WEIGHTS_CHILDREN.index("model_loaded_size") + 1],
}


def changed_load_phases() -> tuple[str, ...]:
    """The load's phases whose step differs between the two variants (the PR's pair: buffer discovery)."""
    from ..reporting.controls import changed_phases

    return changed_phases(*VARIANTS[:2])


def holds_change(lane: str, phase: str, token2wav_lanes: Iterable[str], changed: Iterable[str]) -> bool:
    """Whether ``phase`` of a Token2Wav ``lane`` is one of :data:`ENCLOSED`'s regions that holds a ``changed`` phase."""
    return lane in set(token2wav_lanes) and bool(set(ENCLOSED.get(phase.partition("#")[0], ())) & set(changed))


def phase_colour(phase: str) -> str:
    """The colour of ``phase`` in every chart: the fixed one of a default phase, else one of tab20 by its name."""
    if phase in PHASE_COLOURS:
        return PHASE_COLOURS[phase]
    from matplotlib import colormaps

    r, g, b, _ = colormaps["tab20"](zlib.crc32(phase.encode()) % 20)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def gantt(timeline: Timeline, *, title: str | None = None, min_gap: float = 1.0) -> ShownFigure:
    """The chart of ``timeline``: lanes top to bottom as :meth:`Timeline.lane_names` orders them."""
    lanes = [n for n in timeline.lane_names() if any(r.lane == n for r in timeline.records)]
    y = {name: i for i, name in enumerate(lanes)}
    path = timeline.critical_path(min_gap)
    fig = ShownFigure(figsize=(11, 1.6 + 0.75 * max(len(lanes), 1)))  # 0.4 in of it the Token2Wav note's
    ax = fig.add_subplot()
    labelled: set[str] = set()
    phases = sorted(timeline.phases(), key=lambda r: (r.level, r.start))  # outer ones first, nested on top
    for r in phases:
        colour = phase_colour(r.phase)
        label = phase_words(r.phase) if r.phase not in labelled else "_" + phase_words(r.phase)
        labelled.add(r.phase)
        pale = r.level < 0
        ax.barh(y[r.lane], max(r.seconds, 0.05), left=r.start, height=HEIGHTS.get(r.level, 0.2), color=colour,
                alpha=0.25 if pale else 0.95, edgecolor="white" if not pale else colour, linewidth=0.6,
                hatch="//" if r.source == "inferred" else None, label=label, zorder=1 + max(r.level, 0))
    for r in timeline.records:
        if r.kind == "event" and r.lane in y:
            ax.plot([r.end], [y[r.lane]], marker="v" if r.ready else "|", markersize=9, color="black",
                    linestyle="none", label="_" + r.phase, zorder=5)
    for i, gap in enumerate(g for g in timeline.gaps(min_gap) if g.lane in y):  # every lane's, drawn alike
        ax.plot([gap.start, gap.end], [y[gap.lane] + 0.38] * 2, color="#c44e52", linewidth=2,
                label="unexplained gap" if i == 0 else "_gap", zorder=4)
    # from the log's first line (0 s); a phase reported to begin under a second before it is the clock's resolution
    left = min([0.0] + [r.start for r in timeline.records if r.start < -RESOLUTION])
    right = max([r.end for r in timeline.records] + ([path.ready_at] if path is not None else []) + [left + 1.0])
    ax.set_xlim(left, right + 0.04 * (right - left))
    if path is not None:  # the label left of the line, in the band above the lanes, inside the frame
        ax.axvline(path.ready_at, color="black", linestyle="--", linewidth=1, label="_ready", zorder=6)
        ax.text(path.ready_at, -0.55, f"ready {path.ready_at:.1f} s ", va="bottom", ha="right", fontsize=8,
                bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none"}, zorder=7)
    _annotate_token2wav(ax, timeline, y)
    ax.set_yticks(range(len(lanes)))
    gating = path.gating if path is not None else None
    t2w = set(timeline.token2wav_lanes())
    ax.set_yticklabels([n + (" Token2Wav" if n in t2w else "") + (" (gated ready)" if n == gating else "")
                        for n in lanes])
    for tick in ax.get_yticklabels():
        tick.set_fontweight("bold" if tick.get_text().endswith("(gated ready)") else "normal")
    ax.set_ylim(len(lanes) - 0.4, TOP)
    ax.set_xlabel("seconds from the log's first timestamp")
    ax.set_title(title or _title(timeline, path))
    ax.grid(axis="x", alpha=0.3)
    # under the x-axis label by a distance in font sizes, not in axes fractions: one lane's axes are short
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=3.6, ncol=4, fontsize=LEGEND_FONT,
              frameon=False)
    fig.tight_layout()
    return fig


def _annotate_token2wav(ax: Any, timeline: Timeline, y: dict[str, int]) -> None:
    """Outline and name the Token2Wav stage's weight loading (else its ``[Model Loaded]`` or model loading phase)."""
    record = next((found[0] for name in timeline.token2wav_lanes() for phase in TOKEN2WAV_PHASES
                   if (found := timeline.find(phase, name))), None)
    if record is None or record.lane not in y:
        return
    what = "weight loading" if record.phase != "model_loading" else "model loading"
    ax.barh(y[record.lane], max(record.seconds, 0.05), left=record.start, height=HEIGHTS.get(record.level, 0.2) + 0.1,
            fill=False, edgecolor="#c44e52", linewidth=2.2, label="_token2wav", zorder=7)
    # the note sits in the band above the lanes, so it covers no bar; it runs away from the nearer frame edge
    x, (left, right) = record.start + record.seconds / 2, ax.get_xlim()
    ax.annotate(f"Token2Wav {what} {record.seconds:.2f} s ({record.source})",
                xy=(x, y[record.lane]), xytext=(x, (TOP - 0.55) / 2 - 0.1), textcoords="data",
                ha="left" if x < (left + right) / 2 else "right", va="center", fontsize=9, fontweight="bold",
                color="#c44e52", zorder=8,
                arrowprops={"arrowstyle": "->", "color": "#c44e52"},
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#c44e52"})


def _title(timeline: Timeline, path: Any) -> str:
    name = Path(timeline.log).name if timeline.log else "startup log"
    meta = timeline.meta
    if meta:  # named as the bar named it: run ids count from 0, the bar from 1
        name = f"run {meta['run'] + 1}, {meta['variant']}{' (warm-up)' if meta.get('warmup') else ''}; log {name}"
    return f"Where startup goes: {name}" + (f"\n{path_words(path)}" if path is not None else "")


def path_words(path: Any) -> str:
    """The critical path's sentence with its ready marker in words: "(application ready)", not "(application_ready)"."""
    return path.sentence().replace(f"({path.ready_marker})", f"({phase_words(path.ready_marker)})", 1)


def write_gantt(timeline: Timeline, directory: str | Path, stem: str = "timeline", **options: Any) -> list[Path]:
    """``<stem>.png``, ``<stem>.svg`` and ``<stem>.csv`` (the values drawn) of :func:`gantt` under ``directory``."""
    return write_figure(gantt(timeline, **options), directory, stem)
