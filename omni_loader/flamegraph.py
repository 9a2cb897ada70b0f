"""Moved to :mod:`omni_loader.profiling.flamegraph`; this name stays so that old imports keep working."""

from __future__ import annotations

from .profiling.flamegraph import (CHAR, ENTRY, HEADER, IMPORT, PACKAGES, PAD, ROW, SKIP_UNDER_ENTRY, WIDTH, Flame,
                                   FlameView, Node, build, script, svg, svg_body)

__all__ = ["CHAR", "ENTRY", "HEADER", "IMPORT", "PACKAGES", "PAD", "ROW", "SKIP_UNDER_ENTRY", "WIDTH", "Flame",
           "FlameView", "Node", "build", "script", "svg", "svg_body"]
