"""Both buffer-discovery rules timed on one model, alternating, with their call counts and agreement.

``discovery-bench`` and the audit ask the same question of a model and answer it the same way: calls alternate
between the rules, so a burst of load lands on both alike. The traversal sweep's per-model calls are here too.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torch import nn

from ..lint.sources import gc_paused
from ..token2wav.discovery import Agreement, compare_variants, count_state_dict_calls, find_persistent_buffers
from ..names import VARIANTS


@dataclass(frozen=True)
class DiscoveryTiming:
    """Raw per-call samples of both rules on one model, the ``state_dict()`` calls each made, their agreement."""

    samples: dict[str, list[float]]
    state_dict_calls: dict[str, int]
    agreement: Agreement

    @property
    def agree(self) -> bool:
        return self.agreement.agree

    @property
    def summary(self) -> str:
        return self.agreement.summary()

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def ratio(self) -> float:
        return self.median("baseline") / self.median("optimized")


def time_discovery(model: nn.Module, repeats: int = 5, warmup: int = 1) -> DiscoveryTiming:
    """Time ``find_persistent_buffers`` for both variants, alternating, after ``warmup`` calls each."""
    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    state_dict_calls: dict[str, int] = {}
    for i in range(warmup + repeats):
        for variant in VARIANTS:
            with count_state_dict_calls(model) as calls:
                start = time.perf_counter()
                find_persistent_buffers(model, variant)
                elapsed = time.perf_counter() - start
            state_dict_calls[variant] = calls.calls
            if i >= warmup:
                samples[variant].append(elapsed)
    return DiscoveryTiming(samples=samples, state_dict_calls=state_dict_calls, agreement=compare_variants(model))


def experiment_calls(model: nn.Module) -> dict[str, Callable[[], object]]:
    """What each experiment calls on ``model``."""
    return {
        "state_dict": model.state_dict,
        "baseline": lambda: find_persistent_buffers(model, "baseline"),
        "optimized": lambda: find_persistent_buffers(model, "optimized"),
    }


def per_call_seconds(fn: Callable[[], object], number: int) -> tuple[float, float]:
    """(wall, thread CPU) seconds per call over ``number`` calls, garbage collector off (as timeit does)."""
    with gc_paused():
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        for _ in range(number):
            fn()
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    return wall / number, cpu / number


def calibration(model: nn.Module, experiments: Sequence[str], warmup: int = 1,
                min_time: float = 0.0) -> tuple[dict[str, int], dict[str, float]]:
    """The calls per timed repeat of each experiment (enough for ``min_time`` s) and its last warm-up's seconds."""
    calls = experiment_calls(model)
    number = dict.fromkeys(experiments, 1)
    last_seconds: dict[str, float] = {}
    for exp in experiments:
        for _ in range(warmup):
            last_seconds[exp] = per_call_seconds(calls[exp], 1)[0]
        if exp in last_seconds and min_time > 0:
            number[exp] = max(1, min(10_000, math.ceil(min_time / max(last_seconds[exp], 1e-9))))
    return number, last_seconds


def round_estimate(number: dict[str, int], last_seconds: dict[str, float], touch: int) -> float:
    """What one timed round of a model will take by its warm-up times (``touch`` calls included); NaN without."""
    if any(exp not in last_seconds for exp in ("state_dict", *number)):
        return math.nan
    return touch * last_seconds["state_dict"] + sum(k * last_seconds[exp] for exp, k in number.items())
