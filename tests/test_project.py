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


def _normalise(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_parser_on_a_sample() -> None:
    sample = "name: x\ndependencies:\n  - python=3.11\n  - pip\n  - pip:\n      - a==1  # pinned\n      - 'b>=2'\nother: 1\n"
    assert environment_pip_requirements(sample) == ["a==1", "b>=2"]


def test_dependency_lists_match() -> None:
    env_text = (REPO / "environment.yml").read_text()
    env = environment_pip_requirements(env_text)
    py = pyproject_requirements()
    assert len(env) == len(set(env)), "duplicate in environment.yml"
    assert len(py) == len(set(py)), "duplicate in pyproject.toml"
    assert {_normalise(r) for r in env} == {_normalise(r) for r in py}
    try:
        import yaml
    except ModuleNotFoundError:
        return
    doc = yaml.safe_load(env_text)
    (pip_list,) = [d["pip"] for d in doc["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert pip_list == env  # the hand parser reads what a YAML parser reads


def test_torch_is_pinned_the_same_in_both() -> None:
    env = environment_pip_requirements((REPO / "environment.yml").read_text())
    pins = []
    for reqs in (pyproject_requirements(), env):
        (torch_req,) = [r for r in reqs if re.match(r"torch\s*[=<>!~]", r)]
        match = re.fullmatch(r"torch\s*==\s*(\d+(?:\.\d+)+)", torch_req)
        assert match, f"torch is not pinned with == : {torch_req!r}"
        pins.append(match.group(1))
    assert pins[0] == pins[1]


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
