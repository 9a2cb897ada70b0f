"""One file's functions, each reduced to its walks and calls and the loops around them.

Whether a call leads to a walk is known only once every file is read, so each file is parsed once and
reduced to small records (a :class:`Site` per walk or call, with its loops) and its syntax tree dropped.
What varies in a loop (:func:`loop_varying`): its targets and every name assigned in its body from
something varying, from a call or from itself; a plain alias (``m = self.model``) does not vary."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field

from .exits import DEFS, blocks, default_of, kept_on_the_object, leaves_loop, parent_map, pinned, targets
from .walks import Walk, first_only, match_walk, names_in, roots, walk_text, wrapped_walk

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


@dataclass(frozen=True)
class LoopRef:
    """A loop around a site: where it is, what varies in it, and whether the site's statement leaves it."""

    line: int
    kind: str  # for, while, comprehension, repeat (``for _ in range(k)``: not a finding's loop)
    varying: frozenset[str]
    leaves: bool = False  # the loop is surely left right after the site runs: once per loop, not per item
    tree: str = ""  # the loop goes over a whole-tree walk of this receiver (``self`` in ``self.named_buffers()``)
    over: str = ""  # that walk as written
    pinned: int = 0  # the site runs only in a branch holding the loop's item to this many constants


@dataclass(frozen=True)
class Site:
    """A walk, or a call that may lead to one, with the loops around it (outermost first)."""

    line: int
    column: int
    loops: tuple[LoopRef, ...]
    text: str  # the walk (or the call's callee) as written
    walk: str = ""  # the walk's method; '' for a call
    partial: bool = False
    kept: bool = False  # a walk kept on the object on first need (if self._sd is None: ...): not once per call
    receiver: frozenset[str] = frozenset()  # a walk's receiver roots; a method call's receiver roots
    callee: tuple[str, ...] = ()  # ('name', f) | ('attr', base dotted name or '', attr)
    args: tuple[frozenset[str] | None, ...] = ()  # roots of each positional argument (None: starred)
    kwargs: tuple[tuple[str, frozenset[str]], ...] = ()
    spread: frozenset[str] = frozenset()  # names in *args / **kwargs (binding unknown)
    tree: str = ""  # a walk's receiver as a dotted name (``self.model``); '' when it is not one
    arg_trees: tuple[str, ...] = ()  # each positional argument as a dotted name, or ''
    kwarg_trees: tuple[tuple[str, str], ...] = ()
    default_of: str = ""  # the site computes this parameter's value only when the caller left it out


@dataclass
class Scope:
    """A function, method or module body, reduced to what the cross-file pass needs."""

    module: str
    name: str  # qualified within the module: f, Class.method, f.inner, <module>
    cls: str | None = None
    params: tuple[str, ...] = ()  # positional parameters first, then keyword-only ones
    npos: int = 0  # how many of params are positional
    kind: str = "function"  # function, method, staticmethod, classmethod, module
    sites: list[Site] = field(default_factory=list)
    local_roots: dict[str, frozenset[str]] = field(default_factory=dict)
    children: dict[str, Scope] = field(default_factory=dict)
    parent: Scope | None = None

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}" if self.module else self.name

    @property
    def self_name(self) -> str | None:
        return self.params[0] if self.kind in ("method", "classmethod") and self.params else None


def target_names(target: ast.AST | None) -> set[str]:
    if target is None:
        return set()
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def statements(stmts: list[ast.stmt], into_defs: bool = False):
    """Every statement in ``stmts`` and the blocks nested in them, function and class bodies left out
    unless ``into_defs`` (walking statements only, not every expression node, keeps a 3,000-file audit fast)."""
    stack: list[ast.stmt] = list(reversed(stmts))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, DEFS) and not into_defs:
            continue
        yield from getattr(s, "handlers", ())
        for block in blocks(s):
            stack.extend(reversed(block))


def assignments(stmts: list[ast.stmt]) -> tuple[set[str], list[tuple[set[str], ast.AST]]]:
    """(names always rebound: loop targets, with-as, augmented, except-as; (names, value) pairs).
    An assignment expression (``:=``) is not seen: statements are walked, not expressions."""
    always: set[str] = set()
    pairs: list[tuple[set[str], ast.AST]] = []
    for n in statements(stmts):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            pairs.append((set().union(*map(target_names, targets(n))), n.value))
        elif isinstance(n, (ast.AugAssign, ast.For, ast.AsyncFor)):
            always |= target_names(n.target)
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                always |= target_names(item.optional_vars)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            always.add(n.name)
    return always, pairs


def loop_varying(loop: ast.For | ast.AsyncFor | ast.While) -> frozenset[str]:
    always, pairs = assignments(loop.body)
    varying = always | (target_names(loop.target) if isinstance(loop, (ast.For, ast.AsyncFor)) else set())
    changed = True
    while changed:
        changed = False
        for names, value in pairs:
            if names <= varying:
                continue
            if any(isinstance(n, ast.Call) for n in ast.walk(value)) or names_in(value) & (varying | names):
                varying |= names
                changed = True
    return frozenset(varying)


def local_roots(stmts: list[ast.stmt]) -> dict[str, frozenset[str]]:
    """``local -> roots of everything assigned to it`` in one scope (a constructor call: FRESH)."""
    out: dict[str, set[str]] = {}
    for n in statements(stmts):
        if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
            value_roots = roots(n.value)
            for t in targets(n):
                for name in target_names(t):
                    out.setdefault(name, set()).update(value_roots)
        elif isinstance(n, (ast.For, ast.AsyncFor)):
            iter_names = names_in(n.iter)
            for name in target_names(n.target):
                out.setdefault(name, set()).update(iter_names)
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            for item in n.items:
                for name in target_names(item.optional_vars):
                    out.setdefault(name, set()).update(roots(item.context_expr))
    return {k: frozenset(v) for k, v in out.items()}


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of attributes on a name, else ''."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super" and not parts:
        return "super()"
    return ""


def _decorator_kind(node: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> str:
    names = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
    if not in_class:
        return "function"
    return "staticmethod" if "staticmethod" in names else "classmethod" if "classmethod" in names else "method"


@dataclass
class ClassInfo:
    """A class: its methods' scopes and its bases as written (dotted names)."""

    name: str
    bases: tuple[str, ...] = ()
    methods: dict[str, Scope] = field(default_factory=dict)


class FileScan:
    """Every scope of one parsed file. Only the dotted calls that ``wanted(dotted)`` says may resolve into the given
    sources are kept, with every call inside a loop (for the note on calls left unresolved)."""

    def __init__(self, module: str, tree: ast.Module, wanted) -> None:
        self.module = module
        self.wanted = wanted
        self.functions: dict[str, Scope] = {}
        self.classes: dict[str, ClassInfo] = {}
        self.scopes: list[Scope] = []
        self.top = Scope(module, "<module>", kind="module")
        self.scopes.append(self.top)
        self.top.local_roots = local_roots(tree.body)
        _Visitor(self, self.top, tree.body).block(tree.body, ())
        self.wanted = None  # a closure over the audit's other files: not kept (the scan is cached, pickled)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, parent: Scope, cls: str | None = None) -> None:
        nested = parent is not self.top and cls is None
        args = node.args
        scope = Scope(self.module, f"{parent.name}.{node.name}" if nested else f"{cls}.{node.name}" if cls else node.name,
                      cls=cls if cls else parent.cls, params=tuple(a.arg for a in [*args.posonlyargs, *args.args]),
                      kind=_decorator_kind(node, cls is not None), parent=parent if nested else None)
        scope.npos = len(scope.params)
        scope.params += tuple(a.arg for a in args.kwonlyargs)
        scope.local_roots = local_roots(node.body)
        if cls:
            self.classes[cls].methods.setdefault(node.name, scope)
        elif nested:
            parent.children.setdefault(node.name, scope)
        else:
            self.functions.setdefault(node.name, scope)
        self.scopes.append(scope)
        _Visitor(self, scope, node.body).block(node.body, ())

    def klass(self, node: ast.ClassDef, parent: Scope, outer: str | None = None) -> None:
        name = f"{outer}.{node.name}" if outer else node.name
        if parent is not self.top and not outer:
            return  # a class inside a function: its methods are not reachable by name
        self.classes.setdefault(name, ClassInfo(name, tuple(_dotted(b) for b in node.bases)))
        for s in node.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.function(s, parent, cls=name)
            elif isinstance(s, ast.ClassDef):
                self.klass(s, parent, outer=name)


Stack = tuple[tuple[ast.AST, str, frozenset[str]], ...]


class _Visitor:
    """Walks one scope's statements with the loops around each expression, recording its sites."""

    def __init__(self, file: FileScan, scope: Scope, body: list[ast.stmt]) -> None:
        self.file, self.scope = file, scope
        self.parents = parent_map(body)
        self.self_name = scope.self_name or _enclosing_self(scope)
        self.trees: dict[int, tuple[str, str]] = {}

    def block(self, stmts: list[ast.stmt], loops: Stack) -> None:
        for s in stmts:
            self.stmt(s, loops)

    def stmt(self, s: ast.stmt, loops: Stack) -> None:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.file.function(s, self.scope)
        elif isinstance(s, ast.ClassDef):
            self.file.klass(s, self.scope)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter, loops, s, "iter")  # the iterable is evaluated once, outside the loop
            self.block(s.body, (*loops, (s, "repeat" if repeats(s) else "for", loop_varying(s))))
            self.block(s.orelse, loops)
        elif isinstance(s, ast.While):
            inner = (*loops, (s, "while", loop_varying(s)))
            self.expr(s.test, inner, s, "test")  # the test is evaluated every iteration
            self.block(s.body, inner)
            self.block(s.orelse, loops)
        elif isinstance(s, ast.If):
            self.expr(s.test, loops, s, "test")
            self.block(s.body, loops)
            self.block(s.orelse, loops)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.expr(item.context_expr, loops, s, "items")
            self.block(s.body, loops)
        elif isinstance(s, ast.Match):
            self.expr(s.subject, loops, s, "expr")
            for case in s.cases:
                self.block(case.body, loops)
        elif any(isinstance(getattr(s, f, None), list) for f in ("handlers", "finalbody")):  # try
            self.block(s.body, loops)
            for handler in s.handlers:
                self.block(handler.body, loops)
            self.block(s.orelse, loops)
            self.block(s.finalbody, loops)
        else:
            self.expr(s, loops, s, "expr")

    def expr(self, node: ast.AST, loops: Stack, stmt: ast.stmt, where: str) -> None:
        stack: list[tuple[ast.AST, Stack]] = [(node, loops)]
        inner_walks: set[int] = set()
        while stack:
            n, ls = stack.pop()
            if isinstance(n, (ast.Lambda, *DEFS)) and n is not stmt:
                continue
            if isinstance(n, COMPREHENSIONS):
                gens = n.generators
                stack.append((gens[0].iter, ls))  # evaluated once, where the comprehension stands
                inner = (*ls, (n, "comprehension", frozenset(set().union(*(target_names(g.target) for g in gens)))))
                stack += [(g.iter, inner) for g in gens[1:]] + [(c, inner) for g in gens for c in g.ifs]
                parts = (n.key, n.value) if isinstance(n, ast.DictComp) else (n.elt,)
                stack += [(p, inner) for p in parts]
                continue
            if isinstance(n, ast.Call) and id(n) not in inner_walks:
                self.call(n, ls, stmt, where, inner_walks)
            stack.extend((c, ls) for c in ast.iter_child_nodes(n))

    def loop_refs(self, loops: Stack, stmt: ast.stmt, where: str) -> tuple[LoopRef, ...]:
        return tuple(LoopRef(node.lineno, kind, varying,
                             kind != "comprehension" and leaves_loop(node, stmt, where, self.parents),
                             *self.tree_of(node),
                             pinned=pinned(node, stmt, self.parents) if kind in ("for", "repeat") else 0)
                     for node, kind, varying in loops)

    def tree_of(self, loop: ast.AST) -> tuple[str, str]:
        """(the receiver, the walk) when ``loop`` goes over a whole-tree walk (``for n, b in self.named_buffers()``,
        ``[... for k in model.state_dict()]``): a walk of that tree inside it makes B = N."""
        if id(loop) not in self.trees:
            it = loop.generators[0].iter if isinstance(loop, COMPREHENSIONS) else getattr(loop, "iter", None)
            found = ("", "")
            for n in ast.walk(it) if it is not None else ():
                walk = match_walk(n) if isinstance(n, ast.Call) else None
                if walk is not None and not walk.partial and walk.receiver is not None:
                    found = (_dotted(walk.receiver), walk_text(n))
                    break
            self.trees[id(loop)] = found if found[0] else ("", "")
        return self.trees[id(loop)]

    def call(self, n: ast.Call, loops: Stack, stmt: ast.stmt, where: str, inner_walks: set[int]) -> None:
        first = first_only(n)
        if first is not None:
            inner_walks.add(id(first))
            return
        walk: Walk | None = wrapped_walk(n)
        if walk is not None:
            inner_walks.add(id(walk.call))
        else:
            walk = match_walk(n)
        if walk is not None:
            self.scope.sites.append(Site(n.lineno, n.col_offset, self.loop_refs(loops, stmt, where), walk_text(n),
                                         walk=walk.method, partial=walk.partial,
                                         kept=kept_on_the_object(stmt, self.parents),
                                         receiver=roots(walk.receiver, self.self_name),
                                         tree=_dotted(walk.receiver) if walk.receiver is not None else "",
                                         default_of=default_of(stmt, self.parents, self.scope.params)))
            return
        callee = self.callee(n.func, bool(loops))
        if not callee:
            return
        starred = [a.value for a in n.args if isinstance(a, ast.Starred)]
        starred += [k.value for k in n.keywords if k.arg is None]
        self.scope.sites.append(Site(
            n.lineno, n.col_offset, self.loop_refs(loops, stmt, where), walk_text(n.func, 80), callee=callee,
            args=tuple(None if isinstance(a, ast.Starred) else roots(a, self.self_name) for a in n.args),
            kwargs=tuple((k.arg, roots(k.value, self.self_name)) for k in n.keywords if k.arg),
            spread=frozenset(set().union(*(names_in(s) for s in starred))) if starred else frozenset(),
            arg_trees=tuple(_dotted(a) for a in n.args),
            kwarg_trees=tuple((k.arg, _dotted(k.value)) for k in n.keywords if k.arg),
            receiver=roots(n.func.value, self.self_name) if isinstance(n.func, ast.Attribute) else frozenset(),
            default_of=default_of(stmt, self.parents, self.scope.params)))

    def callee(self, func: ast.AST, in_loop: bool) -> tuple[str, ...]:
        if isinstance(func, ast.Name):
            return ("name", func.id) if func.id not in BUILTINS else ()
        if not isinstance(func, ast.Attribute):
            return ()
        base = _dotted(func.value)
        head = base.split(".")[0]
        if base in ("super()", self.self_name, "cls") or head in self.file.classes or self.file.wanted(base):
            return ("attr", base, func.attr)
        return ("attr", "", func.attr) if in_loop else ()


def repeats(loop: ast.For | ast.AsyncFor) -> bool:
    """``for _ in range(k):``: a loop that names no item repeats its body on purpose (warm-ups, training
    steps, retries); a walk in it is walked again by design, not once per item of anything."""
    return (isinstance(loop.target, ast.Name) and loop.target.id.startswith("_") and isinstance(loop.iter, ast.Call)
            and isinstance(loop.iter.func, ast.Name) and loop.iter.func.id == "range")


def _enclosing_self(scope: Scope) -> str | None:
    """The ``self`` of the method a nested function is defined in (for ``self.m()`` inside it)."""
    s = scope.parent
    while s is not None:
        if s.self_name:
            return s.self_name
        s = s.parent
    return None


BUILTINS = frozenset(dir(builtins))
