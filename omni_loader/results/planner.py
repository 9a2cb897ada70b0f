"""The run plan: which variant each run of a benchmark loads, in which order, warm-ups first.

Why a module of its own: both benchmarks plan the same way (reproduce's load A/B and serve-ab's
startup A/B), and the plan is stored in ``metadata.json`` and checked against every row read
back. Neither benchmark may depend on the other for it (serve-ab must not import the load
runner), so the planner sits below both and imports nothing of the kit but its vocabulary.
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

    ``fixed`` (and whatever cannot stop early) has one look, after all ``runs``, at the kit's 0.05.
    ``sequential`` has two, after :data:`FIRST_LOOK` runs a side and after ``runs``, and stops at the
    first when the verdicts are settled there. Why it keeps its error rate: each look tests at its own
    share of 0.05 (:data:`LOOK_ALPHAS`, Bonferroni alpha spending), so a false claim at either look, the
    only way the design can err, has probability at most their sum, whatever rule decides to stop.
    It needs an order made of rounds (stopping after a round leaves both arms balanced) and no A/A
    benchmark (whose floor is measured at the A/B's full size).
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

    ``blocks`` (the default) is randomized blocks: each round is a seeded random permutation of the
    variants (AB BA BA AB ...), the randomized multiple interleaved trials of Abedi and Brecht
    (ICPE 2017). Each variant follows each other variant and itself by chance, so what a run
    carries over from the one before (memory the host has to back again, a warm cache) is spread
    over both arms instead of always landing on the same one, as it does under ``alternate``,
    where B always follows A; and a drift over the benchmark reaches both arms alike.
    With two variants ``alternate`` is ABAB... (the PR's order), ``abba`` repeats ABBA (cancels a linear drift),
    ``shuffle`` is a seeded random permutation of the same multiset, ``blocked`` is AA...BB...
    With three or more, ``alternate`` rotates the round (ABC BCA CAB ...: each variant takes each
    position equally often when ``runs`` is a multiple of their number) and ``abba`` reverses
    every other round (ABC CBA ...). Run ids start at ``first_id`` (serve-ab numbers its runs after
    those already in a shared results directory).
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
