"""A baseline: the findings a project already has, so a CI job fails only on new ones.

Keyed by file, rule and the walk's stripped source line, not its number: an edit above a finding must
not make it new. Repeated lines are counted; paths are relative to the folder the audit runs in."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..errors import OmniLoaderError
from .findings import Finding
from .sources import read_bounded

FORMAT = 1
MAX_BYTES = 50_000_000


def where(path: str) -> str:
    """``path`` relative to the current folder when below it (``a/b.py``), else absolute; ``/`` separated."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full)
    return Path(full if rel.startswith("..") else rel).as_posix()


def key(f: Finding) -> tuple[str, str, str]:
    return where(f.path), f.rule, f.code


def write_baseline(path: str | Path, findings: Sequence[Finding]) -> Path:
    """Write ``findings`` as a baseline (by a rename from a file beside it: a link at ``path`` is refused)."""
    from ..safe_files import replaced

    counts = Counter(key(f) for f in findings)
    data = {"tool": "omni-loader audit --source", "format": FORMAT,
            "findings": [{"path": p, "rule": r, "code": c, "count": n} for (p, r, c), n in sorted(counts.items())]}
    with replaced(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return Path(path)


def read_baseline(path: str | Path) -> Counter:
    """``(path, rule, code) -> count`` from a baseline file, or one line naming the file and what is wrong."""
    try:
        data = json.loads(read_bounded(path, MAX_BYTES, "--baseline's size cap"))
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {FORMAT}")
        return Counter({(e["path"], e["rule"], e["code"]): int(e["count"]) for e in data["findings"]})
    except OmniLoaderError as exc:
        raise OmniLoaderError(f"--baseline {exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OmniLoaderError(f"--baseline {path}: not a baseline written by --write-baseline ({exc})") from None


def new_findings(findings: Sequence[Finding], baseline: Counter) -> tuple[list[Finding], int]:
    """(the findings the baseline does not account for, how many it did)."""
    left = Counter(baseline)
    new = []
    for f in findings:
        k = key(f)
        if left[k] > 0:
            left[k] -= 1
        else:
            new.append(f)
    return new, len(findings) - len(new)
