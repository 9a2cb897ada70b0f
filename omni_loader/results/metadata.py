"""The environment record every result carries: what ran, where, with which versions.

The fields a reviewer asked the PR for, collected once per benchmark and stored in ``metadata.json``.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import __version__
from ..host.machine import machine_profile
from ..host.requirements import lock_record

REPO_ROOT = Path(__file__).resolve().parents[2]  # omni_loader/results/metadata.py


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The kit's own commit (with ``-dirty`` when the tree has local changes), or None outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=10)
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def software_versions() -> dict[str, Any]:
    import torch
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "rocm_hip": torch.version.hip,
        "cuda": torch.version.cuda,
        "kit_version": __version__,
        "kit_commit": git_commit(),
        "lock": lock_record(),  # the exact environment the kit was installed from, and how this one differs
        "vllm_omni": installed_vllm_omni(),
    }


def installed_vllm_omni() -> dict[str, Any] | None:
    """The vLLM-Omni installed beside the kit and its discovery rule (read, never imported), or None."""
    import importlib.util

    if importlib.util.find_spec("vllm_omni") is None:
        return None
    from ..errors import OmniLoaderError
    from ..token2wav.release import read_release

    try:
        release = read_release()
    except OmniLoaderError as exc:
        return {"version": None, "error": str(exc)}
    return {"version": release.version, "file": str(release.file), "line": release.line, "rule": release.rule}


def environment(device: str = "cpu") -> dict[str, Any]:
    """Machine and software, including the GPU's name and memory when ``device`` is one."""
    from ..host.devices import describe_device, resolve_device

    info: dict[str, Any] = {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": _total_memory(),
    }
    info.update(software_versions())
    info.update(describe_device(resolve_device(device)))
    info["machine"] = machine_profile()  # virtualisation, free page reporting, THP, governor: what makes it noisy
    return info


def command_line() -> str:
    """This process's command as the user would type it again: ``python -m omni_loader …`` reads ``omni-loader …``."""
    program = Path(sys.argv[0]).name
    return shlex.join(["omni-loader" if program in ("__main__.py", "-c") else program, *sys.argv[1:]])


def stamped(name: str) -> str:
    """``name-YYYYmmdd-HHMMSS``: how a results directory made without ``--out`` is named (CLI and notebooks)."""
    return f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def now_iso(precise: bool = False) -> str:
    """UTC wall-clock time; ``precise`` keeps milliseconds (per-run stamps, to plot drift by run)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds" if precise else "seconds")


def _total_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
