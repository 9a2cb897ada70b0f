"""Where a load runs on the host: the torch threads it uses and the CPUs its process may run on.

Both are set inside the worker before the timed phases and restored after (the in-process mode shares the
caller's interpreter); neither changes what a load does, only how much of the host's noise reaches its clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import OmniLoaderError

@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run a load with ``threads`` torch intra-op threads (None: torch's choice), then restore. Why: each large
    ``copy_`` ends in an OpenMP barrier that waits for a thread a neighbour descheduled (0.2 s of
    ``load_parameters`` became 2.5 s here); one thread has none."""
    import torch

    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def cpu_affinity(cpus: tuple[int, ...]) -> Iterator[None]:
    """Run a load on ``cpus`` only (empty: anywhere), then restore. Why: a moved load meets cold caches and TLB;
    here pinning gave ``load_parameters`` an IQR/median of 7.3%, 0.9%, 1.0% against 24.6%, 3.9%, 2.3% unpinned."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def resolve_cpus(choice: str, threads: int | None) -> tuple[int, ...]:
    """``--cpus``: ``auto`` (for a one-thread load the last core this process may use, as the benchmark's own
    process and interrupts tend to run on core 0; no pinning for more threads), ``any`` (no pinning) or a list
    such as ``1`` or ``0,2`` (each CPU once, in order); one-line error otherwise."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if choice == "any" or not allowed:
        return ()
    if choice == "auto":
        return (allowed[-1],) if threads == 1 else ()
    try:
        cpus = tuple(sorted({int(part) for part in choice.split(",")}))
    except ValueError:
        raise OmniLoaderError(f"--cpus {choice}: give auto, any, or CPU numbers such as 1 or 0,2") from None
    outside = [c for c in cpus if c not in allowed]
    if outside:
        raise OmniLoaderError(f"--cpus {choice}: this process may use CPUs {', '.join(map(str, allowed))}, "
                              f"not {', '.join(map(str, outside))}")
    return cpus


def describe_cpus(cpus: tuple[int, ...] | list[int] | None) -> str:
    """The environment table's words for a load's CPUs."""
    return f"{', '.join(map(str, cpus))} (pinned)" if cpus else "any (not pinned)"
