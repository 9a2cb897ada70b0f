"""Both buffer-discovery rules timed on one model, alternating, with their call counts and agreement.

Why one function for this: ``omni-loader discovery-bench`` (the real Token2Wav) and the audit (every
transformers architecture) ask the same question of a model — what each rule costs, how many
times the baseline builds the state dict, and whether both rules return the same buffers — and
should answer it the same way: calls alternate between the rules, so a burst of load from another
process lands on both alike instead of on one.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from torch import nn

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
