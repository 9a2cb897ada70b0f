"""Which pages of a tensor are resident: where a CPU load's first touches have (not yet) landed.

Freshly allocated memory is only address space until it is written: the first write of each
4 KiB page is a page fault in which the kernel finds and zeroes a page. Whether a model's
parameters are resident before loading starts decides whether ``load_parameters`` pays those
faults, so the kit can look, on Linux, through ``/proc/self/pagemap`` (bit 63 of each page's
entry: present in RAM). Readable without privileges; the page frame numbers, which need them,
are not used.
"""

from __future__ import annotations

import os
import struct
from functools import lru_cache

import torch

_ENTRY = struct.Struct("<Q")
_PRESENT = 1 << 63


def page_size() -> int:
    return os.sysconf("SC_PAGE_SIZE")


def resident_fraction(tensor: torch.Tensor) -> float | None:
    """Fraction of the pages under ``tensor``'s bytes that are resident, or None where it cannot be
    told (not on the CPU, empty, or no ``/proc/self/pagemap``)."""
    if tensor.device.type != "cpu" or tensor.numel() == 0:
        return None
    size = page_size()
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    first, last = start // size, (end - 1) // size
    try:
        with open("/proc/self/pagemap", "rb") as fh:
            fh.seek(first * _ENTRY.size)
            raw = fh.read((last - first + 1) * _ENTRY.size)
    except OSError:
        return None
    entries = [e for (e,) in _ENTRY.iter_unpack(raw)]
    return sum(1 for e in entries if e & _PRESENT) / len(entries) if entries else None


def parameter_residency(model: torch.nn.Module, min_bytes: int = 1 << 20) -> dict[str, float | None]:
    """``{name: resident fraction}`` of every parameter of at least ``min_bytes``.

    Meaningful in a fresh process: memory freed by an earlier model may be handed out again while
    still resident, which is one reason each measured load gets a process of its own.
    """
    return {name: resident_fraction(p) for name, p in model.named_parameters()
            if p.numel() * p.element_size() >= min_bytes}


def backing_file(tensor: torch.Tensor) -> str | None:
    """The file a CPU tensor's memory is mapped from (``/proc/self/maps``), or None for anonymous
    memory (an ordinary allocation) or where it cannot be told. A tensor that safetensors handed out
    and that was assigned, not copied, into a model is backed by its shard file."""
    if tensor.device.type != "cpu" or tensor.numel() == 0:
        return None
    address = tensor.data_ptr()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                fields = line.split(maxsplit=5)
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if start <= address < end:
                    path = fields[5].strip() if len(fields) == 6 else ""
                    return path if path.startswith("/") else None
    except OSError:
        return None
    return None


@lru_cache(maxsize=1)
def first_touch_seconds(nbytes: int = 64 << 20, trials: int = 5) -> float:
    """What one minor page fault costs on this machine now, measured once per process (every sentence
    that prices faults then quotes the same figure).

    Each trial writes ``nbytes`` of fresh memory twice: the first write pays a fault per page, the
    second does not, so their difference per page is the fault's price. One trial can come out at 0
    or below (the second write preempted); the median of ``trials`` rarely does, and where it still
    does, the first write per page is used instead: an upper bound, never 0. 64 MiB is above glibc's
    largest mmap threshold, so each block is fresh address space.
    """
    import statistics
    import time

    pages = nbytes // page_size()
    firsts, seconds = [], []
    for _ in range(trials):
        block = torch.empty(nbytes, dtype=torch.uint8)
        start = time.perf_counter()
        block.fill_(1)
        firsts.append(time.perf_counter() - start)
        start = time.perf_counter()
        block.fill_(2)
        seconds.append(time.perf_counter() - start)
        del block
    difference = statistics.median(f - s for f, s in zip(firsts, seconds))
    return (difference if difference > 0 else statistics.median(firsts)) / pages


def fault_share(minor_faults: int, seconds: float, per_fault: float) -> float:
    """The share of a phase's time its minor page faults account for, at ``per_fault`` seconds each."""
    return min(1.0, minor_faults * per_fault / seconds) if seconds > 0 else 0.0
