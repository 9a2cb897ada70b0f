"""Stand-ins the tests share (imported as ``from stand_ins import ...``, as ``sentences`` is)."""

from __future__ import annotations

from typing import Any


class PostfixBar:
    """A progress bar stand-in for the sweep and audit bars: its keyword arguments, and the postfix shown at each
    tick (what the bar said as each model was done)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs, self.postfix, self.ticks = kwargs, kwargs.get("postfix") or "", []

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def update(self, n: int = 1) -> None:
        self.ticks.append(self.postfix)

    def __enter__(self) -> PostfixBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass
