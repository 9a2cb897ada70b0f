"""The files an audit reads: paths walked, each file read (bounded) and parsed, its module name, imports and
suppression comments.

Each file is named as Python would import it, so that an import in one file resolves to a def in
another; nothing is imported or run. A path that cannot be audited becomes one failure line and the
audit goes on (a skipped file would read as "nothing found"). Only regular files are read, opened
non-blocking and up to the size cap: a FIFO or ``/dev/zero`` handed to a hook must not hang it."""

from __future__ import annotations

import ast
import fnmatch
import gc
import os
import pickle
import re
import stat
import sys
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmniLoaderError
from .limits import MAX_FILE_BYTES
from .scan import FileScan, statements

# an omni-loader ignore comment silences every rule on its line; a noqa comment the OL codes it lists
SUPPRESS = re.compile(rb"#\s*(?:(omni-loader:\s*ignore)\b|noqa:([^#\n]*))", re.IGNORECASE)
CODES = re.compile(rb"\bOL\d*\b", re.IGNORECASE)
IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")
# string literals and comments, left out when names are counted (an error message naming a function calls
# nothing); roughly: a name inside an f-string's braces is left out too
STRINGS = re.compile(rb'(?s)("""|\'\'\').*?\1|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|#[^\n]*')
SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


class SourceError(OmniLoaderError):
    """A path to audit that is missing, unreadable, not a regular file, too large or not Python."""


@dataclass
class SourceFile:
    """One parsed file, reduced to what the cross-file pass needs."""

    display: str  # the path as the user will read it
    module: str
    is_package: bool
    imports: dict[str, tuple[str, ...]]  # alias -> ('module', name) | ('from', module, name); also
    # 'a.b.c' -> ('module', 'a.b.c') for ``import a.b.c`` and '*m' -> ('star', m) for ``from m import *``
    suppressed: dict[int, frozenset[str]]  # line -> the codes its comment silences ('*': all)
    scan: FileScan
    lines: dict[int, str]  # the stripped text of every line holding a walk (a baseline's key)
    import_tops: frozenset[str] = frozenset()  # the top-level packages the file imports from
    tops_seen: frozenset[str] = frozenset()  # those among the audited sources when it was scanned (cache check)
    unnamed: frozenset[str] = frozenset()  # module-level functions whose name the file holds only in their def

    def silenced(self, line: int, rule: str) -> bool:
        codes = self.suppressed.get(line)
        return bool(codes) and any(c == "*" or rule.startswith(c) for c in codes)


def excluded(path: Path, patterns: Sequence[str]) -> bool:
    """Does a glob of ``patterns`` match ``path`` (``*/testing/*``, ``py312_*.py``: the path or its name)?"""
    text = path.as_posix()
    return any(fnmatch.fnmatch(text, p) or fnmatch.fnmatch(path.name, p) for p in patterns)


def not_regular(mode: int) -> str:
    """What a path that is not a regular file is, in words ('' for a regular file)."""
    if stat.S_ISREG(mode):
        return ""
    return next((word for test, word in KINDS if test(mode)), "not a regular file")


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def expand(paths: Iterable[str | Path], exclude: Sequence[str] = ()) -> tuple[list[Path], list[str]]:
    """(files named, and every ``*.py`` below folders named, hidden and ``__pycache__`` folders and links to folders
    skipped, less those an ``exclude`` glob matches; one line per path that cannot be audited)."""
    out: dict[Path, Path] = {}
    failures: list[str] = []
    for given in paths:
        path = Path(given)
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            failures.append(f"{given}: no such file or directory")
            continue
        except OSError as exc:
            failures.append(f"{given}: cannot read: {_why(exc)}")
            continue
        if not stat.S_ISDIR(mode):
            kind = not_regular(mode)
            if kind:
                failures.append(f"{given}: {kind}, not a regular file: refused")
            elif not excluded(path, exclude):
                out.setdefault(path.resolve(), path)
            continue
        found: list[Path] = []
        for root, dirs, names in os.walk(path, onerror=lambda exc: failures.append(
                f"{exc.filename}: cannot list this folder: {_why(exc)}")):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS]
            found += (Path(root, n) for n in names if n.endswith(".py"))
        for f in sorted(found):
            if not excluded(f, exclude):
                out.setdefault(f.resolve(), f)
    return list(out.values()), failures


def read_bounded(path: str | Path, limit: int = MAX_FILE_BYTES, option: str = "--max-file-size") -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (0: no cap), or a :class:`SourceError`;
    opened non-blocking (a FIFO does not wait) and checked on the descriptor (what was opened is what is read)."""
    try:
        kind = not_regular(os.stat(path).st_mode)  # a socket cannot even be opened: said for what it is
        if kind:
            raise SourceError(f"{path}: {kind}, not a regular file: refused")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {_why(exc)}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        kind = not_regular(info.st_mode)
        if kind:
            raise SourceError(f"{path}: {kind}, not a regular file: refused")
        if limit and info.st_size > limit:
            raise SourceError(f"{path}: {info.st_size:,} bytes, over the {limit:,}-byte cap: refused "
                              f"({option} BYTES raises it, {option} 0 lifts it)")
        os.set_blocking(fd, True)
        try:
            data = fh.read(limit + 1) if limit else fh.read()
        except OSError as exc:
            raise SourceError(f"{path}: cannot read: {_why(exc)}") from None
    if limit and len(data) > limit:
        raise SourceError(f"{path}: over the {limit:,}-byte cap (it grew while read): refused "
                          f"({option} BYTES raises it, {option} 0 lifts it)")
    return data


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
    for node in statements(tree.body, into_defs=True):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    imports[a.asname] = ("module", a.name)
                else:
                    imports.setdefault(a.name.split(".")[0], ("module", a.name.split(".")[0]))
                    imports.setdefault(a.name, ("module", a.name))  # no alias can hold a dot: no clash
        elif isinstance(node, ast.ImportFrom):
            base = relative_base(module, is_package, node.level, node.module)
            for a in node.names:
                if a.name != "*":
                    imports.setdefault(a.asname or a.name, ("from", base, a.name))
                else:
                    imports.setdefault("*" + base, ("star", base))
    return imports


def parse(display: str, data: bytes) -> ast.Module:
    """The syntax tree of ``data`` (its coding cookie honoured), or one line naming the file and what is wrong."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like are not ours to report
            return ast.parse(data, filename=display)
    except SyntaxError as exc:
        raise SourceError(f"{display}:{exc.lineno or 0}: cannot parse: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise SourceError(f"{display}: too deeply nested for Python's parser: not audited") from None
    except ValueError as exc:  # a null byte, an unknown coding cookie, bytes its coding cannot decode
        raise SourceError(f"{display}: cannot parse: {exc}") from None


def suppressions(data: bytes) -> dict[int, frozenset[str]]:
    """``line -> codes`` of every ignore comment (found in the bytes: the comments are ASCII in any coding)."""
    out: dict[int, frozenset[str]] = {}
    for m in SUPPRESS.finditer(data):
        codes = {"*"} if m.group(1) else {c.decode().upper() for c in CODES.findall(m.group(2))}
        if codes:
            out[data.count(b"\n", 0, m.start()) + 1] = frozenset(codes)
    return out


def build(display: str, module: str, package: bool, data: bytes, tops: frozenset[str]) -> SourceFile:
    """One file parsed, scanned and reduced (the tree is dropped), or a :class:`SourceError` naming it.
    ``tops``: the top-level packages of every audited file (a dotted call into one of them is followed)."""
    tree = parse(display, data)
    imports = collect_imports(tree, module, package)
    import_tops = frozenset(kind[1].split(".")[0] for kind in imports.values())

    def wanted(base: str) -> bool:
        kind = imports.get(base.split(".")[0])
        return bool(kind) and kind[1].split(".")[0] in tops

    try:
        scan = FileScan(module, tree, wanted)
    except (RecursionError, MemoryError):
        raise SourceError(f"{display}: too deeply nested for the audit: not audited") from None
    walk_lines = {s.line for scope in scan.scopes for s in scope.sites if s.walk}
    lines = {}
    if walk_lines:
        text = data.split(b"\n")
        lines = {n: text[n - 1].strip().decode("utf-8", "replace") for n in walk_lines if n <= len(text)}
    unnamed: frozenset[str] = frozenset()
    if scan.functions:  # a name met once in the file's text is its def alone: nothing in the file calls it
        seen = Counter(IDENTIFIER.findall(STRINGS.sub(b" ", data)))
        unnamed = frozenset(n for n in scan.functions if seen[n.encode()] <= 1)
    return SourceFile(display, module, package, imports, suppressions(data), scan, lines, import_tops,
                      import_tops & tops, unnamed)


PARALLEL_MIN = 24  # fewer files to parse than this: parsed here (starting processes would cost more)


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a block: with it on, parsing and unpickling ran 2-10x slower
    (each allocation burst walked every object alive); syntax trees hold no cycles."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _scan_job(job: tuple[str, str, bool, bytes, frozenset[str]]) -> bytes | str:
    """In a worker: the pickled :class:`SourceFile` of one file, or its one failure line."""
    gc.disable()  # a worker's whole life is parsing (see gc_paused)
    result = _scan_serial(job)
    return result if isinstance(result, str) else (
        _pickled(result) or f"{job[0]}: too deeply nested for the audit: not audited")


def _scan_serial(job: tuple[str, str, bool, bytes, frozenset[str]]) -> SourceFile | str:
    try:
        return build(*job)
    except SourceError as exc:
        return str(exc)


def scan_jobs(jobs: list[tuple[str, str, bool, bytes, frozenset[str]]], workers: int | None = None) -> list:
    """Each job's :class:`SourceFile` (pickled, from a worker) or failure line, in order: across ``workers``
    processes (default: every CPU), or here for a handful of files or where processes cannot be started."""
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) // 8 or 1))
    if workers > 1 and len(jobs) >= PARALLEL_MIN:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # fork: nothing to import again; only from a single thread (a fork can copy a held lock)
        method = "fork" if ("fork" in multiprocessing.get_all_start_methods()
                            and threading.active_count() == 1 and sys.platform != "darwin") else None
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
                return list(pool.map(_scan_job, jobs, chunksize=max(1, min(64, len(jobs) // (workers * 4)))))
        except (OSError, BrokenProcessPool):  # no processes to be had here (a sandbox, a limit): one by one
            pass
    return [_scan_serial(job) for job in jobs]


def read_sources(paths: Iterable[str | Path], exclude: Sequence[str] = (), max_bytes: int = MAX_FILE_BYTES,
                 workers: int | None = None, cache=None) -> tuple[list[SourceFile], list[str]]:
    """(every file under ``paths``, less ``exclude`` globs, parsed, scanned and reduced; one line per path that
    could not be audited). ``cache``: a :class:`~.cache.Cache` (None: none) holding earlier scans by content."""
    from .cache import key

    files, failures = expand(paths, exclude)
    names = [module_name(f) for f in files]
    tops = frozenset(n.split(".")[0] for n, _ in names)
    done: dict[int, SourceFile] = {}
    todo: list[tuple[int, str, tuple[str, str, bool, bytes, frozenset[str]]]] = []
    for i, (path, (module, package)) in enumerate(zip(files, names)):
        try:
            data = read_bounded(path, max_bytes)
        except SourceError as exc:
            failures.append(str(exc))
            continue
        name = key(module, package, data) if cache is not None else ""
        hit = _unpickle(cache.get(name)) if cache is not None else None
        if hit is not None and hit.import_tops & tops == hit.tops_seen:  # the same files among the sources
            hit.display = str(path)
            cache.used += 1
            done[i] = hit
            continue
        todo.append((i, name, (str(path), module, package, data, tops)))
    for (i, name, _), result in zip(todo, scan_jobs([job for *_, job in todo], workers)):
        if isinstance(result, str):
            failures.append(result)
            continue
        if isinstance(result, bytes):
            blob, result = result, pickle.loads(result)
        else:
            blob = _pickled(result) if cache is not None else b""
        if blob and cache is not None:
            cache.put(name, blob)
        done[i] = result
    return [done[i] for i in sorted(done)], failures


def _pickled(source: SourceFile) -> bytes:
    try:
        return pickle.dumps(source, pickle.HIGHEST_PROTOCOL)
    except RecursionError:  # deeply nested functions: audited, not cached
        return b""


def _unpickle(blob: bytes | None) -> SourceFile | None:
    """A cached scan, or None (none, or one this version cannot read: scanned again)."""
    if blob is None:
        return None
    try:
        found = pickle.loads(blob)
    except Exception:  # noqa: BLE001 - a torn or stale entry is a miss, nothing more
        return None
    return found if isinstance(found, SourceFile) else None
