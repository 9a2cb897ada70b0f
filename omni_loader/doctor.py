"""``omni-loader doctor``: what a run here will use and what may bend it, on one screen, before a long run.

Why: on a GPU machine the first surprise comes after minutes (a CPU build of torch that never sees the GPU, a
transformers outside vLLM-Omni's range, py-spy not allowed to sample, a disk too small for the snapshot). Each
check reads files and package metadata only: nothing here imports torch or builds a model, so the answer comes
in well under two seconds. Every check is a :class:`Check` (what, what was found, and the fix when it is a
problem); :func:`diagnose` lists them in the order a user should fix them, and the last line says which first.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import OmniLoaderError
from .host import requirements
from .host.machine import free_page_reporting, gpus, virtualisation
from .names import DATA_DIR, cache_dir

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Check:
    """One line of the doctor's screen: ``fix`` is set when the check found something to change first."""

    what: str
    found: str
    fix: str = ""
    warn: str = ""  # bends the figures without stopping a run


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_build() -> dict[str, str | None]:
    """torch's version and build (CPU / CUDA x.y / ROCm with its HIP version), read from ``torch/version.py``."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {"version": None, "cuda": None, "hip": None}
    text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    values: dict[str, Any] = {}
    for node in ast.parse(text).body:
        target = getattr(node, "target", None) or (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and isinstance(getattr(node, "value", None), ast.Constant):
            values[target.id] = node.value.value
    return {"version": values.get("__version__") or _version("torch"), "cuda": values.get("cuda"),
            "hip": values.get("hip")}


def _gib(n: float | None) -> str:
    return f"{n / 2**30:,.1f} GiB" if n else "memory not shown"


def _torch_checks() -> list[Check]:
    build, cards = torch_build(), gpus()
    if build["version"] is None:
        return [Check("torch", "not installed", fix=_range_fix("torch"))]
    kind = f"ROCm (HIP {build['hip']})" if build["hip"] else f"CUDA {build['cuda']}" if build["cuda"] else "CPU"
    checks = [Check("torch", f"{build['version']}, {kind} build", fix=_range_fix("torch"))]
    vendors = {c["vendor"] for c in cards}
    listed = "; ".join(f"{c['vendor']} {c['name']} ({_gib(c['memory_bytes'])})" for c in cards) or "none"
    # the first vendor whose GPU this torch cannot use, and the build that can
    unusable = next(((v, b) for v, key, b in (("AMD", "hip", "ROCm"), ("NVIDIA", "cuda", "CUDA"))
                     if v in vendors and not build[key]), None)
    fix = (f"torch {build['version']} is a {kind} build: it cannot use this machine's {unusable[0]} GPU; install a "
           f"{unusable[1]} build of torch, then set up with `make reproduce PYTHON=/path/to/that/python` (docs/gpu.md)"
           if unusable else "")
    hidden = {k: os.environ[k] for k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
              if k in os.environ}
    warn = f"set: {', '.join(f'{k}={v}' for k, v in hidden.items())}" if hidden else ""
    where = "device='auto' will use the GPU" if cards and not fix else "runs use the CPU"
    checks.append(Check("GPUs", f"{listed}; {where}", fix=fix, warn=warn))
    return checks


def _range_fix(name: str) -> str:
    return next((p.line() for p in requirements.problems(names=(name,))), "")


def _transformers_check() -> Check:
    have = _version("transformers")
    if have is None:
        return Check("transformers", "not installed", fix=_range_fix("transformers"))
    fix, warn = _range_fix("transformers"), ""
    omni = [r for r in (importlib.metadata.requires("vllm-omni") or []) if r.startswith("transformers")] \
        if _version("vllm-omni") else []
    if omni and (theirs := requirements.outside_range(omni[0], have)):
        warn = f"outside the installed vLLM-Omni's own range {theirs}"
    ours = next((requirements.spec_text(r.specifier) for r in requirements.kit_requirements()
                 if requirements.canonical(r.name) == "transformers"), "")
    return Check("transformers", f"{have}; omni-loader's range, vLLM-Omni's own: {ours}", fix=fix, warn=warn)


def _vllm_omni_check() -> Check:
    have = _version("vllm-omni")
    if have is None and importlib.util.find_spec("vllm_omni") is None:
        return Check("vLLM-Omni", "not installed (the kit's baseline and optimized stand for 0.28.0 and 0.30.0)")
    from .token2wav.release import read_release

    try:
        release = read_release()
    except OmniLoaderError as exc:
        return Check("vLLM-Omni", f"{have}: its Token2Wav's discovery rule could not be read ({exc})")
    from .lint.source_audit import scan_sources

    last = release.line + len(release.source.splitlines()) - 1
    found = [f for f in scan_sources([release.file]).findings if release.line <= f.line <= last]
    where = f"the audit flags line {found[0].line}" if found else "the audit flags nothing in it"
    return Check("vLLM-Omni", f"{release.version}: its Token2Wav's find_all_registers ({release.file.name}:"
                 f"{release.line}) is the {release.rule} rule; {where}; `--variants …,installed` runs it")


def _pyspy_check() -> Check:
    binary = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if binary is None:
        return Check("py-spy", "not installed", warn="`omni-loader profile` runs without its sampled flamegraph")
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = ""
    if os.geteuid() == 0 or scope in ("", "0"):
        who = "root" if os.geteuid() == 0 else f"ptrace_scope {scope or 'absent'}"
        return Check("py-spy", f"{binary}; {who}: may sample the kit's workers")
    return Check("py-spy", f"{binary}; ptrace_scope {scope}", warn="py-spy may not attach to the kit's workers: run "
                 "as root, or `sudo sysctl kernel.yama.ptrace_scope=0`")


def _threads_check() -> Check:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    set_ = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}
    found = f"{cores} cores usable; " + (", ".join(f"{k}={v}" for k, v in set_.items()) or "OMP_NUM_THREADS unset")
    warn = "OMP_NUM_THREADS=1: copies and casts on the CPU run on one thread" if set_.get("OMP_NUM_THREADS") == "1" \
        else ""
    return Check("threads", found, warn=warn)


def snapshot_bytes() -> int:
    """What the embedded full-size snapshot's tensors take on disk, from the kit's own tensor list."""
    tensors = json.loads((DATA_DIR / "token2wav-full-tensors.json").read_text())["tensors"]
    return sum(DTYPE_BYTES[dtype] * math.prod(shape) for _, shape, dtype in tensors)


def _disk_check() -> Check:
    root = cache_dir()
    snapshot = root / "synthetic" / "full-seed0"
    if (snapshot / "model.safetensors.index.json").is_file():
        return Check("snapshot", f"the full-size synthetic snapshot is made: {snapshot}")
    probe = next((p for p in (root, *root.parents) if p.exists()), Path("/"))
    free, need = shutil.disk_usage(probe).free, snapshot_bytes()
    found = f"not made yet: {_gib(need)} to write under {root}, {_gib(free)} free there"
    fix = f"free {_gib(need - free)} on {probe}, or set OMNI_LOADER_CACHE to a larger disk" if free < need else ""
    return Check("snapshot", found, fix=fix)


def diagnose() -> list[Check]:
    """Every check, in the order a user fixes things: the Python and its packages, the GPU, then the rest."""
    lock = requirements.lock_record()
    own = requirements.own_environment()
    python = Check("Python", f"{platform.python_version()} at {sys.executable}"
                   + (f", layered over {own[0]}" if own else "")
                   + (f"; lock {lock['file']}: {'matches' if lock['matches'] else 'differs: ' + ', '.join(lock['differs'][:3])}"
                      if lock else ""))
    missing = [p for p in requirements.problems() if p.name not in ("torch", "transformers")]
    deps = Check("dependencies", "all installed, in range" if not missing else f"{len(missing)} to fix",
                 fix=missing[0].line() if missing else "")
    machine = Check("machine", f"{virtualisation() or 'not known'}; free page reporting {free_page_reporting() or 'not known'}",
                    warn="freed memory goes back to the host: a first touch costs a host fault whose price varies"
                    if (free_page_reporting() or "").startswith("on") else "")
    return [python, *_torch_checks(), _transformers_check(), deps, _vllm_omni_check(), _pyspy_check(),
            _threads_check(), machine, _disk_check()]


def verdict(checks: list[Check]) -> str:
    """The last line: ready, or the first thing to fix."""
    first = next((c for c in checks if c.fix), None)
    return f"fix first ({first.what}): {first.fix}" if first else "ready: nothing stands in the way of a run"


def render(checks: list[Check]) -> str:
    width = max(len(c.what) for c in checks)
    lines = []
    for c in checks:
        mark = "✗" if c.fix else "!" if c.warn else "✓"
        lines.append(f"{mark} {c.what:<{width}}  {c.found}")
        lines += [f"  {'':<{width}}  → {text}" for text in (c.fix, c.warn) if text]
    return "\n".join([*lines, verdict(checks)])


def as_json(checks: list[Check]) -> dict[str, Any]:
    return {"checks": [asdict(c) for c in checks], "ready": not any(c.fix for c in checks), "verdict": verdict(checks)}

