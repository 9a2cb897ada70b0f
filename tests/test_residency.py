"""Where first touches land: resident pages, file-backed tensors, and what a page fault costs."""

from __future__ import annotations

import mmap
from pathlib import Path

import torch

from omni_loader.profiling.result import VariantProfile
from omni_loader.profiling.summary import bottleneck_sentence
from omni_loader.host.residency import backing_file, fault_share, first_touch_seconds, resident_fraction


def test_resident_fraction_follows_the_first_write() -> None:
    # A mapping of its own, so the pages are fresh: torch.empty may hand back memory that an earlier
    # test in the same worker freed while resident (CI once read 0.72 here).
    mapping = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    block = torch.frombuffer(mapping, dtype=torch.uint8)
    assert resident_fraction(block) < 0.05
    block[: 32 << 20].fill_(1)
    assert 0.45 < resident_fraction(block) < 0.55
    block.fill_(1)
    assert resident_fraction(block) == 1.0
    assert backing_file(block) is None  # anonymous memory
    assert resident_fraction(torch.empty(0)) is None


def test_a_first_touch_costs_something_and_shares_are_bounded(monkeypatch) -> None:
    assert first_touch_seconds() > 0
    assert first_touch_seconds() == first_touch_seconds()  # measured once per process: every sentence quotes one figure
    # A clock under which the second write always looks slower (preempted): still a price, never 0.
    import time

    ticks = iter(range(10**6))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(ticks)) ** 1.5)
    first_touch_seconds.cache_clear()
    try:
        assert first_touch_seconds(1 << 20, trials=3) > 0
    finally:
        first_touch_seconds.cache_clear()
    assert fault_share(1000, 1.0, 1e-6) == 0.001
    assert fault_share(10**6, 0.5, 1e-6) == 1.0  # never more than the whole phase
    assert fault_share(10, 0.0, 1e-6) == 0.0


def test_a_first_touch_is_priced_per_fault_counted_not_per_page(monkeypatch) -> None:
    """The price divides by the faults the first write counted: in a notebook kernel a block that came
    back already backed faulted little, and a price per page came out at 0.06 µs against 1.2 µs."""
    import resource
    from types import SimpleNamespace

    first_touch_seconds.cache_clear()
    try:
        honest = first_touch_seconds(16 << 20, trials=3)
        real = resource.getrusage
        monkeypatch.setattr(resource, "getrusage", lambda who: SimpleNamespace(ru_minflt=real(who).ru_minflt // 16))
        first_touch_seconds.cache_clear()
        fewer = first_touch_seconds(16 << 20, trials=3)  # the same writes, a sixteenth of the faults counted
    finally:
        first_touch_seconds.cache_clear()
    assert 4 < fewer / honest < 64, (honest, fewer)


def _profile(minor_faults: int, seconds: float) -> VariantProfile:
    phases = {"total": seconds * 1.25, "construct": seconds / 4, "load_parameters": seconds}
    records = [{"name": n, "seconds": s, "minor_faults": minor_faults if n == "load_parameters" else 0}
               for n, s in phases.items()]
    return VariantProfile("optimized", Path("."), reference={"phases": phases, "phase_records": records})


def test_profile_names_page_faults_when_they_dominate_a_phase() -> None:
    per_fault = first_touch_seconds()
    dominated = bottleneck_sentence(_profile(minor_faults=int(3 / per_fault), seconds=1.0))  # 6x margin for noise
    assert "Load parameters, 80.0% of the load" in dominated and "dominated by page faults" in dominated
    light = bottleneck_sentence(_profile(minor_faults=int(0.01 / per_fault), seconds=1.0))
    assert "dominated" not in light and "minor page faults" in light
    assert "page faults" not in bottleneck_sentence(_profile(minor_faults=0, seconds=1.0))
    # 02's Lab pass: "132 minor page faults ..., about 0.0% of the phase"; a share that rounds to nothing says so
    few = bottleneck_sentence(_profile(minor_faults=3, seconds=1.0))
    assert "3 minor page faults (first touches of fresh memory), under 0.1% of the phase" in few and "about 0.0%" not in few
    assert "(1,000.00 ms)" in light  # the phase's time with the table's two decimals, not "(800.0 ms)"


def test_faults_priced_above_the_phase_say_so_rather_than_a_share_the_product_contradicts() -> None:
    """More faults than the phase's time can hold at this machine's price: the sentence gives the product and says
    it is more than the phase, not "about 100% of the phase" beside a count that multiplies out to more."""
    from omni_loader.formatting import short_duration

    per_fault = first_touch_seconds()
    minor = int(3 / per_fault)
    text = bottleneck_sentence(_profile(minor_faults=minor, seconds=1.0))
    assert f"at {per_fault * 1e6:.2f} µs each as measured on this machine come to {short_duration(minor * per_fault)}" in text
    assert f"more than the phase's {short_duration(1.0)}" in text and "100.0%" not in text
    assert "dominated by page faults" in text
