"""Loader variants: named combinations of implementations for the load path's two swappable steps.

``discovery``   ``fn(model) -> {name: buffer}``: the persistent buffers (``find_all_registers``)
``parameters``  ``fn(model, entries, snapshot, fused) -> {parameter name: shards loaded}``: put the
                checkpoint's ``(key, tensor)`` entries into the model's parameters

The PR's two variants differ only in ``discovery``; ``assign``, ``fastsafetensors`` and ``pinned`` (GPU only)
keep its fix and attack the parameters' bytes. A user's step is ``module:function`` or
``path/to/file.py:function``, imported in the worker process, so a variant travels as plain strings; a
vLLM-Omni release's own ``find_all_registers`` is ``installed:`` (the installed one, read without importing
it) or ``installed:/abs/path`` (:mod:`omni_loader.token2wav.release`).

On the command line: ``--variant NAME=discovery:REF[,parameters:REF]`` or ``--variant NAME=installed[:PATH]``;
a step not given is the optimized variant's.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError

STEPS = ("discovery", "parameters")
INSTALLED = "installed:"  # discovery by the installed vLLM-Omni's own find_all_registers; installed:PATH for another


@dataclass(frozen=True)
class Variant:
    """A loader variant: a name, a reference per step, and what it changes about memory."""

    name: str
    discovery: str = "builtin:optimized"
    parameters: str = "builtin:copy"
    memory: str = ""  # one sentence for the report; empty when nothing changes
    needs_gpu: bool = False
    # an installed: discovery's Release.to_dict(), read before any run so that metadata.json names what ran
    release: dict[str, Any] | None = field(default=None, compare=False)

    def step(self, which: str) -> Callable[..., Any]:
        """The callable behind a step, imported now (in the process that loads)."""
        return resolve_step(getattr(self, which), which)

    def __str__(self) -> str:
        """The variant as ``--variant`` takes it (``once=discovery:steps.py:find_once``), not its dataclass repr."""
        return variant_text(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """The variant as a spec records it (``custom_variants``); a release only when it names one."""
        return {k: v for k, v in self.__dict__.items() if k != "release" or v is not None}


BUILTIN_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("baseline", discovery="builtin:baseline"),
        Variant("optimized"),
        Variant("assign", parameters="builtin:assign",
                memory="parameters are the checkpoint's memory-mapped tensors where dtype and device allow: "
                       "they stay backed by the file mapping (pages shared with the page cache, read on first "
                       "use), and the memory written at construction is freed; the fused qkv_proj is a new "
                       "stacked tensor"),
        Variant("fastsafetensors", parameters="builtin:fastsafetensors",
                memory="fastsafetensors reads the shard files into one buffer on the device (no GPUDirect "
                       "Storage here: through host bounce buffers) and the parameters are views of it; the "
                       "memory written at construction is freed"),
        Variant("pinned", parameters="builtin:pinned", needs_gpu=True,
                memory="each host tensor is staged in pinned (page-locked) host memory before a non-blocking "
                       "copy to the GPU; pinned staging is freed after the load"),
        Variant("installed", discovery=INSTALLED),
    )
}


# Which vLLM-Omni releases the PR's two variants are, for the report and ``compare`` to quote, read from the wheels
# on PyPI (no 0.29): their ``qwen2_5_omni_token2wav.py`` differ only in ``find_all_registers``.
VARIANT_RELEASES: dict[str, dict[str, str]] = {
    "baseline": {
        "rule": "find_all_registers tests `name in self.state_dict()` for every named buffer "
                "(219 state_dict() calls for Qwen2.5-Omni)",
        "source": "be81443c, December 2025",
        "releases": "vLLM-Omni 0.28.0 and the earlier releases that ship find_all_registers",
    },
    "optimized": {
        "rule": "find_all_registers walks named_modules() once for _non_persistent_buffers_set and "
                "named_buffers() once; no state_dict() call",
        "source": "PR 7061",
        "releases": "vLLM-Omni 0.30.0, the first release with the fix",
    },
}


def resolve_step(ref: str, which: str = "step") -> Callable[..., Any]:
    """``builtin:NAME``, ``installed:[PATH]``, ``package.module:function`` or ``path/to/file.py:function`` -> the
    callable."""
    if is_installed(ref):
        if which != "discovery":
            raise OmniLoaderError(f"{which} step {ref!r}: a vLLM-Omni release gives only the discovery step")
        from .release import read_release

        return read_release(ref.partition(":")[2]).discovery()
    where, sep, attr = ref.rpartition(":")
    if not sep or not where or not attr:
        raise OmniLoaderError(f"{which} step {ref!r} is not MODULE:FUNCTION, FILE.py:FUNCTION or builtin:NAME")
    if where == "builtin":  # the built-in implementations, imported here: they need torch
        from .discovery import RULES
        from .steps import (load_parameters, load_parameters_assign, load_parameters_fastsafetensors,
                            load_parameters_pinned)

        steps = {"discovery": RULES,
                 "parameters": {"copy": load_parameters, "assign": load_parameters_assign,
                                "fastsafetensors": load_parameters_fastsafetensors,
                                "pinned": load_parameters_pinned}}[which]
        if attr not in steps:
            raise OmniLoaderError(f"{which} step {ref!r}: no built-in {attr!r} (built-ins: {', '.join(steps)})")
        return steps[attr]
    if where.endswith(".py"):
        module = _import_file(where)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise OmniLoaderError(f"step {ref!r}: cannot import {where} ({exc})") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise OmniLoaderError(f"{which} step {ref!r}: {where} has no function {attr!r}")
    return fn


def _import_file(path: str) -> Any:
    file = Path(path)
    if not file.is_file():
        raise OmniLoaderError(f"step file not found: {file}")
    spec = importlib.util.spec_from_file_location(f"omni_loader_user_step_{abs(hash(str(file.resolve())))}", file)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    except Exception as exc:
        raise OmniLoaderError(f"step file {file} failed to import: {type(exc).__name__}: {exc}") from None
    return module


def parse_variant(text: str) -> Variant:
    """``NAME=discovery:REF[,parameters:REF]`` or ``NAME=installed[:PATH][,parameters:REF]`` -> a :class:`Variant`
    (steps not given: optimized's). An installed release is read now: a missing one is refused here, and its
    version, file and line travel with the variant."""
    name, sep, body = text.partition("=")
    name = name.strip()
    if not sep or not name or not body:
        raise OmniLoaderError(f"--variant {text!r} is not NAME=STEP:REF[,STEP:REF] (steps: {', '.join(STEPS)})")
    if name in BUILTIN_VARIANTS:
        raise OmniLoaderError(f"--variant {name!r}: that name is a built-in variant; choose another")
    steps: dict[str, str] = {}
    for part in map(str.strip, body.split(",")):
        step, _, ref = ("discovery", "", part) if is_installed(part) else part.partition(":")
        if step not in STEPS or not ref:
            raise OmniLoaderError(f"--variant {text!r}: {part!r} is not STEP:REF with STEP one of "
                                  f"{', '.join(STEPS)}, or installed[:PATH]")
        if is_installed(ref):  # PATH made absolute: the worker may run elsewhere than the command's folder
            path = ref.partition(":")[2]
            ref = INSTALLED + (str(Path(path).expanduser().resolve()) if path else "")
        steps[step] = ref
    return with_release(Variant(name, **steps))


def is_installed(ref: str) -> bool:
    """Whether a discovery reference names a vLLM-Omni release (``installed``, ``installed:PATH``)."""
    return ref == "installed" or ref.startswith(INSTALLED)


def with_release(variant: Variant) -> Variant:
    """``variant`` with its release read (standard library only, fast), if its discovery names one; a release
    that is not there is one line naming the variant, before any run."""
    if not is_installed(variant.discovery) or variant.release is not None:
        return variant
    from .release import read_release

    try:
        release = read_release(variant.discovery.partition(":")[2])
    except OmniLoaderError as exc:
        raise OmniLoaderError(f"variant {variant.name}: {exc}") from None
    return replace(variant, release=release.to_dict())


def variant_text(variant: dict[str, Any]) -> str:
    """A variant (as :meth:`Variant.to_dict` gives it) as ``--variant`` takes it: :func:`parse_variant`'s inverse."""
    return f"{variant['name']}=" + ",".join(f"{step}:{variant[step]}" for step in STEPS if step in variant)


def resolve_variants(names: list[str] | tuple[str, ...],
                     custom: list[Variant] | tuple[Variant, ...] = ()) -> list[Variant]:
    """The variants to run, in order: built-in names or the names of ``custom`` ones."""
    known = {**BUILTIN_VARIANTS, **{v.name: v for v in custom}}
    out = []
    for name in names:
        if name not in known:
            raise OmniLoaderError(f"--variants: unknown variant {name!r} (known: {', '.join(known)})")
        out.append(with_release(known[name]))
    if len(out) < 2 or len({v.name for v in out}) != len(out):
        raise OmniLoaderError(f"--variants needs two or more different variants, not {','.join(names)}")
    return out


def variant_from(value: str | Variant | dict[str, Any]) -> Variant:
    """A built-in name, a Variant, or a Variant's dict (as stored in metadata.json) -> a Variant."""
    if isinstance(value, Variant):
        return value
    if isinstance(value, dict):
        return Variant(**value)
    if value not in BUILTIN_VARIANTS:
        raise OmniLoaderError(f"unknown variant {value!r} (built-ins: {', '.join(BUILTIN_VARIANTS)})")
    return BUILTIN_VARIANTS[value]


def refuse_off_gpu(variant: Variant, device: str, what: str = "this load") -> None:
    """The one check that a GPU-only variant (``needs_gpu``) runs on a GPU: the benchmark asks it before any run,
    the loader again for a caller that went straight to it."""
    if variant.needs_gpu and not str(device).startswith("cuda"):
        raise OmniLoaderError(f"variant {variant.name} needs a GPU (--device cuda); {what} is on {device}")
