"""A notebook's parameters checked before its first cell runs anything: each named, with the type it needs.

papermill may inject ``"3"`` or ``"False"`` as strings, which Python takes silently; a parameters cell annotates
each type once::

    runs: int = 5                       # measured runs per variant
    out_dir: Optional[str] = None       # results directory (papermill reads Optional[...], not ``str | None``)

and its next cell calls ``check_parameters(globals())``: a wrong one is one line naming it.
"""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from typing import Any

from ..errors import OmniLoaderError

__all__ = ["ParameterError", "check_parameters"]


class ParameterError(OmniLoaderError, TypeError):
    """A notebook parameter whose value is not of the type the notebook needs."""


_WORDS = {bool: "True or False", int: "a whole number", float: "a number", str: "a string", list: "a list",
          tuple: "a tuple", dict: "a mapping"}


def _fits(value: Any, kind: Any) -> bool:
    if kind is None:
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:  # an int is a number too; nan and inf are not numbers of anything a notebook counts
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, kind)


def check_parameters(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Check each annotated name of ``namespace`` (a notebook's ``globals()``) against its annotation; return the
    values. ``bool`` takes only ``True``/``False``, ``int`` no ``bool``, ``float`` any finite number; the first
    misfit raises :class:`ParameterError`, one line naming it, its value and the type it needs."""
    values = {}
    for name, kind in namespace.get("__annotations__", {}).items():
        if name not in namespace:
            continue
        if isinstance(kind, str):  # postponed (``from __future__ import annotations``): the cell's own names read it
            kind = eval(kind, dict(namespace))
        value = namespace[name]
        kinds = tuple(None if k is type(None) else typing.get_origin(k) or k
                      for k in (typing.get_args(kind) if typing.get_origin(kind) in (typing.Union, types.UnionType)
                                else (kind,)))
        if not any(_fits(value, k) for k in kinds):
            words = [("None" if k is None else _WORDS.get(k, getattr(k, "__name__", str(k)))) for k in kinds]
            wanted = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            got = type(value).__name__
            raise ParameterError(f"notebook parameter {name}={shown} is {'an' if got[0] in 'aeiou' else 'a'} {got}; "
                                 f"it needs {wanted}")
        values[name] = value
    return values
