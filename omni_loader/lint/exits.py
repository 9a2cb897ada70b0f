"""Whether a walk written inside a loop runs on every iteration, or once before the loop is left.

"Look a name up, return the first match" walks once, not B times; ``if sd()[x] is t: break`` walks on
every iteration until the match. The rule: once the walk is evaluated, does every path through the rest
of the body leave the loop (``break``, ``return``, ``raise``)? Outcomes of a block: ``exit``, ``break``,
``continue``, ``through``. A branch holding the loop's item to k constants runs at most k times
(:func:`pinned`)."""

from __future__ import annotations

import ast

LOOPS = (ast.For, ast.AsyncFor, ast.While)
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)
Parents = dict[int, tuple[ast.AST | None, list[ast.stmt], int]]


def blocks(s: ast.stmt):
    """The blocks of statements nested in ``s``: body, else, finally, each handler's and each case's."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(s, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    yield from (handler.body for handler in getattr(s, "handlers", ()))
    yield from (case.body for case in getattr(s, "cases", ()))


def parent_map(body: list[ast.stmt]) -> Parents:
    """``id(statement) -> (owner statement or None, the block holding it, its index)`` for one scope."""
    out: Parents = {}

    def visit(owner: ast.AST | None, block: list[ast.stmt]) -> None:
        for i, s in enumerate(block):
            out[id(s)] = (owner, block, i)
            if not isinstance(s, DEFS):
                for sub in blocks(s):
                    visit(s, sub)

    visit(None, body)
    return out


def block_outcomes(stmts: list[ast.stmt]) -> set[str]:
    """What may happen when ``stmts`` run from the top."""
    out: set[str] = set()
    for s in stmts:
        o = stmt_outcomes(s)
        out |= o - {"through"}
        if "through" not in o:
            return out
    return out | {"through"}


def stmt_outcomes(s: ast.stmt) -> set[str]:
    if isinstance(s, (ast.Return, ast.Raise)):
        return {"exit"}
    if isinstance(s, ast.Break):
        return {"break"}
    if isinstance(s, ast.Continue):
        return {"continue"}
    if isinstance(s, ast.If):
        return block_outcomes(s.body) | block_outcomes(s.orelse)
    if isinstance(s, (ast.With, ast.AsyncWith)):
        return block_outcomes(s.body)
    if isinstance(s, TRY):
        o = block_outcomes(s.body)
        if "through" in o and s.orelse:
            o = (o - {"through"}) | block_outcomes(s.orelse)
        for handler in s.handlers:
            o |= block_outcomes(handler.body)
        if s.finalbody:
            final = block_outcomes(s.finalbody)
            o = final if "through" not in final else o
        return o
    if isinstance(s, ast.Match):
        return set().union(*(block_outcomes(c.body) for c in s.cases)) | {"through"}
    return {"through"}  # a plain statement, or a loop (which may run zero times)


def leaves_loop(loop: ast.AST, stmt: ast.stmt, where: str, parents: Parents) -> bool:
    """True when, once the walk in ``stmt`` is evaluated, ``loop`` is surely left before its next iteration,
    or the walk's result is kept and the walk guarded by ``if kept is None`` (:func:`cache_guard`)."""
    if cache_guard(stmt, parents, stop=loop) is not None:
        return True
    # a return's or raise's value, an if's test, a with's items: what the statement holds runs next
    holds = (isinstance(stmt, (ast.Return, ast.Raise)) or (where == "test" and isinstance(stmt, ast.If))
             or (where == "items" and isinstance(stmt, (ast.With, ast.AsyncWith))))
    outcomes = stmt_outcomes(stmt) if holds else {"through"}
    node: ast.AST = stmt
    while True:
        if id(node) not in parents:
            return False
        owner, block, index = parents[id(node)]
        if "through" in outcomes:
            outcomes = (outcomes - {"through"}) | block_outcomes(block[index + 1:])
        if owner is loop:
            return bool(outcomes) and outcomes <= {"exit", "break"}
        if owner is None:
            return False
        if isinstance(owner, LOOPS) and block is owner.body:  # an inner loop: break/continue stay inside it
            outcomes = {o if o == "exit" else "through" for o in outcomes}
        node = owner


def _none_test(test: ast.AST, target: str) -> bool:
    """``target is None``, ``not target`` (alone or in an ``and``/``or``); ``target`` as written (``self._sd``)."""
    if isinstance(test, ast.BoolOp):
        return any(_none_test(v, target) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand) == target
    return (isinstance(test, ast.Compare) and ast.unparse(test.left) == target
            and isinstance(test.ops[0], (ast.Is, ast.Eq)) and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None)


def targets(stmt: ast.stmt) -> list[ast.expr]:
    """What an assignment statement assigns to (none for any other statement)."""
    return stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []


def cache_guard(stmt: ast.stmt, parents: Parents, stop: ast.AST | None = None) -> ast.AST | None:
    """The ``if kept is None:`` (below ``stop``) that guards ``kept = model.state_dict()``: a walk made on first
    need and kept. None when ``stmt`` assigns no name or attribute, or nothing guards it."""
    kept = {ast.unparse(t) for t in targets(stmt) if isinstance(t, (ast.Name, ast.Attribute))}
    node: ast.AST = stmt
    while kept and id(node) in parents:
        owner, block, _ = parents[id(node)]
        if owner is None or owner is stop:
            return None
        if isinstance(owner, ast.If) and block is owner.body and any(_none_test(owner.test, k) for k in kept):
            return owner
        node = owner
    return None


def kept_on_the_object(stmt: ast.stmt, parents: Parents) -> bool:
    """``if self._sd is None: self._sd = self.state_dict()``: walked once for the object, not once per call."""
    return cache_guard(stmt, parents) is not None and all(isinstance(t, ast.Attribute) for t in targets(stmt))


def _pins(test: ast.AST, names: set[str]) -> int:
    """How many constants ``test`` holds one of ``names`` to (``n == "a"``: 1, ``n in ("a", "b")``: 2), else 0."""
    if isinstance(test, ast.BoolOp):
        ks = [_pins(v, names) for v in test.values]
        if isinstance(test.op, ast.And):
            return min((k for k in ks if k), default=0)
        return sum(ks) if all(ks) else 0
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return 0
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(op, ast.Eq):
        if isinstance(right, ast.Name):
            left, right = right, left
        return int(isinstance(left, ast.Name) and left.id in names and isinstance(right, ast.Constant))
    if (isinstance(op, ast.In) and isinstance(left, ast.Name) and left.id in names
            and isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts
            and all(isinstance(e, ast.Constant) for e in right.elts)):
        return len({e.value for e in right.elts})
    return 0


def pinned(loop: ast.For | ast.AsyncFor, stmt: ast.stmt, parents: Parents) -> int:
    """k when ``stmt`` runs only inside a branch (below ``loop``) that holds the loop's own item to k constants,
    else 0. Only the item, or the first of a tuple of targets (a key), counts: any other name may repeat."""
    target = loop.target.elts[0] if isinstance(loop.target, (ast.Tuple, ast.List)) and loop.target.elts \
        else loop.target
    names = {target.id} if isinstance(target, ast.Name) else set()
    best, node = 0, stmt
    while id(node) in parents:
        owner, block, _ = parents[id(node)]
        if owner is None:
            return 0
        if owner is loop:
            return best
        if isinstance(owner, ast.If) and block is owner.body and (k := _pins(owner.test, names)):
            best = min(best, k) if best else k
        node = owner
    return 0


def default_of(stmt: ast.stmt, parents: Parents, params: tuple[str, ...]) -> str:
    """The parameter ``stmt`` gives a value only when the caller left it out (``if device is None: device =
    find_device(model)``), else ''. A call that passes that argument skips the statement."""
    guard = cache_guard(stmt, parents)
    if guard is None:
        return ""
    return next((t.id for t in targets(stmt) if isinstance(t, ast.Name) and t.id in params
                 and _none_test(guard.test, t.id)), "")  # type: ignore[attr-defined]
