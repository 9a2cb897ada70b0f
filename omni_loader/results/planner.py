"""The run plan: which variant each run of a benchmark loads, in which order, warm-ups first.

Both benchmarks plan the same way and neither may import the other, so the planner sits below both.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import PlanError
from ..names import VARIANTS

ORDERS = ("blocks", "alternate", "abba", "shuffle", "blocked")
DEFAULT_ORDER = "blocks"
# The design: how many measured runs a side, and when the benchmark may stop.
DESIGNS = ("sequential", "fixed")
FIRST_LOOK = 5  # runs a side at the sequential design's first look: the fewest whose rank test can reach 0.01
LOOK_ALPHAS = (0.01, 0.04)  # the error rate each look may spend: first look, last look; together the kit's 0.05
ROUND_ORDERS = ("blocks", "alternate", "abba")  # the orders whose plan of n runs is the plan of more runs cut short


def looks(design: str, runs: int, order: str, aa: bool = False) -> tuple[int, ...]:
    """The numbers of measured runs a side after which the benchmark's verdicts are read.

    ``fixed`` has one, after all ``runs``. ``sequential`` has two, after :data:`FIRST_LOOK` runs a side and
    after ``runs``; each tests at its share of 0.05 (:data:`LOOK_ALPHAS`, Bonferroni), so the error rate holds
    whatever decides to stop. It needs an order made of rounds and no A/A benchmark.
    """
    if design == "sequential" and runs > FIRST_LOOK and order in ROUND_ORDERS and not aa:
        return (FIRST_LOOK, runs)
    return (runs,)


def look_alpha(design_looks: tuple[int, ...] | list[int], n: int) -> float:
    """The error rate the look after ``n`` runs a side tests at (0.05 when there is one look)."""
    if len(design_looks) == 1:
        return FIXED_ALPHA
    return LOOK_ALPHAS[0] if n < design_looks[-1] else LOOK_ALPHAS[-1]


FIXED_ALPHA = 0.05  # the kit's error rate for one claim (reporting.stats.ALPHA)


@dataclass(frozen=True)
class PlannedRun:
    run_id: int
    variant: str  # the variant loaded, or the A/A arm (aa-1, aa-2) for source "aa"
    warmup: bool
    order: int | None  # 1-based index among the measured runs of this variant
    source: str = "load"  # load: the A/B benchmark; aa: the A/A noise-floor benchmark; server: serve-ab

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_runs(
    warmup: int, runs: int, order: str = DEFAULT_ORDER, seed: int = 0, first_id: int = 0,
    variants: tuple[str, ...] = VARIANTS, source: str = "load",
) -> list[PlannedRun]:
    """Warm-ups of each variant first (A, B, A, B...), then the measured runs in ``order``.

    ``blocks`` (the default) makes each round a seeded permutation of the variants (Abedi and Brecht, ICPE 2017),
    so carry-over from the run before and drift reach both arms alike. ``alternate`` is ABAB... (rotated rounds
    for three or more), ``abba`` reverses every other round, ``shuffle`` is a seeded permutation of the whole,
    ``blocked`` is AA...BB... Run ids start at ``first_id``.
    """
    if order not in ORDERS:
        raise PlanError(f"--order must be one of {ORDERS}, not {order!r}")
    if warmup < 0 or runs < 1:
        raise PlanError("--warmup must be >= 0 and --runs >= 1")
    variants = tuple(variants)
    if len(variants) < 2 or len(set(variants)) != len(variants):
        raise PlanError(f"a plan needs two or more different variants, not {variants}")
    n = len(variants)
    if order == "alternate":
        rounds = [variants if n == 2 else variants[r % n:] + variants[:r % n] for r in range(runs)]
        sequence = [v for round_ in rounds for v in round_]
    elif order == "blocks":
        rng = random.Random(seed)
        sequence = [v for _ in range(runs) for v in rng.sample(variants, n)]
    elif order == "abba":
        sequence = [v for r in range(runs) for v in (variants if r % 2 == 0 else variants[::-1])]
    else:
        sequence = [v for v in variants for _ in range(runs)]
        if order == "shuffle":
            random.Random(seed).shuffle(sequence)
    plan = [PlannedRun(first_id + i, v, True, None, source) for i, v in enumerate(list(variants) * warmup)]
    seen = dict.fromkeys(variants, 0)
    for variant in sequence:
        seen[variant] += 1
        plan.append(PlannedRun(first_id + len(plan), variant, False, seen[variant], source))
    return plan
