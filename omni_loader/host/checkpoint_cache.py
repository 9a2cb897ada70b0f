"""The checkpoint's page-cache condition around each load: measured before every run, made cold on demand.

A load's reading phases take what the storage gives when the checkpoint is not in the page cache, and what
copying gives when it is. So before every load, outside its timed phases, the worker measures which share of
the bytes the load will read is resident (:func:`checkpoint_residency`: each shard's header and ``token2wav.``
tensor ranges, and all of ``spk_dict.pt``); with ``--cache cold`` it first evicts those files
(:func:`prepare_checkpoint`), and the measurement says whether the eviction took. A warm run below
:data:`WARM_RESIDENT`, or a cold one above :data:`COLD_RESIDENT`, is named in the report. No torch here.
"""

from __future__ import annotations

import json
import os
import statistics
import struct
from pathlib import Path
from typing import Any

from .pagecache import evict, read_seconds, resident_bytes, resident_fraction

WARM_RESIDENT = 0.99  # a warm run found at least this share of the checkpoint's bytes resident
COLD_RESIDENT = 0.05  # a cold run found at most this share resident (its eviction took)
CACHE_KEY = "checkpoint_cache"  # the load benchmark record's field (metadata.json)
CHECKPOINT_PREFIX = "token2wav."  # Token2Wav's tensors in the checkpoint (token2wav.model re-exports it)


def safetensors_ranges(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """The byte ranges ``[start, end)`` a reader of the Token2Wav tensors reads of a safetensors file: the header
    and each such tensor's data (the whole file when the header cannot be read)."""
    size = os.path.getsize(path)
    try:
        with open(path, "rb", buffering=0) as fh:
            os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: read the header's pages only
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(length)) if 0 < length <= size - 8 else None
    except (OSError, ValueError, struct.error):
        header = None
    if not isinstance(header, dict):
        return [(0, size)]
    base = 8 + length
    ranges = [(0, base)]
    for key, entry in header.items():
        offsets = entry.get("data_offsets") if isinstance(entry, dict) else None
        if key.startswith(CHECKPOINT_PREFIX) and isinstance(offsets, list) and len(offsets) == 2:
            ranges.append((base + int(offsets[0]), base + int(offsets[1])))
    return ranges


def checkpoint_files(snapshot: Any) -> dict[str, list[tuple[int, int]] | None]:
    """The files a load of ``snapshot`` reads, by name, with the byte ranges it reads of each (None: whole)."""
    files: dict[str, list[tuple[int, int]] | None] = {
        shard: safetensors_ranges(Path(snapshot.root) / shard) for shard in snapshot.shards}
    files[Path(snapshot.spk_dict_path).name] = None
    return files


def checkpoint_residency(snapshot: Any, files: dict[str, list[tuple[int, int]] | None] | None = None) -> dict[str, Any]:
    """What share of the bytes a load of ``snapshot`` reads is in the page cache now: ``resident`` (byte-weighted;
    None when it cannot be told), per file ``files`` (fraction) and ``bytes``. ``files``: :func:`checkpoint_files`,
    read before an eviction (reading a header reads its pages back)."""
    fractions: dict[str, float | None] = {}
    sizes: dict[str, int] = {}
    resident = total = 0
    for name, ranges in (files or checkpoint_files(snapshot)).items():
        try:
            have, need = resident_bytes(Path(snapshot.root) / name, ranges)
        except OSError:
            fractions[name] = None
            continue
        fractions[name], sizes[name] = (have / need if need else None), need
        resident, total = resident + have, total + need
    known = total and all(f is not None for f in fractions.values())
    return {"resident": resident / total if known else None, "files": fractions, "bytes": sizes}


def prepare_checkpoint(snapshot: Any, condition: str) -> dict[str, Any]:
    """Before a load: with ``cold``, evict the files a load of ``snapshot`` reads; then measure their residency
    (:func:`checkpoint_residency`), with ``condition`` and whether each eviction was asked for."""
    errors, files = [], checkpoint_files(snapshot)  # the shards' headers read first: an eviction comes after
    if condition == "cold":
        for name in files:
            try:
                evict(Path(snapshot.root) / name)
            except OSError as exc:
                errors.append(f"{name}: {exc.strerror or exc}")
    return {**checkpoint_residency(snapshot, files), "condition": condition,
            **({"evict_errors": errors} if errors else {})}


def as_condition(condition: str, resident: float | None) -> bool | None:
    """Whether a run that found ``resident`` of its checkpoint loaded under ``condition`` (None: not measured)."""
    if resident is None or resident != resident:  # NaN: a row that recorded none
        return None
    return resident >= WARM_RESIDENT if condition != "cold" else resident <= COLD_RESIDENT


def storage_throughput(snapshot: Any) -> dict[str, Any]:
    """The storage's read throughput, measured once: the largest file a load reads, evicted, then read whole (and
    resident afterwards). ``resident_before``: what the eviction left (tmpfs, another's mapping: the page cache)."""
    files = checkpoint_files(snapshot)
    name = max(files, key=lambda n: os.path.getsize(Path(snapshot.root) / n))
    path = Path(snapshot.root) / name
    try:
        evict(path)
        before = resident_fraction(path)
        nbytes, seconds = read_seconds(path)
    except OSError as exc:
        return {"file": name, "error": str(exc.strerror or exc)}
    return {"file": name, "bytes": nbytes, "seconds": seconds, "resident_before": before,
            "bytes_per_second": nbytes / seconds if seconds > 0 else None}


def recorded_run(saved: dict[str, Any] | None, run_id: int, warmup: bool, result: dict[str, Any]) -> dict[str, Any]:
    """The record's ``checkpoint_cache`` field with one more run's residency (``result``: the worker's dict), and
    the summary of the measured runs so far: min, median and max residency, and the runs that did not load under
    the condition."""
    record = dict(saved or {})
    measured = result.get("checkpoint_residency")
    if not isinstance(measured, dict):
        return record
    runs = dict(record.get("runs") or {})
    runs[str(run_id)] = {"resident": measured.get("resident"), "warmup": warmup, "files": measured.get("files"),
                         **({"evict_errors": measured["evict_errors"]} if measured.get("evict_errors") else {})}
    condition = measured.get("condition") or record.get("condition") or "warm"
    values = {int(k): r.get("resident") for k, r in runs.items() if not r.get("warmup")}
    known = [v for v in values.values() if v is not None]
    off = sorted(k for k, v in values.items() if as_condition(condition, v) is False)
    summary = {"measured_runs": len(values), "min": min(known, default=None), "max": max(known, default=None),
               "median": statistics.median(known) if known else None, "not_" + condition: off}
    record.update(condition=condition, bytes=measured.get("bytes"), runs=runs, summary=summary)
    return record
