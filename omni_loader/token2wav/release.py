"""A vLLM-Omni release's own ``find_all_registers``, read from its source and run on the kit's model.

Why: ``baseline`` and ``optimized`` are the kit's copies of what 0.28.0 and 0.30.0 ship; running the release's
own function checks those copies and measures whatever a later release ships. Its module imports ``vllm``, so
it is never imported: :func:`read_release` reads the source (an installed package, a wheel, an unpacked tree or
the file) and :meth:`Release.discovery` compiles that one function alone. Standard library only at import
time: ``omni-loader doctor`` calls :func:`read_release`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
import textwrap
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError

MODULE = Path("vllm_omni/model_executor/models/qwen2_5_omni/qwen2_5_omni_token2wav.py")
FUNCTION = "find_all_registers"
PER_BUFFER, WALK, OTHER = "per-buffer state_dict()", "one module walk", "other"
GIVE_ONE = ("name a release instead: --variant NAME=installed:PATH, PATH a vLLM-Omni .whl, an unpacked package or "
            "the .py")


@dataclass(frozen=True)
class Release:
    """Where a release's ``find_all_registers`` is, its text, and which of the two rules it is."""

    version: str | None
    file: Path  # inside a wheel: WHEEL.whl/vllm_omni/...
    line: int  # the ``def`` line
    source: str
    rule: str

    @property
    def label(self) -> str:
        """'vLLM-Omni 0.28.0's find_all_registers, qwen2_5_omni_token2wav.py:1511', as the report names it."""
        return f"vLLM-Omni {self.version or '(version unknown)'}'s {FUNCTION}, {self.file.name}:{self.line}"

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "file": str(self.file), "line": self.line, "rule": self.rule,
                "label": self.label, "source": self.source}

    def discovery(self) -> Callable[[Any], dict[str, Any]]:
        """``fn(model) -> {name: buffer}``: the function compiled alone (file and line kept for tracebacks) with only
        torch in its namespace, called with ``self`` = the model; the release's ``{"buffer": tensor}`` unwrapped."""
        import torch

        tree = ast.parse(self.source)
        tree.body[0].decorator_list = []  # type: ignore[attr-defined]
        ast.increment_lineno(tree, self.line - 1)
        namespace: dict[str, Any] = {"torch": torch, "nn": torch.nn}
        exec(compile(tree, str(self.file), "exec"), namespace)
        method = namespace[FUNCTION]

        def find_all_registers(model: Any) -> dict[str, Any]:
            found = method(model)
            return {name: v["buffer"] if isinstance(v, dict) else v for name, v in found.items()}

        find_all_registers.__qualname__ = f"{FUNCTION} ({self.label})"
        return find_all_registers


def read_release(path: str | Path | None = None) -> Release:
    """The ``find_all_registers`` of the installed vLLM-Omni (``path`` None: found without importing it) or of
    ``path``: a ``.whl``, a folder holding ``vllm_omni/`` (or ``vllm_omni/`` itself) or the ``.py`` file."""
    if not path:
        return _installed()
    path = Path(path).expanduser()
    if not path.exists():
        raise OmniLoaderError(f"vLLM-Omni release not found: {path} does not exist; {GIVE_ONE}")
    if path.is_dir():
        package = path if path.name == "vllm_omni" else path / "vllm_omni"
        if not package.is_dir():
            raise OmniLoaderError(f"{path} holds no vllm_omni/ package; {GIVE_ONE}")
        file = package.joinpath(*MODULE.parts[1:])
        return _from_source(_read(file), file, _dist_version(package.parent))
    if path.suffix == ".whl":
        return _from_wheel(path)
    if path.suffix == ".py":
        inside = path.resolve().parts[-len(MODULE.parts):] == MODULE.parts
        root = path.resolve().parents[len(MODULE.parts) - 1] if inside else None
        return _from_source(_read(path), path, _dist_version(root) if root else None)
    raise OmniLoaderError(f"{path} is not a .whl, a folder or a .py file; {GIVE_ONE}")


def _installed() -> Release:
    spec = importlib.util.find_spec("vllm_omni")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise OmniLoaderError(f"no vLLM-Omni installed for {sys.executable}: pip install vllm-omni, or {GIVE_ONE}")
    files = [Path(p).joinpath(*MODULE.parts[1:]) for p in spec.submodule_search_locations]
    file = next((f for f in files if f.is_file()), files[0])
    try:
        version: str | None = importlib.metadata.version("vllm-omni")
    except importlib.metadata.PackageNotFoundError:
        version = None
    return _from_source(_read(file), file, version)


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OmniLoaderError(f"{file} not found: this vLLM-Omni has no Qwen2.5-Omni Token2Wav; {GIVE_ONE}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise OmniLoaderError(f"cannot read {file}: {exc}") from None


def _from_wheel(wheel: Path) -> Release:
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            if MODULE.as_posix() not in names:
                raise OmniLoaderError(f"{wheel} has no {MODULE.as_posix()}: not a vLLM-Omni wheel with Qwen2.5-Omni "
                                      f"Token2Wav; {GIVE_ONE}")
            text = zf.read(MODULE.as_posix()).decode("utf-8")
            meta = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            version = _metadata_version(zf.read(meta).decode("utf-8")) if meta else None
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        raise OmniLoaderError(f"cannot read the wheel {wheel}: {exc}") from None
    parts = wheel.name.split("-")
    return _from_source(text, wheel.resolve() / MODULE, version or (parts[1] if len(parts) >= 5 else None))


def _dist_version(site: Path) -> str | None:
    """The version in a ``vllm_omni-*.dist-info/METADATA`` beside the package, if there is one."""
    meta = next(iter(sorted(site.glob("vllm_omni-*.dist-info/METADATA"))), None)
    return _metadata_version(meta.read_text(encoding="utf-8", errors="replace")) if meta else None


def _metadata_version(text: str) -> str | None:
    return next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("Version:")), None)


def _from_source(text: str, file: Path, version: str | None) -> Release:
    try:
        tree = ast.parse(text, str(file))
    except SyntaxError as exc:
        raise OmniLoaderError(f"{file} is not valid Python (line {exc.lineno}: {exc.msg}); {GIVE_ONE}") from None
    defs = sorted((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == FUNCTION),
                  key=lambda n: n.lineno)
    if not defs:
        raise OmniLoaderError(f"{file} defines no {FUNCTION}: this release finds buffers some other way; {GIVE_ONE}")
    fn = defs[0]
    lines = text.splitlines()[fn.lineno - 1:fn.end_lineno]
    return Release(version, file, fn.lineno, textwrap.dedent("\n".join(lines)) + "\n", rule_of(fn))


def _calls(node: ast.AST, attr: str) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
               for n in ast.walk(node))


def rule_of(fn: ast.FunctionDef) -> str:
    """PER_BUFFER when a ``state_dict()`` call sits inside a loop (or comprehension) over the buffers; WALK when
    ``named_modules()`` is walked and ``state_dict()`` never called; else OTHER."""
    for node in ast.walk(fn):
        loops = ([node] if isinstance(node, (ast.For, ast.AsyncFor)) else
                 node.generators if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp))
                 else [])
        if any(_calls(loop.iter, "named_buffers") or _calls(loop.iter, "buffers") for loop in loops):
            if _calls(node, "state_dict"):
                return PER_BUFFER
    return WALK if _calls(fn, "named_modules") and not _calls(fn, "state_dict") else OTHER
