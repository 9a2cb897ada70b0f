"""What a saved results directory measured: its comparisons in the PR's order, their labels and units.

``report.md`` and ``omni-loader compare`` take the same rows from here, so they state the same statistics.
Nothing imports torch.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..formatting import time_unit
from ..names import DATA_DIR, PHASE_LABELS
from ..results.suite import Suite
from .stats import ALPHA, Comparison, NoiseFloor, compare, measured, noise_floor, phase_summary, run_summary

REFERENCE_FILE = DATA_DIR / "reference" / "pr7061.json"

PR_ROWS = ("state_dict_calls", "buffer_discovery", "weight_loading", "startup_to_health")
# The PR's rows first, in its order; then every other phase of the load, and where a schema-1 directory ran it,
# its materialise_weights (split buffers and load parameters in one).
_WORDS = {"state_dict_calls": "Calls to state_dict()", "startup_to_health": "Startup to /health",
          "materialise_weights": "Materialise weights and split buffers", **PHASE_LABELS}
_ORDER = [*PHASE_LABELS]
_ORDER.insert(_ORDER.index("load_parameters"), "materialise_weights")
LABELS = {p: _WORDS[p] for p in dict.fromkeys((*PR_ROWS, *_ORDER))}
# Timed after the load, outside "total": not an A/B row, but the yardstick a phase is held against.
YARDSTICKS = {"reference_copy": "load_parameters"}
PR_PAIR = ("baseline", "optimized")  # what a schema-1 benchmark ran, and what the PR's rows compare


def load_reference() -> dict[str, Any]:
    """The PR's published figures (``data/reference/pr7061.json``)."""
    return json.loads(REFERENCE_FILE.read_text())


def planned_arms(suite: Suite) -> list[str]:
    """The variants a benchmark planned (schema 1: the PR's two), then the A/A arms if it had them."""
    spec = suite.spec
    arms = list(spec.get("variants") or PR_PAIR)
    return arms + (["aa-1", "aa-2"] if spec.get("aa") else [])


def comparisons(frame, alpha: float = ALPHA) -> list[Comparison]:
    """One comparison per measurement present in the rows: the PR's rows first, then every other
    loader phase, then the figures read from server logs (``server:NAME``); each tested at ``alpha``
    (a sequential design's: :func:`~omni_loader.reporting.sequential.design_alpha`)."""
    calls = compare(run_summary(frame, "baseline", "state_dict_calls"),
                    run_summary(frame, "optimized", "state_dict_calls"), unit="calls", alpha=alpha)
    ok = measured(frame)
    load = list(dict.fromkeys(ok[ok["source"] == "load"]["phase"]))
    server = list(dict.fromkeys(ok[ok["source"] == "server"]["phase"]))
    timed = [compare(phase_summary(frame, "baseline", phase), phase_summary(frame, "optimized", phase), alpha=alpha)
             for phase in [p for p in LABELS if p in load and p not in YARDSTICKS] + [p for p in load if p not in LABELS]]
    for phase in server:
        c = compare(phase_summary(frame, "baseline", phase, "server"), phase_summary(frame, "optimized", phase, "server"),
                    alpha=alpha)
        timed.append(replace(c, phase=phase if phase == "startup_to_health" else f"server:{phase}"))
    rank = {p: i for i, p in enumerate(PR_ROWS)}
    timed.sort(key=lambda c: (rank.get(c.phase, len(rank)), c.phase.startswith("server:")))
    return [c for c in [calls, *timed] if c.baseline.n and c.optimized.n]


def noise_floors(frame) -> dict[str, NoiseFloor]:
    """The A/A floor of every phase the A/A benchmark timed (empty without ``--aa``)."""
    aa = measured(frame)
    phases = dict.fromkeys(aa[aa["source"] == "aa"]["phase"])
    return {p: f for p in phases if (f := noise_floor(frame, p)) is not None}


def label(phase: str) -> str:
    """A row's name for a reader: ``buffer_discovery`` -> 'Buffer discovery'."""
    if phase.startswith("server:"):
        return f"Server log: {phase.split(':', 1)[1]}"
    return LABELS.get(phase, phase)


def phase_unit(phase: str, seconds: float) -> str:
    """The time unit of a phase's row: startup in seconds, as the PR quotes it; else by ``time_unit``."""
    return "s" if phase == "startup_to_health" else time_unit(seconds)


def row_unit(c: Comparison) -> str:
    """The time unit of a comparison's row, chosen from its baseline median."""
    return phase_unit(c.phase, c.baseline.median)
