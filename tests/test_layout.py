"""The package's shape: no import cycle, argparse only in the command layer, rendering without torch.

These pin the layout rules a newcomer relies on when changing one module: imports flow one way
(a cycle would make import order matter), a library function never needs a Namespace (notebooks
and tests call it with typed values), and re-rendering saved results stays free of torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "omni_loader"
COMMAND_LAYER = PACKAGE / "cli"
MAX_LINES = 400


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
    assert ("omni_loader.cli.traversal", "omni_loader.traversal") in edges  # imported inside cmd_traversal


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


def test_no_module_over_the_limit() -> None:
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


@pytest.mark.parametrize("code", [
    "from omni_loader.cli import build_parser; build_parser()",
    "import omni_loader.report, omni_loader.plots, omni_loader.compare, omni_loader.results, omni_loader.stats",
])
def test_rendering_and_the_parser_import_no_torch(code: str) -> None:
    probe = f"{code}; import sys; print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


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


def test_public_api_resolves_and_is_listed_in_the_docstring() -> None:
    """Every name of ``omni_loader.__all__`` imports from the module the API list gives, and the list says so."""
    import importlib

    import omni_loader

    for name, module in omni_loader._API.items():
        assert getattr(importlib.import_module(f"omni_loader.{module}"), name) is getattr(omni_loader, name), name
        assert f"``{name}``" in omni_loader.__doc__, f"{name} missing from the API list in omni_loader/__init__.py"


def test_readme_layout_names_every_module() -> None:
    layout = (PACKAGE.parent / "README.md").read_text().split("## Layout", 1)[1]
    names = {module_name(p).split(".")[1] for p in PACKAGE.rglob("*.py") if module_name(p) != "omni_loader"} - {"__main__"}
    missing = sorted(n for n in names if n not in layout)
    assert not missing, f"README's layout section does not name: {missing}"
