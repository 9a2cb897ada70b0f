"""How a profiling run is set up: which tools, which variants, and the settings they run with
(:class:`ProfileSettings`, each declared once as the option that sets it, checked here, one line naming the wrong
option). This module imports neither torch nor pandas: the command line's parser is built from these fields.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import OmniLoaderError
from ..names import VARIANTS
from ..token2wav.options import flag, option

TOOLS = ("cprofile", "py-spy", "torch")
VARIANT_CHOICES = (*VARIANTS, "both")
PY_SPY_ENV = "OMNI_LOADER_PY_SPY"
PROFILE, DIFF = "profile", "diff"  # the mode an option is only for (a field's "only")
DEFAULT_RATE = 250
# py-spy checks no --rate: at 0 it never samples, and it weighs every sample 1/rate s however long it took, so
# far above 10 kHz every time comes out too small. The bounds its samples can be trusted within:
MIN_RATE, MAX_RATE = 1, 10_000
RATE_MEANING = (f" samples per second (py-spy never starts sampling at 0, and above {MAX_RATE:,} it cannot take "
                "samples as fast as it counts them: every time comes out too small)")
DEFAULT_TOP = 30
MAX_AUTO_REPEAT = 50
SAMPLES_WANTED = 250  # auto repeat aims at this many py-spy samples inside the loads


@dataclass(frozen=True)
class Bounds:
    """A whole-number setting's limits: ``low``, and ``high`` where the setting has one of its own (the command
    line caps the others); ``meaning`` says why, after the range."""

    low: int
    high: int | None = None
    meaning: str = ""

    def refusal(self, option_name: str, value: int) -> str | None:
        """The one line that refuses ``value``, or None when it is within the bounds."""
        if self.high is not None and not self.low <= value <= self.high:
            return f"{option_name} {value}: must be a whole number from {self.low:,} to {self.high:,}{self.meaning}"
        if value < self.low:
            return f"{option_name} must be {'0 or more' if self.low == 0 else f'at least {self.low}'}, not {value}"
        return None


def marked(f: Any, **marks: Any) -> Any:
    """The option field ``f`` with ``marks`` added to its metadata: ``only`` (the mode that alone takes it: the
    other refuses it when typed), ``bounds`` (its :class:`Bounds`)."""
    return field(default=f.default, default_factory=f.default_factory, metadata={**f.metadata, **marks})


@dataclass(frozen=True)
class ProfileSettings:
    """How the profilers run (the load itself is set by a ``LoadOptions``), each field the option of its name
    (``--py-spy-svg`` sets ``py_spy_svg``); ``repeat`` None: about :data:`SAMPLES_WANTED` samples, ``py_spy``
    None: looked up."""

    top: int = marked(option(DEFAULT_TOP, help=f"rows in the tables (default {DEFAULT_TOP})"), only=PROFILE,
                      bounds=Bounds(1))
    rate: int = marked(option(DEFAULT_RATE, help=f"py-spy samples per second, {MIN_RATE} to {MAX_RATE:,} (default "
                                                 f"{DEFAULT_RATE})"), bounds=Bounds(MIN_RATE, MAX_RATE, RATE_MEANING))
    native: bool = marked(option(False, help="py-spy: also record native (C/C++) frames"), only=PROFILE)
    repeat: int | None = marked(option(None, help=f"py-spy: loads per worker process (default: enough for "
                                                  f"~{SAMPLES_WANTED} samples, at most {MAX_AUTO_REPEAT})"),
                                only=PROFILE, bounds=Bounds(1))
    py_spy: str | None = option(None, help=f"py-spy executable (default ${PY_SPY_ENV}, this Python's bin directory, "
                                           "then PATH)")
    py_spy_svg: bool = marked(option(False, help="record flame.svg with a second py-spy run in its own interactive "
                                                 "format (default: draw it from the speedscope samples of the one "
                                                 "recording)"), only=PROFILE)
    warmup: int = marked(option(1, help="unprofiled loads before profiling, and warm-ups of the reference runs "
                                        "(default 1)"), bounds=Bounds(0))
    reference_runs: int = marked(option(3, help="unprofiled runs per variant, each in a fresh process, that the "
                                                "phase shares come from: the median run's (default 3)"),
                                 only=PROFILE, bounds=Bounds(1))

    def __post_init__(self) -> None:
        for f in fields(self):
            value, bounds = getattr(self, f.name), f.metadata.get("bounds")
            refusal = bounds.refusal(flag(f), value) if bounds and value is not None else None
            if refusal:
                raise OmniLoaderError(refusal)
        if self.py_spy is not None:
            object.__setattr__(self, "py_spy", os.fspath(self.py_spy))

    def replace(self, **changes: Any) -> ProfileSettings:
        """A copy with ``changes`` applied (``None`` values are ignored: "not given")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def repeat_for(self, load_seconds: float) -> int:
        """Loads per py-spy worker: ``repeat`` when given, else :func:`auto_repeat` for this load."""
        return self.repeat or auto_repeat(load_seconds, self.rate)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProfileSettings:
        """The settings among ``data`` (a flat spec's values, by name); other keys ignored."""
        return cls(**{k: data[k] for k in SETTING_NAMES if k in data})


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
