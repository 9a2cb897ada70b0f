"""What the kit requires of a Python environment, what the environment has, and set-up beside one that exists.

Why: on a GPU machine torch (ROCm or CUDA), transformers and vLLM-Omni come with the platform. The kit states
ranges (``pyproject.toml``) and locks the embedded default's versions (``requirements.lock``); set-up on a Python
that has torch layers the kit's venv over that environment (a ``.pth`` line) and installs only what is missing,
refusing a package out of range in one line first. Standard library only (and ``packaging``, which pip
carries): set-up runs it before the kit's dependencies exist, and ``doctor`` must not import torch.
The Makefile runs :func:`keep` through ``python -m omni_loader.cli.setup_env keep --venv DIR --extras lab,dev``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # omni_loader/host/requirements.py
LOCK_NAME = "requirements.lock"
KIT = "omni-loader"
# The packages a GPU machine brings with its platform: kept as they are whenever they are in range.
PLATFORM_PACKAGES = ("torch", "transformers", "vllm-omni")
# Written into the kit's venv by set-up on an existing environment: the environment it layers over.
OWN_ENV_PTH = "omni-loader-own-environment.pth"
# Import names that differ from their distribution's name.
IMPORT_NAMES = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn"}


def canonical(name: str) -> str:
    """A distribution's name as the package index compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _packaging():
    try:
        from packaging import requirements, version
    except ModuleNotFoundError:  # a Python with pip but not packaging (set-up runs before any install)
        from pip._vendor.packaging import requirements, version  # type: ignore[no-redef]
    return requirements, version


def kit_requirements(extras: tuple[str, ...] = ()) -> list:
    """The kit's requirements (``packaging`` Requirement objects), core plus ``extras``: from ``pyproject.toml``
    beside the package, else from the installed distribution's metadata (one list, never typed twice)."""
    requirements, _ = _packaging()
    pyproject = REPO / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            from pip._vendor import tomli as tomllib  # type: ignore[no-redef]
        project = tomllib.loads(pyproject.read_text())["project"]
        lines = list(project["dependencies"])
        for extra in extras:
            lines += project.get("optional-dependencies", {}).get(extra, [])
        return [requirements.Requirement(line) for line in lines]
    out = []
    for line in importlib.metadata.requires(KIT) or []:
        req = requirements.Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *extras)):
            req.marker = None
            out.append(req)
    return out


def installed() -> dict[str, importlib.metadata.Distribution]:
    """Every distribution this Python sees, by canonical name (the first on ``sys.path`` wins, as imports do)."""
    named = [(dist.metadata["Name"], dist) for dist in importlib.metadata.distributions()]
    return {canonical(name): dist for name, dist in reversed(named) if name}


def _public(version: str) -> str:
    """``2.13.0+rocm7.1`` -> ``2.13.0``: the version an index knows (a local build label is the platform's)."""
    return version.split("+", 1)[0]


def spec_text(specifier) -> str:
    """``>=4.56,!=5.0.*,…``: a range as people write it, its bounds first (``packaging`` sorts it as text)."""
    order = (">=", ">", "==", "~=", "<=", "<", "!=")
    return ",".join(sorted(map(str, specifier), key=lambda s: (next(i for i, op in enumerate(order)
                                                                     if s.startswith(op)), s)))


@dataclass(frozen=True)
class Problem:
    """A requirement this environment does not meet: missing, or installed out of range."""

    name: str
    spec: str
    have: str | None  # the installed version, None when missing
    where: str = ""

    def line(self) -> str:
        want = f"{self.name}{self.spec}"
        if self.have is None:
            return f"omni-loader needs {want}, which is not installed: pip install '{want}' (or run `make reproduce`)"
        return (f"{self.name} {self.have}{f' in {self.where}' if self.where else ''} is outside omni-loader's range "
                f"{self.spec}: install one in range (pip install '{want}') or use a Python that has one")


def problems(extras: tuple[str, ...] = (), names: tuple[str, ...] | None = None) -> list[Problem]:
    """The kit's requirements (or those of ``names``) that this environment misses or has out of range."""
    have = installed()
    found = []
    for req in kit_requirements(extras):
        key = canonical(req.name)
        if names is not None and key not in names:
            continue
        dist = have.get(key)
        if dist is None:
            found.append(Problem(req.name, spec_text(req.specifier), None))
        elif outside_range(str(req), dist.version):
            found.append(Problem(req.name, spec_text(req.specifier), dist.version, str(Path(str(dist.locate_file(""))))))
    return found


def outside_range(requirement: str, have: str) -> str:
    """``requirement``'s range (bounds first) when ``have`` is outside it, else ''; a build label is the platform's."""
    requirements, version = _packaging()
    req = requirements.Requirement(requirement.split(";")[0])
    inside = req.specifier.contains(version.Version(_public(have)), prereleases=True)
    return "" if inside else spec_text(req.specifier)


def missing_module_line(exc: ModuleNotFoundError) -> str | None:
    """The one line for an import of a kit dependency that is not installed, or None for any other module."""
    top = (exc.name or "").split(".")[0]
    if not top:
        return None
    key = canonical(IMPORT_NAMES.get(top, top))
    for extras in ((), ("lab", "dev")):
        for req in kit_requirements(extras):
            if canonical(req.name) == key:
                want = f"{req.name}{spec_text(req.specifier)}"
                extra = "" if not extras else " (a notebook or test dependency: `make test` installs them all)"
                return f"omni-loader needs {want}, which is not installed: pip install '{want}'{extra}"
    return None


# --------------------------------------------------------------------------- the lock


def read_lock() -> dict[str, str]:
    """``{canonical name: version}`` of the lock (``name==version`` lines)."""
    pins = {}
    for line in (REPO / LOCK_NAME).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line and not line.startswith("-"):
            name, _, pinned = line.partition("==")
            pins[canonical(name.split("[")[0])] = pinned.split(";")[0].strip()
    return pins


def own_environment() -> list[str]:
    """The site directories of an existing environment this venv is layered over (empty for a venv of its own)."""
    for directory in _site_dirs(existing=False):
        pth = Path(directory) / OWN_ENV_PTH
        if pth.is_file():
            return [line for line in pth.read_text().splitlines() if line and not line.startswith("#")]
    return []


def lock_record() -> dict[str, object] | None:
    """What ``metadata.json`` says of the lock: its file and digest, and ``differs``, each locked package installed
    at another version (``transformers 4.57.6 (lock 5.24.0)``; a build label is no difference). None outside a
    checkout."""
    path = REPO / LOCK_NAME
    if not path.is_file():
        return None
    have = installed()
    differs = [f"{have[name].metadata['Name']} {have[name].version} (lock {pinned})"
               for name, pinned in sorted(read_lock().items())
               if name in have and _public(have[name].version) != _public(pinned)]
    return {"file": LOCK_NAME, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "installed_from": "own environment" if own_environment() else "lock",
            "matches": not differs, "differs": differs}


# --------------------------------------------------------------------------- set-up beside an existing environment


def _site_dirs(existing: bool = True) -> list[str]:
    return list(dict.fromkeys(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))
                              and (not existing or Path(p).is_dir())))


def _say(text: str) -> None:
    print(f"set-up: {text}", flush=True)


def keep(venv: Path, extras: tuple[str, ...], python: str, uv: str | None) -> int:
    """Layer ``venv`` over this Python's environment (the platform's torch) and install only what the kit misses,
    pinned to the lock, out-of-range packages refused before anything is written; pip decides what is missing (it
    sees the layered environment as imports do), uv installs it (seconds, where pip takes a minute)."""
    bad = [p for p in problems(extras) if p.have is not None]
    if bad:
        print(f"set-up: refused: {bad[0].line()}", file=sys.stderr)
        return 3
    have = installed()
    platform = ", ".join(f"{have[n].metadata['Name']} {have[n].version}" for n in PLATFORM_PACKAGES if n in have)
    _say(f"keeping {platform} from {sys.prefix} (nothing there is replaced; the kit's venv {venv} sees it)")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / OWN_ENV_PTH).write_text("".join(f"{d}\n" for d in _site_dirs()))
    lock = read_lock()
    pins = {**lock, **{name: _public(d.version) for name, d in have.items()}}
    constraints = venv / "own-environment-constraints.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items()) if n != canonical(KIT)))
    report = venv / "own-environment-plan.json"
    target = f".[{','.join(extras)}]" if extras else "."
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--dry-run",
                    "--report", str(report), "-c", str(constraints), "-e", target], cwd=REPO, check=True,
                   stderr=subprocess.DEVNULL if not os.environ.get("OMNI_LOADER_DEBUG") else None)
    missing = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in json.loads(report.read_text())["install"]
               if canonical(i["metadata"]["name"]) != canonical(KIT)]
    installer = [uv, "pip", "install", "--quiet", "--python", python] if uv else [python, "-m", "pip", "install", "-q"]
    if missing:
        subprocess.run([*installer, "--no-deps", *missing], check=True)
    subprocess.run([*installer, "--no-deps", "-e", str(REPO)], check=True)
    _say(f"installed {len(missing)} missing package(s) beside them: {', '.join(missing) or 'none'}")
    return 0
