"""Which of a file's pages are in the page cache, dropping them, and how fast the storage reads.

Why: a warm load (the checkpoint in the page cache, the PR's condition) is bound by copying, a cold one by the
storage, seconds apart; which one a run was is a control, measured before every load without root.
:func:`resident_bytes` maps the file read-only (``mmap(2)`` through ctypes: Python's ``mmap`` gives no address
for a read-only mapping) and asks ``mincore(2)``: mapping reads nothing, so the measurement does not warm what it
measures. :func:`evict` asks ``posix_fadvise(POSIX_FADV_DONTNEED)``; pages another process maps, and tmpfs's,
stay, which is why a cold run measures residency after evicting.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import time
from collections.abc import Iterable
from contextlib import suppress
from functools import lru_cache

_LOW_BIT = bytes(i & 1 for i in range(256))  # mincore's vector: bit 0 of each byte says "resident"


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)  # the process's own symbols, libc's among them (not ldconfig's)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    return libc


def page_size() -> int:
    return mmap.PAGESIZE


def resident_pages(path: str | os.PathLike[str]) -> bytes:
    """One byte per page of ``path``: 1 where the page is in the page cache, 0 where not (empty: an empty file).
    Raises OSError when the file cannot be opened, mapped or asked."""
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            err = ctypes.get_errno()
            raise OSError(err, f"mmap: {os.strerror(err)}", str(path))
        try:
            vec = ctypes.create_string_buffer((size + page_size() - 1) // page_size())
            if libc.mincore(address, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore: {os.strerror(err)}", str(path))
            return vec.raw.translate(_LOW_BIT)
        finally:
            libc.munmap(address, size)
    finally:
        os.close(fd)


def resident_bytes(path: str | os.PathLike[str], ranges: Iterable[tuple[int, int]] | None = None) -> tuple[int, int]:
    """``(resident, total)`` bytes of ``path`` (of its byte ``ranges`` ``[start, end)`` when given: what a reader
    of part of the file needs), counted by whole pages; ``(0, 0)`` for an empty file or empty ranges."""
    pages, size = resident_pages(path), page_size()
    if ranges is None:
        length = os.path.getsize(path)
        return min(pages.count(1) * size, length), length
    marked = bytearray(len(pages))
    for start, end in ranges:
        first, last = max(0, start) // size, min(len(pages), (end + size - 1) // size)
        marked[first:last] = b"\x01" * max(0, last - first)
    needed = marked.count(1)
    if not needed:
        return 0, 0
    both = int.from_bytes(marked, "little") & int.from_bytes(pages, "little")  # bytes of 0 or 1: one bit each
    return both.bit_count() * size, needed * size


def resident_fraction(path: str | os.PathLike[str], ranges: Iterable[tuple[int, int]] | None = None) -> float | None:
    """The fraction of ``path``'s pages (of those under ``ranges``) in the page cache; None for no bytes."""
    resident, total = resident_bytes(path, ranges)
    return resident / total if total else None


def evict(path: str | os.PathLike[str]) -> None:
    """Ask the kernel to drop ``path``'s pages from the page cache (written back first); whether it did is for
    :func:`resident_fraction` to say."""
    fd = os.open(path, os.O_RDONLY)
    try:
        with suppress(OSError):
            os.fdatasync(fd)  # a freshly written file's dirty pages are not dropped until written back
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_seconds(path: str | os.PathLike[str]) -> tuple[int, float]:
    """Read ``path`` once, whole, in 8 MiB reads: ``(bytes, seconds)``."""
    view = memoryview(bytearray(8 << 20))
    total = 0
    with open(path, "rb", buffering=0) as fh:
        start = time.perf_counter()
        while n := fh.readinto(view):
            total += n
        return total, time.perf_counter() - start
