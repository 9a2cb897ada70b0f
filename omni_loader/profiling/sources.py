"""Source locations as a person reads them: short paths and pstats-style function labels, shortened alike in
every table and picture.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent.parent  # the directory that holds omni_loader/
# This package, as code objects name it: its frames are the profiler's, not the load's.
PROFILING_DIRS = frozenset({str(Path(__file__).parent), str(Path(__file__).resolve().parent)})


def short_path(path: str) -> str:
    """A source path relative to site-packages, the standard library or this repository."""
    found = sysconfig.get_paths()
    roots = [r.rstrip(os.sep) + os.sep for r in (*(found.get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")),
                                                 str(PACKAGE_ROOT)) if r]
    return path[max((len(r) for r in roots if path.startswith(r)), default=0):]  # the longest root it is under


def function_label(key: tuple[str, int, str]) -> str:
    """``file:line(name)`` as pstats prints it (built-ins as ``{name}``), with a shortened path."""
    file, line, name = key
    if file == "~" and line == 0:
        return f"{{{name[1:-1]}}}" if name.startswith("<") and name.endswith(">") else name
    return f"{short_path(file)}:{line}({name})"


def is_profiler_frame(key: tuple[str, int, str]) -> bool:
    """Frames of the profiling machinery, not of the load: this package and the profiler's own code."""
    file, _, name = key
    if file == "~":
        return "_lsprof" in name
    return os.path.basename(file) in ("cProfile.py", "pstats.py") or os.path.dirname(file) in PROFILING_DIRS
