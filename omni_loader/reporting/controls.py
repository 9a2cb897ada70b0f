"""Shared-phase controls: which phases two variants differ in, and what every other phase says.

A variant is a named set of steps, each timed as its own phase, so every phase a pair does not change is a
*control*: a difference there is the machine's. Controls are tested like headline rows; one that differs marks
each enclosing row *confounded*, and the row's saving is taken apart into the changed steps', the controls' and
what medians do not add up to.

Nothing here imports torch: it reads saved rows only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from ..names import ENCLOSING, LEAF_PHASES, STEP_PHASES
from ..results.suite import Suite
from .stats import ALPHA, Comparison, NoiseFloor, compare, phase_summary

# A control's difference smaller than this share of the enclosing row's baseline median cannot change
# what that row says, so it is reported but does not mark the row.
MATERIAL = 0.01


def changed_phases(first: Any, second: Any) -> tuple[str, ...]:
    """The phases whose step differs between two variants (names, Variants or their dicts), in load order."""
    from ..token2wav.variants import variant_from

    a, b = variant_from(first), variant_from(second)
    steps = {step for step in STEP_PHASES if getattr(a, step) != getattr(b, step)}
    return tuple(p for p in LEAF_PHASES if p in {STEP_PHASES[s] for s in steps})


@dataclass(frozen=True)
class Control:
    """One phase both variants run unchanged, compared like any other row."""

    comparison: Comparison
    floor: NoiseFloor | None = None

    @property
    def phase(self) -> str:
        return self.comparison.phase

    @property
    def differs(self) -> bool:
        return self.comparison.differs(self.floor)


@dataclass(frozen=True)
class RowAccount:
    """A headline row's saving taken apart: changed steps + controls + what is left over."""

    phase: str
    saving: float  # median(baseline) - median(optimized) of the row
    baseline_median: float
    changed: dict[str, float]  # per changed phase: its saving
    controls: dict[str, float]  # per control phase inside the row: its saving (negative: slower)
    confounders: tuple[str, ...] = ()  # controls inside the row that differ materially

    @property
    def confounded(self) -> bool:
        return bool(self.confounders)

    @property
    def changed_saving(self) -> float:
        return sum(self.changed.values())

    @property
    def controls_saving(self) -> float:
        return sum(self.controls.values())

    @property
    def remainder(self) -> float:
        """Time between phases and the medians' non-additivity: saving − changed − controls."""
        return self.saving - self.changed_saving - self.controls_saving


@dataclass(frozen=True)
class ControlReport:
    """The controls of one A/B pair and the accounting of every enclosing headline row."""

    first: str
    second: str
    changed: tuple[str, ...]
    controls: list[Control] = field(default_factory=list)
    rows: list[RowAccount] = field(default_factory=list)

    def material(self, control: Control) -> bool:
        """A control differs by enough to matter to the smallest enclosing row it is in."""
        if not control.differs:
            return False
        enclosing = [r for r in self.rows if control.phase in r.controls]
        base = min((r.baseline_median for r in enclosing), default=math.nan)
        return not math.isnan(base) and abs(control.comparison.difference) >= MATERIAL * base

    @property
    def confounders(self) -> list[Control]:
        return [c for c in self.controls if self.material(c)]

    def row(self, phase: str) -> RowAccount | None:
        return next((r for r in self.rows if r.phase == phase), None)


def pair_reports(frame, suite: Suite, floors: dict[str, NoiseFloor] | None = None,
                 alpha: float = ALPHA) -> list[ControlReport]:
    """One :class:`ControlReport` per A/B pair of a results directory, the PR's first, at ``alpha``."""
    spec = suite.spec
    arms = list(spec.get("variants") or ("baseline", "optimized"))
    custom = {v["name"]: v for v in spec.get("custom_variants") or [] if isinstance(v, dict)}
    reports = [r for other in arms[1:]
               if (r := control_report(frame, custom.get(arms[0], arms[0]), custom.get(other, other), floors, alpha))]
    return sorted(reports, key=lambda r: (r.first, r.second) != ("baseline", "optimized"))  # the PR's pair first


def control_report(frame, first: Any = "baseline", second: Any = "optimized",
                   floors: dict[str, NoiseFloor] | None = None, alpha: float = ALPHA) -> ControlReport | None:
    """The controls of ``first`` against ``second`` in ``frame``, or None without timed leaf phases."""
    floors = floors or {}
    names = tuple(v if isinstance(v, str) else (v["name"] if isinstance(v, dict) else v.name) for v in (first, second))
    changed = changed_phases(first, second)
    compared = [compare(phase_summary(frame, names[0], p), phase_summary(frame, names[1], p), alpha=alpha)
                for p in LEAF_PHASES if p not in changed]
    controls = [Control(c, floors.get(c.phase)) for c in compared if c.baseline.n and c.optimized.n]
    if not controls:
        return None
    report = ControlReport(names[0], names[1], changed, controls,
                           [a for row, leaves in ENCLOSING.items() if (a := _account(frame, names, row, leaves, changed))])
    confounding = {c.phase for c in report.confounders}  # known once the rows are: materiality is against a row
    report.rows[:] = [replace(r, confounders=tuple(p for p in r.controls if p in confounding)) for r in report.rows]
    return report


def _account(frame, names: tuple[str, str], row: str, leaves: tuple[str, ...], changed: tuple[str, ...]
             ) -> RowAccount | None:
    whole = [phase_summary(frame, v, row) for v in names]
    if not all(s.n for s in whole):
        return None
    summaries = {p: [phase_summary(frame, v, p) for v in names] for p in leaves}
    saving = {p: a.median - b.median for p, (a, b) in summaries.items() if a.n and b.n}
    return RowAccount(row, whole[0].median - whole[1].median, whole[0].median,
                      {p: s for p, s in saving.items() if p in changed},
                      {p: s for p, s in saving.items() if p not in changed})
