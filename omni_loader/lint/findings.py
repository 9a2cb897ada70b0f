"""A finding of the source audit, its rule and severity, and its renderings: text lines, JSON, SARIF,
GitHub annotations, Markdown.

One frozen record, five renderings, nothing recomputed on the way. OL001 is a whole-tree walk in a loop
(B·N module visits); OL002 a walk along one dotted path (``get_submodule``: cheap, reported only when
selected); OL003 a walk in a function nothing audited calls (dead code, off by default, so that OL001
stays precise enough to fail CI on). The severity ranks a list read from the top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..formatting import count, markdown_table, short_duration

RULE_ID = "OL001"
PATH_RULE = "OL002"
DEAD_RULE = "OL003"
RULES: dict[str, tuple[str, str, str]] = {  # id -> (name, short description, full description)
    RULE_ID: ("whole-tree-walk-in-loop", "whole-tree module walk inside a loop",
              "A whole-tree module walk (state_dict(), named_modules(), named_parameters(), ...) is evaluated once "
              "per loop iteration: B iterations over a tree of N modules cost B·N module visits; walk once, before "
              "the loop."),
    PATH_RULE: ("path-walk-in-loop", "module walk along a dotted path inside a loop",
                "A walk from the root along one dotted path (get_submodule(), get_module_by_name()) is evaluated "
                "once per loop iteration: at most the path's depth per iteration; build a name -> module map once, "
                "before the loop, when B is large."),
    DEAD_RULE: ("walk-in-loop-of-unreached-function", "whole-tree module walk inside a loop nothing calls",
                "A whole-tree module walk is evaluated once per loop iteration in a module-level function that "
                "nothing in the audited sources calls or imports, though they import other names from its "
                "module: dead code, or called only from outside them. Delete it, or hoist the walk."),
}
DEFAULT_RULES = (RULE_ID,)  # OL002 and OL003 are reported only when selected
SEVERITIES = ("high", "medium", "low", "note")  # most severe first
SARIF_LEVELS = {"high": "error", "medium": "warning", "low": "warning", "note": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def selected_rules(select: Sequence[str] = (), ignore: Sequence[str] = ()) -> frozenset[str]:
    """The rule ids ``--select``/``--ignore`` leave on. A code selects every rule it begins (``OL`` all of them,
    as ruff and flake8 read prefixes); no ``select``: the default rules. A code that names no rule is refused."""
    from ..errors import OmniLoaderError

    def hits(code: str, rule: str) -> bool:
        return code.upper() == "ALL" or rule.startswith(code.upper())

    for option, codes in (("--select", select), ("--ignore", ignore)):
        for code in codes:
            if not any(hits(code, r) for r in RULES):
                raise OmniLoaderError(f"{option} {code}: no rule begins so (the rules: {', '.join(RULES)})")

    chosen = {r for r in RULES if any(hits(c, r) for c in select)} if select else set(DEFAULT_RULES)
    return frozenset(r for r in chosen if not any(hits(c, r) for c in ignore))


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
    rule: str = RULE_ID  # OL002 for a path walk
    code: str = ""  # the walk's source line, stripped (a baseline's key: it survives lines moving)
    over: str = ""  # the loop goes over this walk of the same tree (B = N); '' when it does not
    once: bool = False  # the loop is left right after the walk: it runs at most once per call
    pinned: int = 0  # with once: the walk runs only for the loop items a branch names, at most this many

    @property
    def quadratic(self) -> bool:
        return bool(self.over) and not self.partial

    @property
    def severity(self) -> str:
        """high, medium, low or note (:data:`SEVERITIES`): from the price, else from what the code says."""
        if self.once:
            return "note"
        if self.price is not None:
            s = self.price.seconds_total
            return "high" if s >= 1 else "medium" if s >= 0.01 else "low"
        return "high" if self.quadratic else "low" if self.partial or self.rule == DEAD_RULE else "medium"

    def message(self) -> str:
        what = "walks from the root along a path" if self.partial else "walks the whole module tree"
        loop = "comprehension" if self.loop_kind == "comprehension" else f"{self.loop_kind} loop"
        where = (f"the {loop} at line {self.loop_line}" if self.loop_path == self.path
                 else f"the {loop} at {self.loop_path}:{self.loop_line}")
        via = f" via {' -> '.join(self.chain)} (called at line {self.call_line} in {self.loop_function})" \
            if self.chain else ""
        if self.once and self.pinned:
            times = "once" if self.pinned == 1 else f"{self.pinned} times"
            return (f"{self.walk} {what} inside {where}{via} but runs at most {times} per call of "
                    f"{self.loop_function}: only for the loop's items its branch names")
        if self.once:
            return (f"{self.walk} {what} inside {where}{via} but runs at most once per call of "
                    f"{self.loop_function}: the loop is left right after it")
        text = f"{self.walk} {what} once per iteration of {where}{via}; hoist it before the loop"
        if self.rule == DEAD_RULE:
            text += f" ({self.loop_function} is neither called nor imported in the audited sources)"
        if self.price is not None:
            bound = "at most " if self.partial else ""
            return f"{text}: {bound}{self.price.sentence()}"
        if self.quadratic:
            return (f"{text}: quadratic in the tree's size (the loop goes over {self.over}, a walk of the same "
                    "tree: B = N, N² module visits)")
        why = "B is the loop's length, which the code does not tell"
        return f"{text} [unpriced: {why}; give --modules N --items M, or --like token2wav]"

    def to_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "price"}, "chain": list(self.chain),
                "message": self.message(), "severity": self.severity, "quadratic": self.quadratic,
                "priced": self.price is not None, **(self.price.to_dict() if self.price is not None else {})}


def ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Most severe first; priced ones by their seconds; then by where the loop is."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity),
                                           -(f.price.seconds_total if f.price else 0.0),
                                           f.loop_path, f.loop_line, f.path, f.line, f.chain))


def text_lines(findings: Sequence[Finding]) -> list[str]:
    """``path:line: OL001 message``, one per finding (the shape editors and pre-commit read)."""
    return [f"{f.path}:{f.line}: {f.rule} {f.message()}" for f in findings]


def to_json(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


def _escape(text: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (a property value also escapes ``:`` and ``,``)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def github_lines(findings: Sequence[Finding]) -> list[str]:
    """``::warning file=...,line=...,col=...,title=OL001::message``: an annotation on the pull request's diff
    (``::notice`` for a note)."""
    return [f"::{'notice' if f.severity == 'note' else 'warning'} file={_escape(f.path, True)},line={f.line},"
            f"col={f.column + 1},title={f.rule}::{_escape(f.message())}" for f in findings]


def _uri(path: str) -> str:
    p = Path(path)
    return p.as_posix() if not p.is_absolute() else p.as_uri()


def to_sarif(findings: Sequence[Finding]) -> dict[str, Any]:
    """SARIF 2.1.0: one run, its rules, one result per finding with the loop as a related location."""
    rules = [{"id": rid, "name": name, "shortDescription": {"text": short}, "fullDescription": {"text": full},
              "defaultConfiguration": {"level": "warning"}} for rid, (name, short, full) in RULES.items()]
    ids = list(RULES)
    results = []
    for f in findings:
        results.append({
            "ruleId": f.rule, "ruleIndex": ids.index(f.rule), "level": SARIF_LEVELS[f.severity],
            "message": {"text": f.message()},
            "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(f.path)},
                                                "region": {"startLine": f.line, "startColumn": f.column + 1}}}],
            "relatedLocations": [{"id": 1, "message": {"text": f"the {f.loop_kind} loop in {f.loop_function}"},
                                  "physicalLocation": {"artifactLocation": {"uri": _uri(f.loop_path)},
                                                       "region": {"startLine": f.loop_line}}}],
            "properties": {"severity": f.severity, **(f.price.to_dict() if f.price is not None else {})},
        })
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "omni-loader", "version": __version__, "rules": rules}},
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

