"""Which pages of a tensor are resident: where a CPU load's first touches have (not yet) landed.

Fresh memory is only address space until written: each page's first write is a fault in which the kernel finds
and zeroes a page, so whether parameters are resident decides whether ``load_parameters`` pays those faults.
Read, without privileges, from ``/proc/self/pagemap`` (bit 63 of each page's entry: present in RAM).
"""

from __future__ import annotations

import struct
from functools import lru_cache

import torch

from .pagecache import page_size

_ENTRY = struct.Struct("<Q")
_PRESENT = 1 << 63


def resident_fraction(tensor: torch.Tensor) -> float | None:
    """Fraction of the pages under ``tensor``'s bytes that are resident, or None where it cannot be told."""
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


def parameter_residency(model: torch.nn.Module) -> dict[str, float | None]:
    """``{name: resident fraction}`` of every parameter of at least 1 MiB; meaningful in a fresh process, as memory
    an earlier model freed may come back resident."""
    return {name: resident_fraction(p) for name, p in model.named_parameters()
            if p.numel() * p.element_size() >= 1 << 20}


def backing_file(tensor: torch.Tensor) -> str | None:
    """The file a CPU tensor's memory is mapped from (``/proc/self/maps``: an assigned safetensors tensor's shard),
    or None for anonymous memory or where it cannot be told."""
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
    """What one minor page fault costs on this machine now, measured once per process: the median over ``trials``
    of ``memset`` twice over ``nbytes`` of fresh small-page memory, the difference over the faults counted (not a
    tensor: in a long-lived kernel ``torch.empty`` can come back backed, 0.06 µs against 1.2 µs fresh)."""
    import ctypes
    import mmap
    import resource
    import statistics
    import time

    def faults() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt

    prices = []
    for _ in range(trials):
        block = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            block.madvise(mmap.MADV_NOHUGEPAGE)
        view = (ctypes.c_char * nbytes).from_buffer(block)
        address = ctypes.addressof(view)
        before, start = faults(), time.perf_counter()
        ctypes.memset(address, 1, nbytes)
        first, counted = time.perf_counter() - start, faults() - before
        start = time.perf_counter()
        ctypes.memset(address, 2, nbytes)
        second = time.perf_counter() - start
        del view
        block.close()
        prices.append((first - second if first > second else first) / max(counted, 1))
    return statistics.median(prices)


def fault_share(minor_faults: int, seconds: float, per_fault: float) -> float:
    """The share of a phase's time its minor page faults account for, at ``per_fault`` seconds each."""
    return min(1.0, minor_faults * per_fault / seconds) if seconds > 0 else 0.0
