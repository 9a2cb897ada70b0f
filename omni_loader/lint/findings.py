"""A finding of the source audit, and the ways it is written out: text lines, JSON, SARIF, Markdown.

Why a frozen record with plain fields: the same finding is printed for a person
(``path:line: OL001 message``, the shape editors and pre-commit jump to), read by a script
(``--json``), uploaded to a code-scanning service (``--format sarif``, SARIF 2.1.0) and shown in a
notebook (:func:`findings_markdown`); one record, four renderings, nothing recomputed on the way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..formatting import count, markdown_table, short_duration

RULE_ID = "OL001"
RULE_NAME = "whole-tree-walk-in-loop"
RULE_TEXT = ("A whole-tree module walk (state_dict(), named_modules(), named_parameters(), ...) is evaluated once "
             "per loop iteration: B iterations over a tree of N modules cost B·N module visits; walk once, before "
             "the loop.")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class Price:
    """What the walk costs for a tree of ``modules`` modules walked once per item, ``items`` times."""

    modules: int
    items: int
    seconds_per_visit: float
    basis: str  # where the tree's size and the per-visit cost come from, in words

    @property
    def visits(self) -> int:
        return self.modules * self.items

    @property
    def seconds_per_iteration(self) -> float:
        return self.modules * self.seconds_per_visit

    @property
    def seconds_total(self) -> float:
        return self.visits * self.seconds_per_visit

    def sentence(self) -> str:
        return (f"B·N = {count(self.visits)} module visits ≈ {short_duration(self.seconds_total)} here "
                f"({short_duration(self.seconds_per_iteration)} per iteration; {self.basis})")

    def to_dict(self) -> dict[str, Any]:
        return {"modules": self.modules, "items": self.items, "visits": self.visits,
                "seconds_per_visit": self.seconds_per_visit, "seconds_per_iteration": self.seconds_per_iteration,
                "seconds_total": self.seconds_total, "basis": self.basis}


@dataclass(frozen=True)
class Finding:
    """A walk evaluated once per iteration of a loop (in the same function, or through ``chain``)."""

    path: str
    line: int
    column: int
    function: str  # qualified name of the function holding the walk
    walk: str  # the walk as written: model.state_dict()
    method: str  # state_dict, named_modules, ..., get_submodule, get_module_by_name
    loop_path: str
    loop_line: int
    loop_function: str  # the caller, when the walk is reached through calls
    loop_kind: str  # for, while, comprehension
    chain: tuple[str, ...] = ()  # the functions called between the loop and the walk; empty when direct
    call_line: int | None = None  # the call in the loop that leads to the walk
    partial: bool = False  # get_submodule / get_module_by_name: a walk along a path, not the whole tree
    price: Price | None = field(default=None, compare=False)
    rule: str = RULE_ID

    def message(self) -> str:
        what = "walks from the root along a path" if self.partial else "walks the whole module tree"
        loop = "comprehension" if self.loop_kind == "comprehension" else f"{self.loop_kind} loop"
        where = (f"the {loop} at line {self.loop_line}" if self.loop_path == self.path
                 else f"the {loop} at {self.loop_path}:{self.loop_line}")
        via = f" via {' -> '.join(self.chain)} (called at line {self.call_line} in {self.loop_function})" \
            if self.chain else ""
        text = f"{self.walk} {what} once per iteration of {where}{via}; hoist it before the loop"
        if self.price is None:
            return f"{text} [unpriced: give --modules N --items M, or --like token2wav]"
        bound = "at most " if self.partial else ""
        return f"{text}: {bound}{self.price.sentence()}"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "price"}
        out["chain"] = list(self.chain)
        out["message"] = self.message()
        out["priced"] = self.price is not None
        if self.price is not None:
            out.update(self.price.to_dict())
        return out


def text_lines(findings: Sequence[Finding]) -> list[str]:
    """``path:line: OL001 message``, one per finding (the shape editors and pre-commit read)."""
    return [f"{f.path}:{f.line}: {f.rule} {f.message()}" for f in findings]


def to_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


def to_sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    """SARIF 2.1.0: one run, one rule, one result per finding with the loop as a related location."""
    rule = {"id": RULE_ID, "name": RULE_NAME, "shortDescription": {"text": "whole-tree module walk inside a loop"},
            "fullDescription": {"text": RULE_TEXT}, "defaultConfiguration": {"level": "warning"}}
    results = []
    for f in findings:
        result: dict[str, Any] = {
            "ruleId": f.rule, "ruleIndex": 0, "level": "warning", "message": {"text": f.message()},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.path)},
                                                "region": {"startLine": f.line, "startColumn": f.column + 1}}}],
            "relatedLocations": [{"id": 1, "message": {"text": f"the {f.loop_kind} loop in {f.loop_function}"},
                                  "physicalLocation": {"artifactLocation": {"uri": _uri(f.loop_path)},
                                                       "region": {"startLine": f.loop_line}}}],
        }
        if f.price is not None:
            result["properties"] = f.price.to_dict()
        results.append(result)
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "omni-loader", "version": __version__, "rules": [rule]}},
                      "results": results}]}


def findings_markdown(findings: Sequence[Finding], relative_to: str | Path | None = None) -> str:
    """One row per finding, for a notebook or a report: where, what, which loop, how, what it costs.
    ``relative_to``: paths under that directory are shown relative to it (a notebook's table stays narrow)."""
    def shown(path: str) -> str:
        if relative_to is not None:
            try:
                return str(Path(path).resolve().relative_to(Path(relative_to).resolve()))
            except ValueError:  # not under it: as given
                pass
        return path

    rows = [[f"{shown(f.path)}:{f.line}", f"`{f.walk}`", f.function,
             f"{shown(f.loop_path)}:{f.loop_line} ({f.loop_kind})", " → ".join(f.chain) or "direct",
             count(f.price.visits) if f.price else "",  # "699 ms" on one line: a non-breaking space before the unit
             short_duration(f.price.seconds_total).replace(" ", "\u00a0") if f.price else ""]
            for f in findings]
    return markdown_table(rows, ["walk at", "walk", "in", "loop", "through", "module visits", "≈ time"],
                          right=(5, 6))
