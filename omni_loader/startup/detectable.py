"""What a startup benchmark can detect: the smallest difference a verdict calls, and the runs a saving needs.

Each run is modelled as its arm's median plus normal noise of SD ``spread``. The PR's separate-ranges rule is
computed exactly (:func:`call_probability`); past a best n, more runs widen the ranges and make it *harder* to
meet. The kit's verdict (bootstrap interval and Mann-Whitney) is simulated (``kit_*``), slower, so
:func:`detectability` uses the exact rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..reporting.stats import ALPHA

POWER = 0.8
PR_SAVING_S = 1.099526 - 0.620436  # the PR's Token2Wav weight-loading saving (data/reference/pr7061.json), 0.479 s


def smallest_p(n_a: int, n_b: int) -> float:
    """The exact two-sided Mann-Whitney p of completely separate samples (no ties): ``2 / C(n_a + n_b, n_a)``."""
    return min(1.0, 2.0 / math.comb(n_a + n_b, n_a)) if n_a >= 1 and n_b >= 1 else 1.0


def call_probability(difference: float, spread: float, n_a: int, n_b: int | None = None,
                     alpha: float = ALPHA) -> float:
    """The probability that the kit calls an optimized arm ``difference`` seconds faster (normal noise of SD ``spread``)."""
    n_b = n_a if n_b is None else n_b
    if n_a < 2 or n_b < 2 or smallest_p(n_a, n_b) >= alpha:
        return 0.0
    if spread <= 0:
        return 1.0 if difference > 0 else 0.0
    from scipy.special import ndtr

    x = _GRID  # the density of the slowest optimized run lies well inside
    density = n_b * np.exp(-x * x / 2) / math.sqrt(2 * math.pi) * ndtr(x) ** (n_b - 1) * ndtr(difference / spread - x) ** n_a
    return float(min(1.0, max(0.0, np.trapezoid(density, x))))


_GRID = np.linspace(-10.0, 10.0, 8001)


def detectable_difference(spread: float, n_a: int, n_b: int | None = None, *, power: float = POWER,
                          alpha: float = ALPHA, floor: float | None = None) -> float:
    """The smallest difference of medians called with probability ``power`` (``inf``: never), at least ``floor``."""
    if call_probability(1e9, 1.0, n_a, n_b, alpha) < power:
        return math.inf
    lo, hi = 0.0, 1.0
    while call_probability(hi, 1.0, n_a, n_b, alpha) < power:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if call_probability(mid, 1.0, n_a, n_b, alpha) < power else (lo, mid)
    return max(hi * spread, floor or 0.0)


def largest_spread(difference: float, n_a: int, n_b: int | None = None, *, power: float = POWER,
                   alpha: float = ALPHA) -> float:
    """The largest spread (SD of one run) at which ``difference`` is still called with probability ``power``."""
    per_unit = detectable_difference(1.0, n_a, n_b, power=power, alpha=alpha)
    return 0.0 if math.isinf(per_unit) else difference / per_unit


def runs_needed(saving: float, spread: float, *, power: float = POWER, alpha: float = ALPHA,
                max_runs: int = 200) -> int | None:
    """The fewest runs a side at which the kit calls ``saving`` with probability ``power``; None: none up to
    ``max_runs``."""
    for n in range(2, max_runs + 1):
        if call_probability(saving, spread, n, n, alpha) >= power:
            return n
    return None


def best_chance(saving: float, spread: float, *, alpha: float = ALPHA, max_runs: int = 200) -> tuple[int, float]:
    """The runs a side that give the kit its best chance of calling ``saving``, and that chance."""
    p, n = max((call_probability(saving, spread, n, n, alpha), n) for n in range(2, max_runs + 1))
    return n, p


def runs_needed_by_test(saving: float, spread: float, *, power: float = POWER, alpha: float = ALPHA) -> int:
    """Runs a side a two-sided Mann-Whitney test alone needs (normal approximation, times pi/3), never fewer than
    the runs at which the exact test can reach ``alpha`` at all."""
    from scipy.stats import norm

    if saving <= 0:
        return math.inf  # type: ignore[return-value]
    z = norm.isf(alpha / 2) + norm.isf(1 - power)
    floor = next(n for n in range(1, 64) if smallest_p(n, n) < alpha)
    return max(floor, math.ceil(2 * (z * spread / saving) ** 2 * math.pi / 3))


def kit_calls(baseline: np.ndarray, optimized: np.ndarray, *, alpha: float = ALPHA, resamples: int = 2000,
              seed: int = 0) -> np.ndarray:
    """The kit's verdict (``Comparison.differs``, no A/A floor) on each row of two ``(sims, n)`` arrays, vectorized."""
    from scipy.stats import mannwhitneyu

    rng = np.random.default_rng(seed)
    ia = rng.integers(0, baseline.shape[1], (resamples, baseline.shape[1]))
    ib = rng.integers(0, optimized.shape[1], (resamples, optimized.shape[1]))
    out = np.zeros(len(baseline), bool)
    step = max(1, 4_000_000 // (resamples * (baseline.shape[1] + optimized.shape[1])))
    for i in range(0, len(baseline), step):
        a, b = baseline[i:i + step], optimized[i:i + step]
        delta = np.median(b[:, ib], axis=2) - np.median(a[:, ia], axis=2)
        below = np.percentile(delta, 97.5, axis=1) < 0
        out[i:i + step] = below & (mannwhitneyu(a, b, axis=1).pvalue < alpha)
    return out


def kit_call_probability(difference: float, spread: float, n_a: int, n_b: int | None = None, *,
                         alpha: float = ALPHA, sims: int = 1000, seed: int = 1) -> float:
    """The fraction of ``sims`` seeded simulated benchmarks (normal noise) the kit's verdict calls faster."""
    n_b = n_a if n_b is None else n_b
    if n_a < 2 or n_b < 2 or smallest_p(n_a, n_b) >= alpha:
        return 0.0
    z = np.random.default_rng(seed).standard_normal((sims, n_a + n_b))
    return float(kit_calls(spread * z[:, :n_a], spread * z[:, n_a:] - difference, alpha=alpha).mean())


def kit_detectable_difference(spread: float, n_a: int, n_b: int | None = None, *, power: float = POWER,
                              alpha: float = ALPHA, sims: int = 1000, seed: int = 1) -> float:
    """The smallest difference the kit's verdict calls in ``power`` of the seeded simulations; ``inf``: never."""
    def p(d: float) -> float:
        return kit_call_probability(d * spread, spread, n_a, n_b, alpha=alpha, sims=sims, seed=seed)

    if p(1e3) < power:
        return math.inf
    lo, hi = 0.0, 8.0
    while p(hi) < power:
        hi *= 2
    for _ in range(18):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p(mid) < power else (lo, mid)
    return hi * spread


def pooled_spread(a: Sequence[float], b: Sequence[float]) -> float:
    """The pooled standard deviation of two samples (each about its own mean)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    dof = len(a) + len(b) - 2
    if dof < 1:
        return math.nan
    return float(math.sqrt((((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / dof))


@dataclass(frozen=True)
class Detectability:
    """What a benchmark of ``n_a`` + ``n_b`` runs at ``spread`` can call, and what ``saving`` would need."""

    spread: float
    n_a: int
    n_b: int
    detectable: float
    saving: float
    runs: int | None
    runs_by_test: int
    best: tuple[int, float]
    floor: float | None = None
    power: float = POWER
    alpha: float = ALPHA

    def calls(self, design: Detectability | None = None) -> str:
        """The smallest difference of medians this design calls ``power`` of the time, in one sentence; where it
        can call none, ``design``'s (another n at the same spread) instead, and why."""
        head = f"At this spread (SD {self.spread:.2f} s of one run), "
        if not math.isinf(self.detectable):
            return head + f"{self._runs()} runs call {self._smallest()} under the PR's separate-ranges rule{self._times()}."
        chance = (f"by chance alone they have separate ranges {smallest_p(self.n_a, self.n_b):.0%} of the time, over the "
                  f"{self.alpha:.0%} the rule allows")
        if design is None or math.isinf(design.detectable):
            return head + f"{self._runs()} runs call no difference under the PR's separate-ranges rule, however large: {chance}."
        return head + (f"the PR's {design._runs()} runs would call {design._smallest()} under its separate-ranges rule"
                       f"{design._times()}; {self._runs()} runs call none, however large ({chance}).")

    def _runs(self) -> str:
        return f"{self.n_a} + {self.n_b}"

    def _smallest(self) -> str:
        floor = f" (A/A floor {self.floor:.3f} s)" if self.floor else ""
        return f"a difference of medians of {self.detectable:.2f} s or more{floor} {self.power:.0%} of the time"

    def _times(self) -> str:
        whose = "the PR's" if self.saving == PR_SAVING_S else "the"
        return f", {self.detectable / self.saving:.1f} times {whose} {self.saving:.2f} s saving"

    def needs(self) -> str:
        """The runs a side ``saving`` needs at this spread, in one sentence (the same for any n: the spread decides)."""
        test = f"a Mann-Whitney test alone would need {self.runs_by_test} runs a side"
        if self.runs is not None:
            return f"A {self.saving:.2f} s saving would need {self.runs} runs a side under that rule; {test}."
        return (f"No number of runs calls a {self.saving:.2f} s saving {self.power:.0%} of the time under that rule (its "
                f"best chance is {self.best[1]:.0%}, at {self.best[0]} runs a side: more runs widen the ranges); "
                f"{test}.")

    def sentence(self) -> str:
        """What this design can call, then what the saving needs: two sentences, every figure computed."""
        return f"{self.calls()} {self.needs()}"


def detectability(baseline: Sequence[float] | None = None, optimized: Sequence[float] | None = None, *,
                  spread: float | None = None, n: int | None = None, saving: float = PR_SAVING_S,
                  floor: float | None = None, power: float = POWER, alpha: float = ALPHA) -> Detectability:
    """From per-run samples of the two arms (or a ``spread`` and ``n`` per side): :class:`Detectability`."""
    if spread is None:
        if baseline is None or optimized is None:
            raise ValueError("detectability needs both arms' samples, or a spread and n")
        spread = pooled_spread(baseline, optimized)
    n_a = len(baseline) if baseline is not None else int(n or 0)
    n_b = len(optimized) if optimized is not None else int(n or 0)
    return Detectability(spread, n_a, n_b, detectable_difference(spread, n_a, n_b, power=power, alpha=alpha,
                                                                 floor=floor), saving,
                         runs_needed(saving, spread, power=power, alpha=alpha),
                         runs_needed_by_test(saving, spread, power=power, alpha=alpha),
                         best_chance(saving, spread, alpha=alpha), floor, power, alpha)
