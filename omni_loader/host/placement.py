"""Where a load runs on the host: the torch threads it uses and the CPUs its process may run on.

Both are set inside the worker before the timed phases and restored after, because the
in-process mode shares its interpreter with the caller. Neither changes what a load does; both
change how much of the host's noise reaches its clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import OmniLoaderError

@contextmanager
def intra_op_threads(threads: int | None) -> Iterator[None]:
    """Run a load with ``threads`` torch intra-op threads (None: leave torch's choice), then restore.

    On a CPU every ``copy_`` of a large tensor is an OpenMP parallel region that ends in a barrier.
    When another process holds one of the cores, the thread that shares it is descheduled for a
    time slice and the others wait at the barrier: with 720 copies that turned 0.2 s of
    ``load_parameters`` into 2.5 s here, and a verdict into noise. One thread has no barrier.
    """
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
    """Run a load on ``cpus`` only (empty: wherever the scheduler likes), then restore.

    A one-thread load that the scheduler moves between cores meets cold caches and a cold TLB on
    each move, and on a virtual machine an idle core's wake-up on top. Pinned to one core it is not
    moved: on this project's 2-core machine, three quiet default runs pinned gave ``load_parameters``
    an IQR/median of 7.3%, 0.9% and 1.0%, against 24.6%, 3.9% and 2.3% unpinned, runs alternating.
    """
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
    """``--cpus``: ``auto`` (one core, the last this process may use, for a one-thread load; no pinning
    for more threads), ``any`` (no pinning) or a list such as ``1`` or ``0,2``; one-line error otherwise.

    The last core, because the benchmark's own process and the interrupts a system routes to its first
    core tend to run on core 0.
    """
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if choice == "any" or not allowed:
        return ()
    if choice == "auto":
        return (allowed[-1],) if threads == 1 else ()
    try:
        cpus = cpu_numbers(choice)
    except ValueError:
        raise OmniLoaderError(f"--cpus {choice}: give auto, any, or CPU numbers such as 1 or 0,2") from None
    outside = [c for c in cpus if c not in allowed]
    if outside:
        raise OmniLoaderError(f"--cpus {choice}: this process may use CPUs {', '.join(map(str, allowed))}, "
                              f"not {', '.join(map(str, outside))}")
    return cpus


def cpu_numbers(text: str) -> tuple[int, ...]:
    """``"2,0,2"`` -> ``(0, 2)``: each CPU once, in order; ValueError for anything but numbers."""
    return tuple(sorted({int(part) for part in text.split(",")}))


def describe_cpus(cpus: tuple[int, ...] | list[int] | None) -> str:
    """The environment table's words for a load's CPUs."""
    if not cpus:
        return "any (not pinned)"
    return f"{', '.join(map(str, cpus))} (pinned)"
