"""Across the given sources: which call reaches which function, which functions walk, and the findings.

Each function is summarised once: the walks it evaluates once per call (directly or through its
callees), each receiver said in terms of its parameters, because a walk hidden in a helper costs the
same B·N when the helper is called once per item. A call in a loop binds those parameters to its
arguments: one derived from the loop's item walks a different tree each time and is no finding.

Only calls that resolve without guessing are followed (``self.method()`` in the class and its bases,
same-file functions, nested functions, imports among the given files); any other call to a walking
function's name is noted as unresolved, never reported. A walk that computes a default the caller
passes is dropped there, and a walk in a function nothing calls is OL003, not OL001."""

from __future__ import annotations

from dataclasses import dataclass

from .findings import DEAD_RULE, PATH_RULE, RULE_ID, RULES, Finding
from .scan import LoopRef, Scope, Site
from .sources import SourceFile
from .walks import FRESH, GLOBAL

MAX_DEPTH = 60  # calls followed from one function before a summary is left empty (deep recursion)
EXEMPT, ONCE = "exempt", "once"


@dataclass(frozen=True)
class Entry:
    """A walk a function evaluates once per call: where it is, the calls leading to it, its receiver's roots."""

    origin: tuple[SourceFile, Scope, Site]
    chain: tuple[str, ...]
    roots: frozenset[str]
    tree: str = ""  # the receiver as a dotted name in this function's terms ('' when not one)
    unless: str = ""  # a parameter of this function: the walk runs only when the caller leaves it out


@dataclass(frozen=True)
class Unresolved:
    """A call inside a loop, on a receiver the audit cannot follow, to a name some walking function has."""

    path: str
    line: int
    call: str
    loop_line: int
    loop_function: str
    candidates: tuple[str, ...]


class Arguments:
    """What one call gives each parameter of its callee: the argument's roots and its dotted name ('' when it is
    none). Where a ``*args`` stands, the arguments after it are not known to land where they are written: they
    bind nothing, and a parameter no argument names is passed through ``*args``/``**kwargs`` or left at its
    default."""

    def __init__(self, callee: Scope, site: Site, first: tuple[frozenset[str], str] | None) -> None:
        """``first``: what the call binds to the callee's first parameter (a method's receiver), or None."""
        self.callee, self.site = callee, site
        self.given: dict[str, tuple[frozenset[str], str]] = {}
        offset = 0
        if first is not None and callee.params:
            self.given[callee.params[0]], offset = first, 1
        for i, (roots, tree) in enumerate(zip(site.args, site.arg_trees)):
            if roots is None:
                break
            if offset + i < callee.npos:
                self.given[callee.params[offset + i]] = roots, tree
        self.given.update((name, (roots, tree)) for (name, roots), (_, tree) in zip(site.kwargs, site.kwarg_trees))

    def roots_of(self, roots: frozenset[str]) -> frozenset[str]:
        """The callee-side roots of a walk's receiver, said in the caller's names. Empty when the receiver is a
        parameter left at its default or given a literal (``None``): no tree."""
        out: set[str] = set()
        for r in roots:
            if r in self.given:
                out |= self.given[r][0]  # a literal argument adds nothing
            elif r in self.callee.params:
                out |= self.site.spread  # passed through *args/**kwargs, or left at its default (None, mostly)
            else:
                out.add(r)  # GLOBAL, or a name a nested function reads from the caller's own scope
        return frozenset(out)

    def tree_of(self, tree: str) -> str:
        """A walk's receiver (a dotted name in the callee's terms) said in the caller's; '' when its argument is no
        dotted name, or the parameter is given none."""
        head, dot, rest = tree.partition(".")
        if not tree or head not in self.callee.params:
            return tree  # a module-level name (or ''): the same in the caller
        base = self.given[head][1] if head in self.given else ""
        return f"{base}{dot}{rest}" if base else ""

    def supplied(self, param: str) -> bool:
        """Does the call give ``param`` a value (a name or an expression: a literal such as None is not taken
        for one)?"""
        return param in self.given and bool(self.given[param][0])


class Index:
    """Every scanned file of an audit, the summaries of its functions and the findings they yield."""

    def __init__(self, files: list[SourceFile], rules: frozenset[str] = frozenset(RULES),
                 once: bool = False) -> None:
        """``rules``: the rule ids to report; ``once``: also report walks that run at most once per call of the
        loop's function (the loop is left right after them), as notes."""
        self.files = files
        self.rules, self.once = rules, once
        self.modules = {f.module: f for f in files}
        self.memo: dict[int, list[Entry]] = {}
        self.busy: set[int] = set()
        self.findings: dict[tuple, Finding] = {}
        self.suppressed = 0
        self.loose: list[tuple[SourceFile, Scope, Site]] = []
        self.named_from: set[tuple[str, str]] = set()  # (module, name) some file imports by name
        self.importers: set[str] = set()  # modules some file imports a name from
        self.as_modules: set[str] = set()  # names some file imports as a module (or star-imports)
        for f in files:
            for kind in f.imports.values():
                if kind[0] == "from":
                    self.named_from.add((kind[1], kind[2]))
                    self.importers.add(kind[1])
                    self.as_modules.add(f"{kind[1]}.{kind[2]}")
                else:
                    self.as_modules.add(kind[1])

    def unreached(self, file: SourceFile, scope: Scope) -> bool:
        """A module-level function that its file never names again and no audited file imports (by name, or
        its module whole), in a module other audited files do import names from: nothing here calls it."""
        return (scope.kind == "function" and scope.parent is None and scope.cls is None
                and scope.name in file.unnamed and file.module in self.importers
                and file.module not in self.as_modules and (file.module, scope.name) not in self.named_from)

    # ----------------------------------------------------------------- resolution

    def module_of(self, file: SourceFile, dotted: str) -> SourceFile | None:
        head, _, rest = dotted.partition(".")
        kind = file.imports.get(head)
        if not kind:
            return None
        target = kind[1] if kind[0] == "module" else f"{kind[1]}.{kind[2]}"
        return self.modules.get(f"{target}.{rest}" if rest else target)

    def lookup(self, file: SourceFile, name: str, depth: int = 0) -> tuple[Scope, SourceFile] | None:
        """A module-level function ``name`` of ``file``, following ``from x import name`` re-exports."""
        if name in file.scan.functions:
            return file.scan.functions[name], file
        kind = file.imports.get(name)
        if kind and kind[0] == "from" and depth < 8 and kind[1] in self.modules:
            return self.lookup(self.modules[kind[1]], kind[2], depth + 1)
        return None

    def find_class(self, file: SourceFile, dotted: str) -> tuple[SourceFile, str] | None:
        if dotted in file.scan.classes:
            return file, dotted
        head, _, rest = dotted.rpartition(".")
        if head:
            module = self.modules.get(head) or self.module_of(file, head)
            return (module, rest) if module and rest in module.scan.classes else None
        kind = file.imports.get(dotted)
        if kind and kind[0] == "from" and kind[1] in self.modules:
            module = self.modules[kind[1]]
            return (module, kind[2]) if kind[2] in module.scan.classes else None
        return None

    def method(self, file: SourceFile, cls: str, name: str, skip_own: bool = False,
               depth: int = 0) -> tuple[Scope, SourceFile] | None:
        """``cls.name`` in the class or, in order, its bases that the sources define."""
        info = file.scan.classes.get(cls)
        if info is None or depth > 12:
            return None
        if not skip_own and name in info.methods:
            return info.methods[name], file
        for base in info.bases:
            found = self.find_class(file, base) if base else None
            if found and (hit := self.method(found[0], found[1], name, False, depth + 1)):
                return hit
        return None

    def resolve(self, file: SourceFile, scope: Scope, site: Site):
        """(callee scope, its file, roots bound to its first parameter or None) for a call, or None."""
        if site.callee[0] == "name":
            s: Scope | None = scope
            while s is not None:
                if site.callee[1] in s.children:
                    return s.children[site.callee[1]], file, None
                s = s.parent
            hit = self.lookup(file, site.callee[1])
            return (*hit, None) if hit else None
        _, base, attr = site.callee
        if not base:
            return None
        if scope.cls and base in ("super()", "cls", scope.self_name or "self"):
            hit = self.method(file, scope.cls, attr, skip_own=base == "super()")
            if hit is None:
                return None
            return hit[0], hit[1], None if hit[0].kind == "staticmethod" else site.receiver
        found = self.find_class(file, base)
        if found:  # Class.method(obj, ...): unbound, the arguments bind from the first parameter
            hit = self.method(found[0], found[1], attr)
            if hit is None:
                return None
            return hit[0], hit[1], frozenset({GLOBAL}) if hit[0].kind == "classmethod" else None
        module = self.module_of(file, base)
        hit = self.lookup(module, attr) if module else None
        return (*hit, None) if hit else None

    # ----------------------------------------------------------------- roots and decisions

    @staticmethod
    def expand(scope: Scope, names: frozenset[str]) -> tuple[set[str], set[str]]:
        """(the parameters, GLOBAL and FRESH that ``names`` come from; every name met on the way)."""
        out: set[str] = set()
        seen: set[str] = set()
        params = set(scope.params)
        stack = list(names)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in (GLOBAL, FRESH) or n in params:
                out.add(n)
            if n in scope.local_roots:
                stack.extend(scope.local_roots[n])
            elif n not in params and n not in (GLOBAL, FRESH):
                out.add(n if Index.enclosing(scope, n) else GLOBAL)
        return out, seen

    @staticmethod
    def enclosing(scope: Scope, name: str) -> bool:
        """Is ``name`` a parameter or local of a function ``scope`` is nested in (a closure's free name)?"""
        s = scope.parent
        while s is not None:
            if name in s.params or name in s.local_roots:
                return True
            s = s.parent
        return False

    def decide(self, scope: Scope, site: Site, roots: frozenset[str]) -> tuple[str | LoopRef, LoopRef | None]:
        """(EXEMPT (a receiver made per iteration or derived from the loop's item), ONCE (once per call of ``scope``)
        or the innermost loop walking on every iteration; the innermost loop left right after the walk, or None)."""
        if FRESH in roots:
            return EXEMPT, None
        _, seen = self.expand(scope, roots)
        names = roots | seen
        left = None
        for loop in reversed(site.loops):
            if names & loop.varying:
                return EXEMPT, None
            bounded = loop.leaves or loop.pinned
            if not bounded and loop.kind != "repeat":
                return loop, None
            if bounded and left is None:
                left = loop
        return ONCE, left

    def summary_roots(self, scope: Scope, roots: frozenset[str]) -> frozenset[str] | None:
        out, _ = self.expand(scope, roots)
        named = out - {FRESH}
        if FRESH in out and not (named - {GLOBAL}):
            return None  # a tree built inside the function: a new one on every call
        return frozenset(named)

    # ----------------------------------------------------------------- summaries and findings

    def summary(self, scope: Scope, file: SourceFile, depth: int = 0) -> list[Entry]:
        key = id(scope)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy or depth > MAX_DEPTH:
            return []
        self.busy.add(key)
        kept: dict[tuple, Entry] = {}
        for site in scope.sites:
            if site.walk:
                candidates = [Entry((file, scope, site), (), site.receiver, site.tree, site.default_of)]
                if site.kept and not site.loops:
                    continue  # walked once for the object and kept: not once per call
            else:
                target = self.resolve(file, scope, site)
                if target is None:
                    if site.loops:
                        self.loose.append((file, scope, site))
                    continue
                callee, cfile, first = target
                given = Arguments(callee, site, None if first is None else (
                    first, scope.self_name or "" if site.callee[1] in ("super()", "cls") else site.callee[1]))
                candidates = [Entry(e.origin, (callee.qualname, *e.chain), roots, given.tree_of(e.tree), site.default_of)
                              for e in self.summary(callee, cfile, depth + 1)
                              if not given.supplied(e.unless) and (roots := given.roots_of(e.roots))]
            for entry in candidates:
                decision, left = self.decide(scope, site, entry.roots)
                if decision == EXEMPT:
                    continue
                if decision == ONCE:
                    if left is not None and self.once:
                        self.report(entry, left, file, scope, site, once=True)
                    roots = self.summary_roots(scope, entry.roots)
                    k = (id(entry.origin[2]), roots, entry.unless)
                    if roots is not None and (k not in kept or len(entry.chain) < len(kept[k].chain)):
                        kept[k] = Entry(entry.origin, entry.chain, roots, entry.tree, entry.unless)
                else:
                    self.report(entry, decision, file, scope, site)
        self.busy.discard(key)
        self.memo[key] = list(kept.values())
        return self.memo[key]

    def report(self, entry: Entry, loop: LoopRef, file: SourceFile, scope: Scope, site: Site,
               once: bool = False) -> None:
        wfile, wscope, walk = entry.origin
        rule = PATH_RULE if walk.partial else DEAD_RULE if self.unreached(file, scope) else RULE_ID
        if rule not in self.rules:
            return
        if (wfile.silenced(walk.line, rule) or file.silenced(loop.line, rule)
                or (entry.chain and file.silenced(site.line, rule))):
            self.suppressed += 1
            return
        same_tree = bool(entry.tree) and entry.tree == loop.tree and not once
        finding = Finding(path=wfile.display, line=walk.line, column=walk.column, function=wscope.qualname,
                          walk=walk.text, method=walk.walk, loop_path=file.display, loop_line=loop.line,
                          loop_function=scope.qualname, loop_kind=loop.kind, chain=entry.chain,
                          call_line=site.line if entry.chain else None, partial=walk.partial, rule=rule,
                          code=wfile.lines.get(walk.line, ""), over=loop.over if same_tree else "", once=once,
                          pinned=loop.pinned if once and not loop.leaves else 0)
        self.findings.setdefault((finding.path, finding.line, finding.column, finding.loop_path, finding.loop_line,
                                  finding.call_line, finding.chain), finding)

    def run(self) -> tuple[list[Finding], list[Unresolved]]:
        """Summarise every function (which reports every finding) and note the calls left unresolved; the findings in
        the order they were found (:func:`~.findings.ordered` sorts them)."""
        for file in self.files:
            for scope in file.scan.scopes:
                self.summary(scope, file)
        return list(self.findings.values()), self.unresolved()

    def unresolved(self) -> list[Unresolved]:
        walking: dict[str, list[str]] = {}
        for file in self.files:
            for scope in file.scan.scopes:
                if self.memo.get(id(scope)):
                    walking.setdefault(scope.name.rsplit(".", 1)[-1], []).append(scope.qualname)
        out = []
        for file, scope, site in self.loose:
            names = walking.get(site.callee[-1])
            if not names:
                continue
            decision, _ = self.decide(scope, site, site.receiver or frozenset({GLOBAL}))
            if isinstance(decision, LoopRef):
                out.append(Unresolved(file.display, site.line, site.text, decision.line, scope.qualname,
                                      tuple(sorted(names)[:5])))
        return out
