"""What module traversal costs: timing both discovery rules on a real module tree.

The baseline rebuilds the state dict once per buffer, so its cost grows as buffers x modules;
the optimized rule walks the tree once, so its cost grows as modules + buffers.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from torch import nn

from .discovery import VARIANTS, compare_variants, count_state_dict_calls, find_persistent_buffers


@dataclass
class DiscoveryTiming:
    """Raw per-call samples of both rules on one model, alternating, plus their agreement."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    state_dict_calls: dict[str, int] = field(default_factory=dict)
    agree: bool = False
    summary: str = ""

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def ratio(self) -> float:
        return self.median("baseline") / self.median("optimized")


def time_discovery(model: nn.Module, repeats: int = 5, warmup: int = 1) -> DiscoveryTiming:
    """Time ``find_persistent_buffers`` for both variants, alternating, after ``warmup`` calls each."""
    timing = DiscoveryTiming(samples={v: [] for v in VARIANTS})
    for i in range(warmup + repeats):
        for variant in VARIANTS:
            with count_state_dict_calls(model) as calls:
                start = time.perf_counter()
                find_persistent_buffers(model, variant)
                elapsed = time.perf_counter() - start
            timing.state_dict_calls[variant] = calls.calls
            if i >= warmup:
                timing.samples[variant].append(elapsed)
    agreement = compare_variants(model)
    timing.agree, timing.summary = agreement.agree, agreement.summary()
    return timing
