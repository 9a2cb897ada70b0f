"""Named figures read from a server's log: ``Loading weights took 0.62 seconds`` -> ``weight_loading``, 0.62 s.

Why from the log: a real server (``vllm serve``) reports its own phases only there, and serve-ab
times servers it cannot instrument. A pattern is a regular expression whose first capture group
(or a group named ``value``) is the number; its unit is read after it (ms, s, seconds, min...)
and every figure is stored in seconds, so that a server's ``Buffer discovery took 1.5 ms`` and
the loader's own ``buffer_discovery`` phase are in one unit. The stage server
(:mod:`omni_loader.server`) logs the same lines as vLLM, so one set of patterns reads both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .errors import OmniLoaderError

# Figures read from server logs. The first capture group (or a group named ``value``) is the number;
# its unit is a group named ``unit`` if the pattern has one, else the word that follows the number
# in the log (ms, s, seconds, min, ...), else seconds. Every match counts: the first is recorded as
# NAME, later ones (e.g. one per vLLM-Omni stage) as NAME#2, NAME#3, ...
DEFAULT_PATTERNS: dict[str, str] = {
    # vLLM's default model loader, and stage-server
    "weight_loading": r"Loading weights took ([0-9.]+) seconds",
    # vLLM's model runner ("Model loading took 9.94 GiB [memory] and 12.3 seconds"), and stage-server
    "model_loading": r"Model loading took [0-9.]+ ?GiB(?: memory)? and ([0-9.]+) ?s",
    # vLLM's engine start-up after the weights (profile, KV cache, warm-up / CUDA graphs)
    "init_engine": r"init engine \(profile, create kv cache, warmup model\) took ([0-9.]+) seconds",
    # stage-server's buffer-discovery line
    "buffer_discovery": r"Buffer discovery took ([0-9.]+) ms",
}

_UNITS = {
    "ns": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "msecs": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
}
_UNIT_ALTERNATIVES = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))
_UNIT_AFTER = re.compile(r"\s*(" + _UNIT_ALTERNATIVES + r")(?!\w)", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def compile_patterns(patterns: Mapping[str, str | re.Pattern[str]]) -> dict[str, re.Pattern[str]]:
    """Check names and regular expressions; each needs a capture group (or one named ``value``)."""
    compiled: dict[str, re.Pattern[str]] = {}
    for name, pattern in patterns.items():
        if not _NAME.match(name):
            raise OmniLoaderError(f"log pattern name {name!r} must be letters, digits, '_', '.' or '-'")
        try:
            rx = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)
        except re.error as exc:
            raise OmniLoaderError(f"log pattern {name}={pattern!r} is not a valid regular expression ({exc})") from None
        if rx.groups < 1:
            raise OmniLoaderError(f"log pattern {name}={rx.pattern!r} has no capture group for the figure")
        compiled[name] = rx
    return compiled


def parse_pattern_args(specs: Iterable[str], defaults: bool = True) -> dict[str, str]:
    """``NAME=REGEX`` strings on top of :data:`DEFAULT_PATTERNS` (a same-named one replaces the default)."""
    patterns = dict(DEFAULT_PATTERNS) if defaults else {}
    for spec in specs:
        name, sep, regex = spec.partition("=")
        if not sep or not name or not regex:
            raise OmniLoaderError(f"--log-pattern {spec!r} is not NAME=REGEX")
        patterns[name.strip()] = regex
    compile_patterns(patterns)
    return patterns


def to_seconds(value: float, unit: str | None) -> float:
    """``value`` in ``unit`` (ms, s, seconds, min, ...) as seconds; no or unknown unit: seconds."""
    if not unit:
        return value
    key = unit.strip()
    factor = _UNITS.get(key, _UNITS.get(key.lower()))
    return value if factor in (None, 1.0) else float(f"{value * factor:.12g}")  # 0.434 ms -> 0.000434


def extract_figures(text: str, patterns: Mapping[str, str | re.Pattern[str]]) -> list[tuple[str, float]]:
    """Every figure the patterns find in ``text``, as ``(name, seconds)``, in pattern order.

    Repeated matches of one pattern are named NAME, NAME#2, NAME#3, ... in log order.
    """
    figures: list[tuple[str, float]] = []
    for name, rx in compile_patterns(patterns).items():
        count = 0
        for m in rx.finditer(text):
            group: int | str = "value" if "value" in rx.groupindex else 1
            raw = m.group(group)
            if raw is None:
                continue
            try:
                value = float(raw)
            except ValueError:
                continue
            if "unit" in rx.groupindex and m.group("unit"):
                unit = m.group("unit")
            else:
                after = _UNIT_AFTER.match(text, m.end(group))
                unit = after.group(1) if after else None
            count += 1
            figures.append((name if count == 1 else f"{name}#{count}", to_seconds(value, unit)))
    return figures
