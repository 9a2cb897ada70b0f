"""Device choice, synchronisation and memory figures.

A ROCm GPU is ``torch.cuda`` in PyTorch (``torch.version.hip`` tells it apart), so one path serves both. GPU
work is asynchronous, so :func:`synchronize` is called at every phase edge: otherwise a clock measures how
fast kernels were queued, not run.
"""

from __future__ import annotations

import os
import platform
import resource
import sys

import torch

from ..errors import DeviceError
from .machine import gpus

DEVICE_CHOICES = ("auto", "cpu", "cuda", "meta")
AUTO = "auto"


def resolve_device(name: str | torch.device) -> torch.device:
    """Turn a ``--device`` value into a ``torch.device``, or explain in one line why not. ``auto`` resolves here,
    once, to the GPU torch sees, else the CPU: what runs downstream records the device, never the word ``auto``."""
    name = str(name).strip()
    if name == AUTO:
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    kind = name.split(":", 1)[0]
    if kind not in DEVICE_CHOICES or kind == AUTO:
        raise DeviceError(f"--device {name!r} is not one of {', '.join(DEVICE_CHOICES)} (ROCm GPUs are 'cuda')")
    if kind == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"--device {name} was asked for but no GPU is visible to torch {torch.__version__} "
                          "(torch.cuda.is_available() is False); use --device cpu")
    device = torch.device(name)
    if kind == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise DeviceError(f"--device {name}: only {torch.cuda.device_count()} GPU(s) visible")
    return device


def device_banner(name: str | torch.device) -> str:
    """One line naming the device a run will use and why: printed at the top of each notebook."""
    device = resolve_device(name)
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        backend = f"ROCm {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}"
        what = f"{device} ({props.name}, {props.total_memory / 2**30:,.0f} GiB, {backend})"
    else:
        what = f"{device} ({os.cpu_count()} cores; torch {torch.__version__})"
    why = ""
    if str(name).strip() == AUTO:
        why = " — chosen by device='auto': " + ("torch sees a GPU" if device.type == "cuda" else
                                               "torch sees no GPU (torch.cuda.is_available() is False)")
        unseen = gpus() if device.type == "cpu" else []
        if unseen:  # the machine has one that this torch cannot use: said before a long run, not after
            build = "it is a CPU build" if gpu_backend() is None else f"a {gpu_backend()} build that sees none"
            names = ", ".join(f"{g['vendor']} {g['name']}" for g in unseen)
            why += f", though this machine has {names}: {build}; `omni-loader doctor` says what to fix"
    return f"device: {what}{why}"


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work so that a clock read afterwards means what it says."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gpu_backend() -> str | None:
    """'rocm', 'cuda' or None for a CPU-only torch build."""
    return "rocm" if torch.version.hip else "cuda" if torch.version.cuda else None


def peak_rss_bytes() -> int:
    """Peak resident set size of this process's own address space so far: ``VmHWM`` from /proc, since Linux keeps
    ``ru_maxrss`` across exec (a worker would report a large parent's peak); ``ru_maxrss`` where /proc is missing.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def current_rss_bytes() -> int:
    """Resident set size now, from /proc where available (falls back to the peak)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return peak_rss_bytes()


def reset_device_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def device_peak_bytes(device: torch.device) -> int | None:
    """Peak bytes allocated by torch on the GPU since the last reset, or None off-GPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return None


def describe_device(device: torch.device) -> dict[str, object]:
    """Name and memory of the device, for the metadata record."""
    info: dict[str, object] = {"device": str(device), "gpu_backend": gpu_backend()}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(device_name=props.name, device_memory_bytes=int(props.total_memory))
    else:
        info.update(device_name=platform.processor() or platform.machine(), device_memory_bytes=None)
    return info
