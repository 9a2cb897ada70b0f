"""Which timer a published figure is: the kit's phases that vLLM's log line and the PR's row each cover.

vLLM's "Loading weights took" line times the outer ``load_weights`` (``outer_load_weights``) to two decimals;
the PR's finer medians are Token2Wav's own (``weight_loading``). Both statements are derived from the saved
reference and rows. Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from ..formatting import format_seconds, time_unit
from ..names import OUTER_LOAD_WEIGHTS, PHASE_TREE
from .stats import Comparison

VLLM_LINE_DECIMALS = 2  # vLLM's "Loading weights took %.2f seconds"


def finer_than_vllm_line(seconds: float) -> bool:
    """Could ``seconds`` not have been read off vLLM's line (to the hundredth of a second)?"""
    scaled = seconds * 10**VLLM_LINE_DECIMALS
    return abs(scaled - round(scaled)) > 1e-6


def timer_lines(comps: list[Comparison], reference: dict[str, Any]) -> list[str]:
    """Sentences: which region the PR's row timed, and what vLLM's line adds, with this run's medians."""
    mine = {c.phase: c for c in comps}
    ref = next((m for m in reference.get("measurements", []) if m.get("measurement") == "weight_loading"), None)
    lines = []
    if ref:
        pr = (ref["baseline"], ref["optimized"])
        shown = " and ".join(format_seconds(v, time_unit(max(pr))) for v in pr)
        if all(finer_than_vllm_line(v) for v in pr):
            lines.append(f"The PR's \"{ref['label']}\" medians ({shown}) are finer than vLLM's `Loading weights took "
                         f"X seconds` line, which prints {VLLM_LINE_DECIMALS} decimals (a median of five such lines is "
                         "one of them): the row is a timer of its own, around Token2Wav's `load_weights`, the kit's "
                         "`weight_loading`.")
        else:
            lines.append(f"The PR's \"{ref['label']}\" medians ({shown}) could be read off vLLM's `Loading weights "
                         "took` line: which timer the row is cannot be told from its figures.")
    children = " + ".join(f"`{p}`" for p in PHASE_TREE.children(OUTER_LOAD_WEIGHTS))
    outer, inner = mine.get(OUTER_LOAD_WEIGHTS), mine.get("weight_loading")
    region = (f"vLLM's own line times the outer `load_weights` ({children}; the kit's `{OUTER_LOAD_WEIGHTS}`); "
              "construction is before it and the post-load check after it.")
    if outer and inner and outer.baseline.n and inner.baseline.n:
        u = time_unit([outer.baseline.median, outer.optimized.median])
        extra = [outer.baseline.median - inner.baseline.median, outer.optimized.median - inner.optimized.median]
        region += (f" This run: {format_seconds(outer.baseline.median, u)} baseline, "
                   f"{format_seconds(outer.optimized.median, u)} optimized, of which "
                   f"{format_seconds(extra[0], u)} and {format_seconds(extra[1], u)} are outside the PR's row.")
    elif inner:
        region += f" This directory has no `{OUTER_LOAD_WEIGHTS}` rows (made by an older omni-loader)."
    return [*lines, region]
