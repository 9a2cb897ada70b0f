"""Stand-ins the tests share (imported as ``from stand_ins import ...``, as ``sentences`` is)."""

from __future__ import annotations

from typing import Any


class PostfixBar:
    """A progress bar stand-in for the sweep and audit bars: its keyword arguments, and the postfix shown at each
    tick (what the bar said as each model was done)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs, self.postfix, self.ticks = kwargs, kwargs.get("postfix") or "", []

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text

    def update(self, n: int = 1) -> None:
        self.ticks.append(self.postfix)

    def __enter__(self) -> PostfixBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


# --------------------------------------------------------------------------- a platform's Python


ROCM_TORCH = "2.13.0+rocm7.1"
HIP_VERSION = "7.1.25424"


def pip_configuration() -> dict[str, str]:
    """pip's configuration (``find-links``, ``extra-index-url``…): where a machine keeps its own torch wheel."""
    import subprocess
    import sys

    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    config: dict[str, str] = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        config.setdefault(key.rpartition(".")[2], value.strip("'"))
    return config


def uv_environment() -> dict[str, str]:
    """The environment for uv with pip's configuration handed over (find-links, indexes), as the Makefile does:
    this machine's torch wheel is found only through pip's find-links."""
    import os

    config = pip_configuration()
    env = dict(os.environ, UV_INDEX_STRATEGY="unsafe-best-match")
    for key, var in (("find-links", "UV_FIND_LINKS"), ("extra-index-url", "UV_EXTRA_INDEX_URL")):
        if config.get(key):
            env[var] = config[key].replace(" ", "," if key == "find-links" else " ")
    return env


def platform_python(root, transformers: str = "transformers>=4.57,<4.58"):
    """The Python of a ROCm machine as the kit finds it there, standing in: a virtual environment with pip, a
    torch that reports ``2.13.0+rocm7.1`` and a HIP version (the local CPU wheel, its dist-info and
    ``torch/version.py`` relabelled) and a transformers 4.57.x. Returns its ``bin/python``."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(root)
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "--quiet", "--seed", "--python", sys._base_executable, str(root)], check=True)
    python = root / "bin" / "python"
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(python), "torch==2.13.0", transformers],
                   check=True, env=uv_environment())
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (old,) = site.glob("torch-*.dist-info")
    new = old.rename(site / f"torch-{ROCM_TORCH}.dist-info")
    metadata = new / "METADATA"
    _rewrite(metadata, re.sub(r"(?m)^Version: .*$", f"Version: {ROCM_TORCH}", metadata.read_text(), count=1))
    version = site / "torch" / "version.py"
    text = re.sub(r"__version__ = '[^']*'", f"__version__ = '{ROCM_TORCH}'", version.read_text())
    _rewrite(version, text.replace("hip: Optional[str] = None", f"hip: Optional[str] = '{HIP_VERSION}'"))
    return python


def _rewrite(path, text: str) -> None:
    """A new file in place of ``path``: uv hard-links installed files to its cache, so writing into the old one
    would relabel the torch of every environment that shares it."""
    path.unlink()
    path.write_text(text)


def tree_fingerprint(directory) -> list[tuple[str, int, int]]:
    """Every file under ``directory``: its path, size and modification time (the same files, untouched)."""
    from pathlib import Path

    directory = Path(directory)
    return sorted((str(p.relative_to(directory)), p.stat().st_size, p.stat().st_mtime_ns)
                  for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
