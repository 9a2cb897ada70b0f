"""How a profiling run is set up: which tools, which variants, and the settings they run with
(:class:`ProfileSettings`, checked here, one line naming the wrong option). This module imports neither torch
nor pandas: the command line's parser reads its defaults from here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import OmniLoaderError
from ..names import VARIANTS

TOOLS = ("cprofile", "py-spy", "torch")
VARIANT_CHOICES = (*VARIANTS, "both")
PY_SPY_ENV = "OMNI_LOADER_PY_SPY"
DEFAULT_RATE = 250
# py-spy checks no --rate: at 0 it never samples, and it weighs every sample 1/rate s however long it took, so
# far above 10 kHz every time comes out too small. The bounds its samples can be trusted within:
MIN_RATE, MAX_RATE = 1, 10_000
RATE_MEANING = (f" samples per second (py-spy never starts sampling at 0, and above {MAX_RATE:,} it cannot take "
                "samples as fast as it counts them: every time comes out too small)")
RATE_LIMITS = f"from {MIN_RATE} to {MAX_RATE:,}{RATE_MEANING}"
DEFAULT_TOP = 30
MAX_AUTO_REPEAT = 50
SAMPLES_WANTED = 250  # auto repeat aims at this many py-spy samples inside the loads


@dataclass(frozen=True)
class ProfileSettings:
    """How the profilers run (the load itself is set by a ``LoadOptions``): table rows (``top``), py-spy's
    ``rate``, ``native`` frames, loads per worker (``repeat``; None: about :data:`SAMPLES_WANTED` samples), its
    executable (``py_spy``; None: looked up), ``py_spy_svg`` (py-spy's own SVG), unprofiled ``warmup`` loads and
    ``reference_runs`` (unprofiled runs per variant whose median run every share comes from)."""

    top: int = DEFAULT_TOP
    rate: int = DEFAULT_RATE
    native: bool = False
    repeat: int | None = None
    py_spy: str | None = None
    py_spy_svg: bool = False
    warmup: int = 1
    reference_runs: int = 3

    def __post_init__(self) -> None:
        if self.top < 1:
            raise OmniLoaderError(f"--top must be at least 1, not {self.top}")
        if not MIN_RATE <= self.rate <= MAX_RATE:
            raise OmniLoaderError(f"--rate {self.rate}: must be a whole number {RATE_LIMITS}")
        if self.repeat is not None and self.repeat < 1:
            raise OmniLoaderError(f"--repeat must be at least 1, not {self.repeat}")
        if self.reference_runs < 1:
            raise OmniLoaderError(f"--reference-runs must be at least 1, not {self.reference_runs}")
        if self.warmup < 0:
            raise OmniLoaderError(f"--warmup must be 0 or more, not {self.warmup}")
        if self.py_spy is not None:
            object.__setattr__(self, "py_spy", os.fspath(self.py_spy))

    def replace(self, **changes: Any) -> ProfileSettings:
        """A copy with ``changes`` applied (``None`` values are ignored: "not given")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def repeat_for(self, load_seconds: float) -> int:
        """Loads per py-spy worker: ``repeat`` when given, else :func:`auto_repeat` for this load."""
        return self.repeat or auto_repeat(load_seconds, self.rate)


SETTING_NAMES = tuple(f.name for f in fields(ProfileSettings))


def auto_repeat(load_seconds: float, rate: int) -> int:
    """Loads per py-spy worker so that about ``SAMPLES_WANTED`` samples land inside the loads."""
    if load_seconds <= 0:
        return 1
    return max(1, min(MAX_AUTO_REPEAT, math.ceil(SAMPLES_WANTED / rate / load_seconds)))


def resolve_tools(tools: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"all"``/None -> every tool; otherwise the named tools, checked, in the canonical order."""
    names = [tools] if isinstance(tools, str) else list(tools or ())
    if not names or "all" in names:
        return TOOLS
    unknown = [t for t in names if t not in TOOLS]
    if unknown:
        raise OmniLoaderError(f"unknown profiling tool {unknown[0]!r}; choose from {', '.join(TOOLS)} or all")
    return tuple(t for t in TOOLS if t in names)


def resolve_variants(variants: str | Iterable[str]) -> tuple[str, ...]:
    """``"both"`` -> baseline and optimized; otherwise the named variants, checked."""
    names = [variants] if isinstance(variants, str) else list(variants)
    if "both" in names:
        return VARIANTS
    bad = next((v for v in names if v not in VARIANTS), None if names else "(none)")
    if bad is not None:
        raise OmniLoaderError(f"unknown variant {bad!r}; choose from {', '.join(VARIANT_CHOICES)}")
    return tuple(dict.fromkeys(names))
