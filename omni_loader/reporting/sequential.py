"""A sequential design's looks: are the verdicts after ``n`` runs a side settled, and at which error rate
does a saved benchmark's report read its verdicts.

Settled means every headline row of every pair is claimed and no control confounds one (differs by at least
:data:`~omni_loader.reporting.controls.MATERIAL` of an enclosing row). Each look tests at its own share of the
error rate, so stopping adds no false claims; it gives up only power.

Nothing here imports torch: it reads saved rows only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..results.planner import FIXED_ALPHA, look_alpha
from ..names import ENCLOSING
from .controls import MATERIAL, pair_reports
from .measurements import PR_ROWS, label
from ..results.suite import Suite
from .stats import compare, confidence_words, phase_summary

__all__ = ["design_alpha", "design_sentence", "look_at", "settled"]


def _sequential(suite: Suite) -> dict[str, Any]:
    """The load benchmark's ``sequential`` record (looks, alphas, where it stopped); {} for a fixed design."""
    seq = suite.described.get("sequential") or {}
    return seq if isinstance(seq, dict) and seq.get("looks") else {}


def design_alpha(suite: Suite) -> float:
    """The error rate a benchmark's verdicts are read at: 0.05 fixed, else the share of its last look."""
    seq = _sequential(suite)
    if not seq:
        return FIXED_ALPHA
    return look_alpha(seq["looks"], seq.get("stopped_at") or seq["looks"][-1])


def settled(frame, suite: Suite, alpha: float) -> tuple[bool, str]:
    """Whether the verdicts in ``frame`` (measured rows) are settled at ``alpha``, and why (see the module)."""
    open_ = []
    for pair in pair_reports(frame, suite, alpha=alpha):
        headline = list(pair.changed) + [row for row, leaves in ENCLOSING.items()
                                         if row in PR_ROWS and set(leaves) & set(pair.changed)]
        if not headline:
            open_.append(f"{pair.first} and {pair.second} run the same steps: nothing to claim")
        for phase in headline:
            c = compare(phase_summary(frame, pair.first, phase), phase_summary(frame, pair.second, phase), alpha=alpha)
            if not c.differs():
                open_.append(f"{label(phase)} ({pair.second}) not claimed")
        open_ += [f"control {label(c.phase)} ({pair.second}) confounds: it differs by at least {100 * MATERIAL:g}% of "
                  "an enclosing row" for c in pair.confounders]
    if open_:
        return False, "; ".join(open_)
    return True, f"every headline row claimed and no control confounds at α={alpha:g}"


def look_at(out: str | Path, n: int, alpha: float) -> tuple[bool, str]:
    """A running benchmark's look: its rows of the warm-ups and each arm's first ``n`` measured runs."""
    from ..results.integrity import check_results

    check = check_results(out)
    frame = check.frame
    import pandas as pd

    order = pd.to_numeric(frame["order"], errors="coerce")  # empty for warm-ups
    frame = frame[(frame["source"] == "load") & (frame["warmup"].astype(bool) | (order <= n))]
    return settled(frame, check.suite, alpha)


def design_sentence(suite: Suite) -> str:
    """The design in one sentence for the report's opening, computed from the record; '' for a fixed design."""
    seq = _sequential(suite)
    if not seq:
        return ""
    looks, alphas = seq["looks"], seq.get("alphas") or []
    plan = (f"sequential: verdicts read after {looks[0]} runs a side at α={alphas[0]:g}, else after "
            f"{looks[-1]} at α={alphas[-1]:g} (together at most {sum(alphas):g}: alpha spending)")
    seen = [s for s in seq.get("seen") or [] if isinstance(s, dict)]
    if seq.get("stopped_at"):
        return f"{plan}; it stopped after {seq['stopped_at']} a side: {seen[-1]['why'] if seen else 'settled'}"
    why = f" ({seen[0]['why']})" if seen else ""
    return (f"{plan}; not settled after {looks[0]}{why}, so all {looks[-1]} ran, and every verdict here is read at "
            f"α={design_alpha(suite):g} ({confidence_words(design_alpha(suite))} intervals)")
