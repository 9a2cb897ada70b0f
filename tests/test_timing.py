"""Phase timing: the kernel's counters recorded beside the clock, per phase."""

from __future__ import annotations

import pytest
import torch

from omni_loader.host.pagecache import page_size
from omni_loader.host.timing import PhaseClock


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
    """Fresh pages from mmap itself, each written once: a CI worker that had run in-process loads before once saw no
    fault in a torch.empty(64 MiB).fill_ (memory the allocator already held), and the faults are the point here."""
    import mmap

    clock = PhaseClock(torch.device("cpu"))
    with clock.phase("outer"):
        with clock.phase("inner"):
            block = mmap.mmap(-1, 8 << 20)
            for offset in range(0, len(block), page_size()):
                block[offset] = 1
            block.close()
    rec = {r.name: r for r in clock.records}
    for counter in ("minor_faults", "major_faults", "voluntary_switches", "involuntary_switches"):
        assert getattr(rec["outer"], counter) >= getattr(rec["inner"], counter) >= 0
    assert rec["inner"].minor_faults > 0


@pytest.mark.subprocess
def test_a_workers_peak_rss_is_its_own_not_its_parents() -> None:
    """Linux keeps ``ru_maxrss`` across exec: a worker started from a parent that once held 600 MiB would
    report 600 MiB as its own peak. The kit reads the worker's own address space instead."""
    import subprocess
    import sys

    inflate = ("import subprocess, sys; block = bytearray(600 << 20); block[::4096] = b'x' * len(block[::4096]); "
               "print(subprocess.run([sys.executable, '-c', 'from omni_loader.host.devices import peak_rss_bytes; "
               "print(peak_rss_bytes() >> 20)'], capture_output=True, text=True, check=True).stdout.strip())")
    child_peak_mib = int(subprocess.run([sys.executable, "-c", inflate], capture_output=True, text=True,
                                        check=True).stdout)
    assert 5 < child_peak_mib < 400, f"the child says its peak was {child_peak_mib} MiB"
