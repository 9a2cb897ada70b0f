"""A package's public API, imported on first use.

Why lazy: a package's ``__init__`` that imported its modules would import torch, matplotlib or
pandas for anyone who needs one small module of it (``omni_loader.host.procs`` in a server child,
``omni_loader.results.planner`` on the command line), and the worker would pay for imports that
its measured phases should not see. Each ``__init__`` names its API, the module that defines each
name, and nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, api: dict[str, str]) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``__all__``, ``__getattr__`` and ``__dir__`` for ``package``, whose names ``api`` maps to the module
    that defines each, relative to the package (``"files"``; ``".token2wav.options"`` from a folder: a
    leading dot climbs one level, as in a relative import)."""

    def __getattr__(name: str) -> Any:
        if name in api:
            return getattr(importlib.import_module("." + api[name], package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(api)

    return list(api), __getattr__, __dir__
