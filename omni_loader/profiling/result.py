"""What profiling one variant produced, and the figures derived from it.

Every share comes from the unprofiled reference load (``load.json``): cProfile slows Python-heavy code far more
than C code, so it only says which functions fill a phase.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..names import LEAF_PHASES

OTHER_PHASE = "(between phases)"


@dataclass
class VariantProfile:
    """What profiling one variant produced: its files, the reference load and derived figures."""

    variant: str
    directory: Path
    files: dict[str, Path] = field(default_factory=dict)
    reference: dict[str, Any] = field(default_factory=dict)  # LoadResult.to_dict() of the unprofiled load
    state_dict_calls: dict[str, int] | None = None  # primitive / ncalls (cProfile), counter (loader)
    phase_functions: pd.DataFrame | None = None
    torch_phases: list[str] = field(default_factory=list)
    py_spy: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def phase_shares(self) -> pd.DataFrame:
        return phase_shares(self.reference)

    def top_costs(self, n: int = 10) -> pd.DataFrame:
        if self.phase_functions is None:
            return pd.DataFrame()
        return top_costs(self.phase_functions, self.phase_shares(), n)

    def flamegraph(self, link_from: str | os.PathLike[str] | None = None) -> Any:
        """The load's flamegraph for a notebook, links relative to ``link_from``; None when py-spy did not run."""
        from . import flamegraph

        speedscope = self.files.get("speedscope")
        if not speedscope or not Path(speedscope).is_file():
            return None
        flame = flamegraph.build(speedscope, title=f"{self.variant} load: where its samples are")
        files = {"speedscope.json": Path(speedscope)}
        if self.files.get("flamegraph"):
            files["flame.svg"] = Path(self.files["flamegraph"])
        return flamegraph.FlameView(flame, link_from=link_from, files=files)


def phase_shares(result: Any) -> pd.DataFrame:
    """Leaf phases of one load with seconds and share of the total (a LoadResult or its dict); the time between
    leaf phases is one more row, so the shares add up to 100%."""
    seconds = result.phase_seconds() if hasattr(result, "phase_seconds") else dict(result["phases"])
    total = seconds.get("total")
    if not total or total <= 0:
        raise OmniLoaderError("load result has no positive 'total' phase; cannot compute phase shares")
    rows = [(name, seconds[name]) for name in LEAF_PHASES if name in seconds]
    rest = total - sum(s for _, s in rows)
    if rest > 0:
        rows.append((OTHER_PHASE, rest))
    df = pd.DataFrame(rows, columns=["phase", "seconds"])
    df["share"] = df["seconds"] / total
    return df


def phase_share_frame(profiles: dict[str, VariantProfile]) -> pd.DataFrame:
    """The variants' reference loads side by side, which profile.md and notebook 02 each write in their own words:
    ``phase`` (the load's order, the time between phases after it, ``total`` last), then per variant
    ``<variant> (ms)`` and ``<variant> share`` (of its whole load)."""
    parts = []
    for variant, vp in profiles.items():
        s = vp.phase_shares().set_index("phase")
        s.loc["total"] = [vp.reference["phases"]["total"], 1.0]
        parts.append(pd.DataFrame({f"{variant} (ms)": s["seconds"] * 1e3, f"{variant} share": s["share"]}))
    frame = pd.concat(parts, axis=1)
    order = [*LEAF_PHASES, OTHER_PHASE, "total"]
    return frame.loc[sorted(frame.index, key=order.index)].rename_axis("phase").reset_index()


def top_costs(phase_functions: pd.DataFrame, shares: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The costliest (phase, function) pairs: a function's share of its phase's own time under cProfile, times
    the phase's share of the unprofiled reference load."""
    share = dict(zip(shares["phase"], shares["share"]))
    df = phase_functions[phase_functions["phase"].isin(share)].copy()
    df["share_of_load"] = df["phase"].map(share) * df["share_of_phase"]
    return df.sort_values("share_of_load", ascending=False, ignore_index=True).head(n)


def largest_cost(vp: VariantProfile) -> dict[str, Any]:
    """The largest leaf phase of the reference load and, with cProfile, its costliest function."""
    shares = vp.phase_shares()
    shares = shares[shares["phase"] != OTHER_PHASE].sort_values("share", ascending=False)
    top = shares.iloc[0]
    found: dict[str, Any] = {"phase": top["phase"], "phase_share": float(top["share"]),
                             "phase_seconds": float(top["seconds"])}
    if vp.phase_functions is not None:
        inside = vp.phase_functions[vp.phase_functions["phase"] == top["phase"]]
        if len(inside):
            f = inside.sort_values("tottime", ascending=False).iloc[0]
            found.update(function=f["function"], function_share=float(top["share"] * f["share_of_phase"]))
    return found
