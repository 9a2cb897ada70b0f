"""The package's shape: no import cycle, argparse only in the command layer, rendering without torch.

These pin the layout rules a newcomer relies on when changing one module: imports flow one way
(a cycle would make import order matter), a library function never needs a Namespace (notebooks
and tests call it with typed values), and re-rendering saved results stays free of torch.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)

PACKAGE = Path(__file__).resolve().parent.parent / "omni_loader"
COMMAND_LAYER = PACKAGE / "cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> set[str]:
    """Every omni_loader module ``path`` imports, at the top or inside a function (a lazy import is still an edge)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("omni_loader")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("omni_loader"):
                continue
            for alias in node.names:  # `from . import flamegraph` imports a module, not a name
                sub = f"{target}.{alias.name}"
                found.add(sub if (PACKAGE.parent / (sub.replace(".", "/") + ".py")).exists()
                          or (PACKAGE.parent / sub.replace(".", "/")).is_dir() else target)
    return found - {name}


def import_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in PACKAGE.rglob("*.py"):
        graph.add_node(module_name(path))
        for target in imported_modules(path):
            # importing omni_loader.x.y runs omni_loader.x's __init__ first: that is not a dependency on it
            if target != "omni_loader":
                graph.add_edge(module_name(path), target)
    return graph


def test_import_graph_sees_lazy_imports() -> None:
    edges = set(import_graph().edges)
    assert ("omni_loader.cli.traversal", "omni_loader.sweep.traversal") in edges  # imported inside cmd_traversal


def test_no_import_cycle() -> None:
    cycles = [c for c in nx.simple_cycles(import_graph()) if len(c) > 1]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c + c[:1]) for c in sorted(cycles, key=len)[:10])


def test_namespace_only_in_the_command_layer() -> None:
    offenders = [f"{p.relative_to(PACKAGE.parent)}:{i}" for p in PACKAGE.rglob("*.py") if COMMAND_LAYER not in p.parents
                 for i, line in enumerate(p.read_text().splitlines(), 1) if "Namespace" in line or "argparse" in line]
    assert not offenders, f"argparse outside omni_loader/cli/: {offenders}"


def test_no_private_name_crosses_a_module_boundary() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("omni_loader")):
                offenders += [f"{module_name(path)}: {a.name}" for a in node.names
                              if a.name.startswith("_") and not a.name.startswith("__")]
    assert not offenders, f"private names imported from another module: {offenders}"


@pytest.mark.subprocess
@pytest.mark.parametrize("code", [
    "from omni_loader.cli import build_parser; build_parser()",
    "import omni_loader.reporting.report, omni_loader.reporting.plots, omni_loader.compare.reproductions, omni_loader.results, omni_loader.reporting.stats",
])
def test_rendering_and_the_parser_import_no_torch(code: str) -> None:
    probe = f"{code}; import sys; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


@pytest.mark.slow
@pytest.mark.subprocess
def test_report_command_runs_without_torch(tmp_path: Path, tiny_snapshot: Path) -> None:
    """``omni-loader report DIR`` re-renders a saved benchmark and never imports torch."""
    from omni_loader.cli import main

    directory = tmp_path / "results"
    assert main(["reproduce", "--checkpoint", str(tiny_snapshot), "--in-process", "--warmup", "0", "--runs", "1",
                 "--out", str(directory)]) == 0
    (directory / "report.md").unlink()
    probe = ("import sys; from omni_loader.cli import main; rc = main(['report', sys.argv[1], '--quiet']); "
             "print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe, str(directory)], capture_output=True, text=True, check=True)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr
    assert (directory / "report.md").stat().st_size > 0


FOLDERS = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def part(module: str) -> str:
    """The folder a module lives in (``omni_loader.results.rows`` -> ``results``), or the top-level module."""
    return module.split(".")[1] if module.count(".") >= 1 else module


def test_folders_import_one_way() -> None:
    """Between folders too, imports flow one way: a folder never reaches back into one that imports it."""
    graph = nx.DiGraph()
    for a, b in import_graph().edges:
        if part(a) != part(b) and b != "omni_loader.lazy":
            graph.add_edge(part(a), part(b))
    cycles = [c for c in nx.simple_cycles(graph) if len(c) > 1]
    assert not cycles, "folders in a cycle: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:10])


def _defined(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _importing_files() -> list[Path]:
    return [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "tests").glob("*.py")]


@pytest.mark.slow
def test_every_name_is_imported_from_the_module_that_defines_it() -> None:
    """One address per name: no module hands on another module's names (a package's ``__init__`` API aside),
    so following an import always lands on the definition."""
    offenders = []
    for path in _importing_files():
        package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("omni_loader"):
                continue
            source = PACKAGE.parent / (target.replace(".", "/") + ".py")
            if not source.exists():
                continue  # a package: its __init__ API is checked below, submodules are modules
            defined = _defined(source)
            offenders += [f"{path.relative_to(PACKAGE.parent)}: {a.name} from {target}" for a in node.names
                          if a.name not in defined]
    assert not offenders, f"names imported from a module that does not define them: {offenders}"


FACE = "omni_loader.notebook"
FACE_IMPORT = "from omni_loader import notebook as kit"


def _notebook_code(notebook: Path) -> ast.Module:
    import json

    cells = json.loads(notebook.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return ast.parse("\n".join("#" + ln if ln.lstrip().startswith(("%", "!")) else ln for ln in code.split("\n")))


FACE_MAX_NAMES = 30  # a few nouns, the verbs that make them and the helpers that show: their methods do the rest


def _undocumented(value: object) -> bool:
    """A function, class or module without a docstring of its own (a dataclass's made-up ``Name(field, ...)``
    signature is not one); constants cannot carry one and are left out."""
    if not (callable(value) or isinstance(value, type(ast))):
        return False
    doc = (value.__doc__ or "").strip()
    return not doc or (isinstance(value, type) and doc.startswith(f"{value.__name__}("))


def test_notebooks_call_the_kit_through_its_notebook_face_alone() -> None:
    """The notebooks import one thing from the kit, its face for notebooks (``from omni_loader import notebook
    as kit``), and use only the names it lists (``kit.tree``, then the tree's methods): an internal move cannot
    break a notebook."""
    import importlib

    face = importlib.import_module(FACE)
    offenders = []
    stored = [*(PACKAGE.parent / "notebooks").glob("*.ipynb"), *(PACKAGE.parent / "docs").glob("*.ipynb")]
    assert any(p.parent.name == "docs" for p in stored), "docs/ shows a notebook of your own written with the face"
    for notebook in sorted(stored):
        tree = _notebook_code(notebook)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("omni_loader"):
                if (node.module, [(a.name, a.asname) for a in node.names]) != ("omni_loader", [("notebook", "kit")]):
                    offenders.append(f"{notebook.name}: {ast.unparse(node)}")
            elif isinstance(node, ast.Import) and any(a.name.startswith("omni_loader") for a in node.names):
                offenders.append(f"{notebook.name}: {ast.unparse(node)}")
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kit"
                  and node.attr not in face.__all__):
                offenders.append(f"{notebook.name}: kit.{node.attr} is not in the face")
        assert FACE_IMPORT in ast.unparse(tree) or "kit" not in ast.unparse(tree), notebook.name
    assert not offenders, f"notebooks reaching past {FACE}: {offenders}"


def test_the_notebook_face_is_a_vocabulary_of_a_few_nouns_each_documented() -> None:
    """The whole face a person learns is at most 30 names, none of them a module of tools offered whole (a
    sub-face is a catalogue by another name): nouns whose methods do the work, the verbs that make them, and the
    helpers that show. Every name resolves and is documented, and so is every public method of the nouns."""
    import importlib
    import inspect

    face = importlib.import_module(FACE)
    names = list(face.__all__)
    assert len(names) <= FACE_MAX_NAMES, f"{FACE} offers {len(names)} names (at most {FACE_MAX_NAMES}): make a noun"
    assert len(set(names)) == len(names), "a face name listed twice"
    assert sorted(dir(face)) == sorted(names)
    modules = [n for n in names if isinstance(getattr(face, n), type(ast))]
    assert not modules, f"modules offered whole as face names: {modules}"
    undocumented = [n for n in names if _undocumented(getattr(face, n))]
    nouns = {n: getattr(face, n) for n in names if inspect.isclass(getattr(face, n))}
    for n, function in [(n, getattr(face, n)) for n in names if inspect.isfunction(getattr(face, n))]:
        returned = str(inspect.signature(function).return_annotation)  # "SavedResults | None", as written
        for word in re.findall(r"\w+", returned):
            cls = function.__globals__.get(word)
            if inspect.isclass(cls) and cls.__module__.startswith("omni_loader"):
                nouns[cls.__name__] = cls
    assert {"SavedResults", "Tree"} <= set(nouns), sorted(nouns)
    undocumented += [f"{cls.__name__}.{m}" for cls in nouns.values() for m, member in vars(cls).items()
                     if not m.startswith("_") and inspect.isfunction(member) and _undocumented(member)]
    assert not undocumented, f"face names or noun methods without a docstring: {undocumented}"
    # A name that is also a module of the folder is replaced by that module once the module is imported
    # (Python sets the attribute on the package), so kit.show would stop being the function after first use.
    shadowed = [n for n in names if (PACKAGE / "notebook" / f"{n}.py").exists()]
    assert not shadowed, f"face names that are also modules of omni_loader/notebook/: {shadowed}"


def test_notebooks_use_each_name_from_the_module_that_defines_it() -> None:
    """The notebooks too: ``report_tables.measurement_table``, never a name another module happens to import."""
    import json

    offenders = []
    for notebook in sorted((PACKAGE.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        tree = ast.parse("\n".join("#" + ln if ln.lstrip().startswith(("%", "!")) else ln for ln in code.split("\n")))
        modules = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("omni_loader"):
                for alias in node.names:
                    path = PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")
                    if path.with_suffix(".py").exists():
                        modules[alias.asname or alias.name] = path.with_suffix(".py")
                    elif not (path / "__init__.py").exists():
                        source = PACKAGE.parent / (node.module.replace(".", "/") + ".py")
                        if source.exists() and alias.name not in _defined(source):
                            offenders.append(f"{notebook.name}: {alias.name} from {node.module}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                if node.attr not in _defined(modules[node.value.id]):
                    offenders.append(f"{notebook.name}: {node.value.id}.{node.attr}")
    assert not offenders, f"names used from a module that does not define them: {sorted(set(offenders))}"


@pytest.mark.parametrize("package", ["omni_loader", *(f"omni_loader.{f}" for f in FOLDERS)])
def test_each_packages_api_resolves_to_its_own_folder(package: str) -> None:
    """A folder's ``__init__`` is its API: every name it lists resolves, and is defined inside the folder
    (the top package's API and the notebooks' face may name any folder's)."""
    import importlib

    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        home = getattr(value, "__module__", None)
        if home and package not in ("omni_loader", FACE):
            assert home == package or home.startswith(package + "."), f"{package}.{name} is defined in {home}"
    if package == "omni_loader":
        assert all(f"``{f}/``" in module.__doc__ for f in FOLDERS), "the package docstring names every folder"


def test_docs_layout_names_every_folder_and_module() -> None:
    layout = (PACKAGE.parent / "docs" / "development.md").read_text().split("## Layout", 1)[1]
    names = {module_name(p).rsplit(".", 1)[1] for p in PACKAGE.rglob("*.py") if module_name(p) != "omni_loader"}
    names = (names | {f"{f}/" for f in FOLDERS}) - {"__main__", *FOLDERS}
    missing = sorted(n for n in names if n not in layout)
    assert not missing, f"docs/development.md's layout section does not name: {missing}"


HISTORY = re.compile(r"\bissues? #?\d|\b(lab|review) pass\b|\bpass\)", re.IGNORECASE)


def test_comments_say_why_not_which_pass_or_issue() -> None:
    """History is git's: a comment citing an issue or a review pass tells what happened once, not why the code is so."""
    found = {str(p.relative_to(PACKAGE)): [f"{n}: {line.strip()}" for n, line in enumerate(p.read_text().split("\n"), 1)
                                           if HISTORY.search(line)] for p in PACKAGE.rglob("*.py")}
    found = {path: lines for path, lines in found.items() if lines}
    assert not found, found
