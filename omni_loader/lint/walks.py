"""What counts as a whole-tree walk of a module, and what a walk's receiver depends on.

``state_dict()``, ``modules()``, ``parameters()``, ``buffers()`` and their ``named_*`` forms visit every
module below the receiver (``named_children()`` and ``recurse=False`` do not); ``get_submodule`` and
``get_module_by_name`` walk one path. The receiver matters as much as the call: a walk of the loop's
own item is the fix, not the mistake, so :func:`roots` names what a receiver is built from."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# method -> the positional index of its ``recurse`` argument (None: it has none)
WALK_METHODS: dict[str, int | None] = {"state_dict": None, "named_modules": None, "modules": None,
                                        "named_parameters": 1, "named_buffers": 1, "parameters": 0, "buffers": 0}
PATH_METHODS = frozenset({"get_submodule"})  # walk from the root along a dotted path
PATH_FUNCTIONS = frozenset({"get_module_by_name"})
WRAPPERS = frozenset({"dict", "list", "set", "tuple"})  # dict(model.named_modules()) is one walk, said whole

# state_dict() is not only a module's: an optimizer, a scheduler, a grad scaler, a sampler or data loader, a
# tokenizer or processor has one too, which walks no module tree. A receiver named like one is left out.
NOT_MODULES = re.compile(r"optim|sched|scaler|sampler|loader|tokenizer|processor", re.IGNORECASE)
FRESH = "<fresh>"  # a receiver made anew where it is used (a constructor call): not the same tree again
GLOBAL = "<global>"  # a receiver that is the same on every call of the function (a module-level name)
# calls that hand back (part of) their argument rather than a new object: their roots are their arguments'
PASS_THROUGH = frozenset({"getattr", "next", "iter", "cast", "super"})
# methods that hand back the module they are called on, moved or cast (``dac.decoder.to(device)``): the tree is
# the receiver's, so their arguments (a device, a dtype) are no part of what the walk's receiver is built from
SAME_MODULE = frozenset({"to", "cuda", "cpu", "float", "half", "bfloat16", "double", "eval", "train",
                         "requires_grad_"})


@dataclass(frozen=True)
class Walk:
    """One whole-tree (or root-to-path) walk found in the source."""

    call: ast.Call  # the walk itself (``model.state_dict()``)
    method: str  # state_dict, named_modules, ..., get_submodule, get_module_by_name
    receiver: ast.expr | None  # the module walked (None: a bare ``get_module_by_name()``)

    @property
    def partial(self) -> bool:
        """True for a walk along a path (``get_submodule``), not over the whole tree."""
        return self.method in PATH_METHODS or self.method in PATH_FUNCTIONS


def _recurse_false(call: ast.Call, index: int | None) -> bool:
    arg = next((kw.value for kw in call.keywords if kw.arg == "recurse"), None)
    if arg is None and index is not None and len(call.args) > index:
        arg = call.args[index]
    return isinstance(arg, ast.Constant) and arg.value is False


def match_walk(call: ast.Call) -> Walk | None:
    """The walk ``call`` is, or None (``named_children()``, ``recurse=False``, anything else)."""
    name = getattr(call.func, "attr", None) or getattr(call.func, "id", "")  # obj.name() or name()
    if name in PATH_FUNCTIONS:
        receiver = call.args[0] if call.args else (call.func.value if isinstance(call.func, ast.Attribute) else None)
        return Walk(call, name, receiver)
    if not isinstance(call.func, ast.Attribute):
        return None
    if name in PATH_METHODS:
        return Walk(call, name, call.func.value)
    if name in WALK_METHODS and not _recurse_false(call, WALK_METHODS[name]):
        if name == "state_dict" and NOT_MODULES.search(final_name(call.func.value)):
            return None
        return Walk(call, name, call.func.value)
    return None


def final_name(node: ast.AST) -> str:
    """The last name a receiver is reached by: ``self.optim`` -> optim, ``opts[i]`` -> opts, ``get_x()`` -> get_x."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


LAZY = frozenset(WALK_METHODS) - {"state_dict"}  # generators: next() on one visits the first module only


def first_only(call: ast.Call) -> ast.Call | None:
    """The lazy walk in ``next(model.parameters())`` (or ``next(iter(...))``): it stops at the first item,
    so it is no whole-tree walk. None for anything else."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "next" and call.args):
        return None
    inner = call.args[0]
    if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == "iter" and inner.args:
        inner = inner.args[0]
    walk = match_walk(inner) if isinstance(inner, ast.Call) else None
    return walk.call if walk is not None and walk.method in LAZY else None


def wrapped_walk(call: ast.Call) -> Walk | None:
    """``dict(model.named_modules())``: the inner walk of a ``dict``/``list``/... of one walk, else None."""
    if isinstance(call.func, ast.Name) and call.func.id in WRAPPERS and len(call.args) == 1:
        inner = call.args[0]
        if isinstance(inner, ast.Call):
            return match_walk(inner)
    return None


def names_in(node: ast.AST | None) -> set[str]:
    """Every name read in ``node``, lambdas (their bodies run later, elsewhere) and called names left out."""
    found: set[str] = set()
    if node is None:
        return found
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):  # getattr(model, n): model, n
            stack.extend(n.args)
            stack.extend(k.value for k in n.keywords)
            continue
        stack.extend(ast.iter_child_nodes(n))
    return found


def roots(receiver: ast.AST | None, self_name: str | None = None) -> frozenset[str]:
    """The names a walk's receiver is built from: ``self.model.encoder`` -> {self}; ``layers[i]`` ->
    {layers, i}; ``super()`` -> {self}; a constructor call -> {FRESH}; ``m.to(device)`` -> m's."""
    if receiver is None:
        return frozenset({GLOBAL})
    while (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)
           and receiver.func.attr in SAME_MODULE):
        receiver = receiver.func.value
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Name):
        if receiver.func.id == "super":
            return frozenset({self_name} if self_name else {GLOBAL})
        if receiver.func.id not in PASS_THROUGH:  # builds something new (``Model(config)``), not an accessor
            return frozenset({FRESH})
    return frozenset(names_in(receiver))


def walk_text(node: ast.AST, limit: int = 120) -> str:
    """The walk as written (normalised by ``ast.unparse``), cut at ``limit`` characters."""
    text = ast.unparse(node)
    return text if len(text) <= limit else text[: limit - 1] + "…"
