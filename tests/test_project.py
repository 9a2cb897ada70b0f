"""The project's own files agree with each other: dependency lists, test command."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from omni_loader.host.requirements import LOCK_NAME, canonical, read_lock

REPO = Path(__file__).resolve().parent.parent


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def pyproject_requirements() -> list[str]:
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    return list(project["dependencies"]) + list(extras["lab"]) + list(extras["dev"])


def environment_pip_requirements(text: str) -> list[str]:
    """The ``- pip:`` list of a conda environment file, read without a YAML library."""
    items: list[str] = []
    pip_indent: int | None = None
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if pip_indent is None:
            if stripped == "- pip:":
                pip_indent = indent
            continue
        if indent <= pip_indent:
            break
        if not stripped.startswith("- "):
            raise AssertionError(f"unexpected line in the pip list of environment.yml: {raw!r}")
        items.append(stripped[2:].strip().strip("'\""))
    assert pip_indent is not None, "environment.yml has no '- pip:' list"
    return items


def test_environment_parser_on_a_sample() -> None:
    sample = "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - a==1  # pinned\n      - 'b>=2'\nother: 1\n"
    assert environment_pip_requirements(sample) == ["a==1", "b>=2"]


def test_environment_file_installs_the_lock_and_the_kit_with_every_extra() -> None:
    env = environment_pip_requirements((REPO / "environment.yml").read_text())
    extras = ",".join(pyproject()["project"]["optional-dependencies"])
    assert env == [f"-r {LOCK_NAME}", f"-e .[{extras}]"]


def test_the_lock_pins_every_requirement_inside_its_range() -> None:
    """Every requirement of pyproject.toml (core and extras) is pinned by the lock, and the pin is in its range:
    the lock is what `make test` installs, the ranges what a user's own environment may hold."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    lock = read_lock()
    assert len(lock) > 50
    for line in pyproject_requirements():
        req = Requirement(line)
        name = canonical(req.name)
        assert name in lock, f"{req.name} is not in {LOCK_NAME}: run `make lock`"
        assert req.specifier.contains(Version(lock[name])), f"{LOCK_NAME} pins {name}=={lock[name]} outside {line}"
    assert lock["torch"] == "2.13.0" and lock["transformers"] == "5.24.0"  # the embedded default's figures


def test_no_platform_package_is_pinned_exactly_in_the_metadata() -> None:
    """torch and transformers are ranges: a ROCm build (2.x+rocm…) and vLLM-Omni's transformers must satisfy them."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    reqs = {canonical(Requirement(r).name): Requirement(r) for r in pyproject_requirements()}
    for name, version in (("torch", "2.13.0+rocm7.1"), ("torch", "2.9.0"), ("transformers", "4.57.6"),
                          ("transformers", "5.13.0")):
        assert reqs[name].specifier.contains(Version(version)), (name, version)
    for name, version in (("transformers", "5.3.0"), ("transformers", "5.5.0"), ("transformers", "4.55.0")):
        assert not reqs[name].specifier.contains(Version(version)), (name, version)


def _make_targets(makefile: str) -> dict[str, list[str]]:
    """target -> its recipe lines."""
    targets: dict[str, list[str]] = {}
    current: str | None = None
    for line in makefile.splitlines():
        if line.startswith("\t") and current is not None:
            targets[current].append(line.strip())
            continue
        m = re.match(r"^([A-Za-z0-9_.$()/-]+)\s*:(?!=)", line)
        current = m.group(1) if m else None
        if current is not None:
            targets.setdefault(current, [])
    return targets


def _commands(script: str) -> list[list[str]]:
    cmds = []
    for line in script.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            cmds.append(shlex.split(line, comments=True))
    return cmds


def test_ci_runs_the_documented_test_command() -> None:
    ci = REPO / ".ci" / "run"
    assert ci.is_file()
    assert ci.stat().st_mode & 0o111, ".ci/run is not executable"
    assert ["make", "test"] in _commands(ci.read_text())

    targets = _make_targets((REPO / "Makefile").read_text())
    assert "test" in targets
    recipe = " ".join(targets["test"])
    assert "-m pytest" in recipe
    assert pyproject()["tool"]["pytest"]["ini_options"]["testpaths"] == ["tests"]


def test_readme_documents_make_test() -> None:
    readme = REPO / "README.md"
    if not readme.is_file():
        pytest.skip("README.md not written yet")
    assert "make test" in readme.read_text()


@pytest.mark.subprocess
def test_make_lab_starts_as_root_too() -> None:
    """Jupyter refuses root without --allow-root (containers, CI machines): `make lab` gives it as root, only there."""
    import os
    import subprocess

    dry = subprocess.run(["make", "-n", "-W", ".venv/.installed-full", "lab"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    lab = [line for line in dry.splitlines() if "jupyter-config" in line or "default_url" in line]
    assert lab and ("--allow-root" in " ".join(lab)) == (os.geteuid() == 0)


def _readme_command_rows() -> list[tuple[list[str], str]]:
    """The README's command table: (the commands a row names, the row's text)."""
    text = (REPO / "README.md").read_text()
    table = next(block for block in text.split("## Commands", 1)[1].split("\n\n") if block.startswith("| command"))
    rows = []
    for line in table.splitlines()[2:]:
        head, _, rest = line.strip("|").partition("|")
        rows.append(([c.split()[0] for c in re.findall(r"`([^`]+)`", head)], rest))
    return rows


def test_the_readme_command_table_is_the_parser() -> None:
    """Every command of the parser has its row, every row names a command, every option a row names exists."""
    import argparse

    from omni_loader.cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    rows = _readme_command_rows()
    named = {c for commands, _ in rows for c in commands}
    assert named == set(sub.choices), f"README rows vs parser: {sorted(named ^ set(sub.choices))}"
    for commands, rest in rows:
        options = {o for c in commands for a in sub.choices[c]._actions for o in a.option_strings}
        mentioned = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest))
        assert mentioned <= options, f"{commands}: README names {sorted(mentioned - options)}, not options of it"
