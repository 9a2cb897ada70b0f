"""Phase timing: the kernel's counters recorded beside the clock, per phase."""

from __future__ import annotations

import torch

from omni_loader.residency import page_size
from omni_loader.timing import PhaseClock


def test_first_touches_are_counted_in_the_phase_that_makes_them() -> None:
    """Writing fresh memory faults its pages in; the phase that writes them shows the faults, the phase
    that only allocated them does not."""
    clock = PhaseClock(torch.device("cpu"))
    pages = (64 << 20) // page_size()
    with clock.phase("allocate"):
        # 64 MiB is above glibc's largest mmap threshold (32 MiB): always fresh, never-touched pages.
        block = torch.empty(64 << 20, dtype=torch.uint8)  # address space only
    with clock.phase("touch"):
        block.fill_(1)
    with clock.phase("touch again"):
        block.fill_(2)  # resident now: no new faults
    faults = {r.name: r.minor_faults for r in clock.records}
    assert faults["touch"] >= pages // 2, faults  # 4 KiB pages (a few may come as huge pages)
    assert faults["allocate"] < pages // 20 and faults["touch again"] < pages // 20, faults


def test_counters_of_a_parent_cover_its_children() -> None:
    clock = PhaseClock(torch.device("cpu"))
    with clock.phase("outer"):
        with clock.phase("inner"):
            torch.empty(64 << 20, dtype=torch.uint8).fill_(1)  # above glibc's largest mmap threshold: fresh pages
    rec = {r.name: r for r in clock.records}
    for counter in ("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches"):
        assert getattr(rec["outer"], counter) >= getattr(rec["inner"], counter) >= 0
    assert rec["inner"].minor_faults > 0
