"""Option groups that several commands share, and their translation into typed values.

The checkpoint and load options are declared once, as the fields of
:class:`~omni_loader.token2wav.options.CheckpointOptions` and :class:`~omni_loader.token2wav.options.LoadOptions`:
added to a parser from those fields and turned back into those values here.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import MISSING, asdict
import json
import math
import sys
from typing import Any

from ..token2wav.options import CheckpointOptions, LoadOptions, dest, flag, option_fields


def add_checkpoint_options(p: argparse.ArgumentParser) -> None:
    """``--checkpoint``, ``--model``, ``--size``...: one per :class:`CheckpointOptions` field."""
    g = p.add_argument_group("checkpoint (default: the embedded synthetic snapshot)")
    add_field_options(g, CheckpointOptions, extras={"checkpoint": {"metavar": "DIR"}, "model_id": {"metavar": "ID"},
                                                    "cache_dir": {"metavar": "DIR"}})


def comma_list(text: str) -> tuple[str, ...]:
    """An argparse ``type=`` for a tuple option: ``a,b`` -> ``("a", "b")``."""
    return tuple(v.strip() for v in text.split(",") if v.strip())


def add_field_options(p: Any, cls: Any, *, skip: tuple[str, ...] = (), extras: Mapping[str, dict[str, Any]] | None = None,
                      into: Mapping[str, Any] | None = None) -> dict[str, str]:
    """One option per field of the spec dataclass ``cls`` (flag, help, choices, a marked :class:`Default` and a type
    from the field), and the map of their dests to the fields' flat names (what a ``--resume`` compares).
    ``extras[name]``: argparse keywords on top; ``into[name]``: the group to add it to; ``skip``: fields not added."""
    dests = {}
    for name, f in option_fields(cls).items():
        if name in skip:
            continue
        default = f.default if f.default is not MISSING else (
            f.default_factory() if f.default_factory is not MISSING else None)
        kw: dict[str, Any] = {"help": f.metadata.get("help")}
        if f.metadata.get("choices"):
            kw["choices"] = f.metadata["choices"]
        if isinstance(default, bool):
            kw["action"] = "store_true"
        elif isinstance(default, float):  # seconds, all of them: nan, inf and negatives are refused in one line
            kw["type"] = seconds_at_least_zero(flag(f))
        elif isinstance(default, int):
            kw["type"] = int
        elif isinstance(default, tuple):
            kw["type"] = comma_list
        if default is not None:
            kw["default"] = Default(default)
        kw.update((extras or {}).get(name, {}))
        (into or {}).get(name, p).add_argument(flag(f), **kw)
        dests[dest(f)] = name
    return dests


def _from_fields(cls: Any, args: argparse.Namespace) -> Any:
    return cls(**{name: getattr(args, dest(f)) for name, f in option_fields(cls).items()})


def load_options(args: argparse.Namespace) -> LoadOptions:
    """The :class:`LoadOptions` that the load options select: one option per field (:func:`add_field_options`)."""
    return _from_fields(LoadOptions, args)


def checkpoint_options(args: argparse.Namespace) -> CheckpointOptions:
    """The :class:`CheckpointOptions` that the checkpoint options select (:func:`add_checkpoint_options`)."""
    return _from_fields(CheckpointOptions, args)


def snapshot_from_args(args: argparse.Namespace) -> Any:
    """The snapshot that ``--checkpoint`` / ``--model`` / ``--size`` select (made or found; never downloaded
    without ``--download``)."""
    from ..token2wav.checkpoint import resolve_snapshot

    return resolve_snapshot(**asdict(checkpoint_options(args)), progress=True)


class Default:
    """An option's default, marked as one: ``add_argument(..., default=Default(10))``. ``--resume`` must know which
    options were typed, which argparse does not say: a value still a ``Default`` after parsing was not."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


NOT_OPTIONS = frozenset({"func", "command", "debug", "explicit"})  # what a Namespace holds besides options


def take_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Unwrap every :class:`Default` in ``args`` and record the typed options' dests in ``args.explicit``."""
    typed = set()
    for name, value in vars(args).items():
        if isinstance(value, Default):
            setattr(args, name, value.value)
        elif value is not None and value is not False and name not in NOT_OPTIONS:
            typed.add(name)
    args.explicit = typed
    return args


def given_options(args: argparse.Namespace) -> set[str]:
    """The dests of the options the user typed, as :func:`take_defaults` recorded them (none without it)."""
    return set(getattr(args, "explicit", ()))


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# --------------------------------------------------------------------------- checked option values

MAX_RUNS = 10_000  # runs (per variant) and warm-ups a plan may hold: 10,000 loads of the tiny model take hours
MAX_THREADS = 4096  # torch threads a load may ask for


def checked(option: str, convert: Any, ok: Any, must: str) -> Any:
    """An argparse ``type=``: ``convert(text)`` where ``ok`` of it, else an
    :class:`~omni_loader.errors.OmniLoaderError` naming ``option``, which :func:`omni_loader.cli.main` prints."""
    from ..errors import OmniLoaderError

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise OmniLoaderError(f"{option} {text}: {must}")
        return value

    parse.__name__ = convert.__name__
    return parse


def bounded_int(option: str, low: int, high: int, meaning: str = "") -> Any:
    """An argparse ``type=``: an integer from ``low`` to ``high``."""
    return checked(option, int, lambda v: low <= v <= high,
                    f"must be a whole number from {low:,} to {high:,}{meaning}")


def positive_seconds(option: str) -> Any:
    """An argparse ``type=``: a finite number of seconds above 0."""
    return checked(option, float, lambda v: math.isfinite(v) and v > 0, "must be a finite number of seconds above 0")


def seconds_at_least_zero(option: str) -> Any:
    """An argparse ``type=``: a finite number of seconds, 0 or more (``float()`` takes ``nan``, a wait that never
    ends and a ``NaN`` in metadata.json that no JSON reader but Python's takes)."""
    return checked(option, float, lambda v: math.isfinite(v) and v >= 0,
                    "must be a finite number of seconds, 0 or more")
