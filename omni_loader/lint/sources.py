"""The files an audit reads: paths expanded, each file's module name, imports and suppression comments.

Why module names: ``from .helpers import is_persistent`` in one file and ``def is_persistent`` in
another are the same function only if both files are placed in their packages, so each file is
named as Python would import it (its folders up to the first without an ``__init__.py``). Nothing
is imported or run: every file is read and parsed with :mod:`ast`, once.

A file that cannot be read or parsed stops the audit with one line naming it (exit status 2): an
audit that skipped it would report "nothing found" for code it never read.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tokenize
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmniLoaderError
from .scan import FileScan, all_statements

RULE = "OL001"
SUPPRESS = re.compile(r"#\s*(?:omni-loader:\s*ignore\b|noqa:[^#\n]*\b" + RULE + r"\b)", re.IGNORECASE)
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})


class SourceError(OmniLoaderError):
    """A path to audit that is missing, unreadable or not Python."""


@dataclass
class SourceFile:
    """One parsed file, reduced to what the cross-file pass needs."""

    display: str  # the path as the user will read it
    module: str
    is_package: bool
    imports: dict[str, tuple[str, ...]]  # alias -> ('module', name) | ('from', module, name)
    suppressed: frozenset[int]  # lines with an ignore comment
    scan: FileScan


def excluded(path: Path, patterns: Sequence[str]) -> bool:
    """Does a glob of ``patterns`` match ``path`` (``*/testing/*``, ``py312_*.py``: the path or its name)?"""
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def expand(paths: Iterable[str | Path], exclude: Sequence[str] = ()) -> list[Path]:
    """Files named, and every ``*.py`` below folders named (hidden folders and ``__pycache__`` skipped), less
    those an ``exclude`` glob matches."""
    out: dict[Path, Path] = {}
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise SourceError(f"--source {given}: no such file or directory")
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.py") if p.is_file() and not any(
                part.startswith(".") or part in SKIP_DIRS for part in p.relative_to(path).parts[:-1]))
        else:
            files = [path]
        for f in files:
            if not excluded(f, exclude):
                out.setdefault(f.resolve(), f)
    return list(out.values())


def module_name(path: Path) -> tuple[str, bool]:
    """(``pkg.sub.mod``, is it a package's ``__init__``) as Python would import ``path``."""
    path = path.resolve()
    package = path.name == "__init__.py"
    parts = [] if package else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) or path.parent.name, package


def relative_base(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The module ``from <level dots><name> import ...`` names, seen from ``module``."""
    if not level:
        return name or ""
    parts = module.split(".")
    keep = len(parts) - level + (1 if is_package else 0)
    base = parts[:max(keep, 0)]
    return ".".join(base + ([name] if name else []))


def collect_imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, tuple[str, ...]]:
    """Every import in the file (top level or inside functions: one table for the file)."""
    imports: dict[str, tuple[str, ...]] = {}
    for node in all_statements(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    imports[a.asname] = ("module", a.name)
                else:
                    imports.setdefault(a.name.split(".")[0], ("module", a.name.split(".")[0]))
        elif isinstance(node, ast.ImportFrom):
            base = relative_base(module, is_package, node.level, node.module)
            for a in node.names:
                if a.name != "*":
                    imports.setdefault(a.asname or a.name, ("from", base, a.name))
    return imports


def parse(path: Path) -> tuple[str, ast.Module]:
    """The file's text and syntax tree, or one line naming the file and what is wrong."""
    try:
        with tokenize.open(path) as fh:  # honours a coding cookie
            text = fh.read()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours to report
            return text, ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise SourceError(f"{path}:{exc.lineno or 0}: cannot parse: {exc.msg}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise SourceError(f"{path}: cannot parse: {exc}") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_sources(paths: Iterable[str | Path], exclude: Sequence[str] = ()) -> list[SourceFile]:
    """Every file under ``paths`` (less ``exclude`` globs) parsed, scanned and reduced (the trees are dropped)."""
    files = expand(paths, exclude)
    names = [module_name(f) for f in files]
    tops = {n.split(".")[0] for n, _ in names}
    out = []
    for path, (module, package) in zip(files, names):
        text, tree = parse(path)
        imports = collect_imports(tree, module, package)

        def wanted(base: str, imports: dict[str, tuple[str, ...]] = imports) -> bool:
            kind = imports.get(base.split(".")[0])
            return bool(kind) and kind[1].split(".")[0] in tops

        suppressed = frozenset(i for i, line in enumerate(text.splitlines(), 1) if "#" in line and SUPPRESS.search(line))
        out.append(SourceFile(str(path), module, package, imports, suppressed, FileScan(module, tree, wanted)))
    return out
