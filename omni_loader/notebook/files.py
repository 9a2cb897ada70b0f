"""The kit's notebooks as files: where they write, and executed copies that JupyterLab trusts.

Every notebook writes under one results directory at the repository root (:func:`results_root`), whatever
directory its kernel runs in. :func:`execute` signs every copy it writes, since JupyterLab strips the rich
outputs (SVG, scripts, audio) of an untrusted notebook.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from ..results.metadata import REPO_ROOT, stamped

RESULTS_ENV = "OMNI_LOADER_RESULTS"
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


def results_root() -> Path:
    """``$OMNI_LOADER_RESULTS``, else ``results/`` at the repository root, else in the working directory."""
    if given := os.environ.get(RESULTS_ENV):
        return Path(given).expanduser().resolve()
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "omni_loader").is_dir():
        return REPO_ROOT / "results"
    return Path.cwd().resolve() / "results"


def results_dir(name: str, out_dir: str | os.PathLike[str] | None = None, stamp: bool = True) -> Path:
    """Where a notebook writes: ``out_dir``, else ``<results root>/<name>-<time>`` (no time: ``stamp=False``)."""
    if out_dir:
        return Path(out_dir).expanduser().resolve()
    return results_root() / (stamped(name) if stamp else name)


def sign(path: str | os.PathLike[str]) -> Path:
    """Sign a notebook file for this user, so JupyterLab trusts (shows) its outputs."""
    import nbformat
    from nbformat.sign import NotebookNotary

    path = Path(path)
    nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    NotebookNotary().sign(nb)
    return path


def is_trusted(path: str | os.PathLike[str]) -> bool:
    """Whether JupyterLab would trust this notebook file (its signature is in this user's database)."""
    import nbformat
    from nbformat.sign import NotebookNotary

    nb = nbformat.read(Path(path), as_version=nbformat.NO_CONVERT)
    return bool(NotebookNotary().check_signature(nb))


def find_notebook(name: str | os.PathLike[str]) -> Path:
    """A notebook by path, or by name in ``notebooks/`` (``04``, ``04_explore_token2wav``, ...)."""
    path = Path(name)
    if path.is_file():
        return path
    matches = sorted(NOTEBOOK_DIR.glob(f"{path.stem}*.ipynb")) if NOTEBOOK_DIR.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    known = ", ".join(p.name for p in sorted(NOTEBOOK_DIR.glob("*.ipynb"))) or "none"
    raise OmniLoaderError(f"no single notebook matches {str(name)!r} (notebooks: {known})")


def execute(notebook: str | os.PathLike[str], output: str | os.PathLike[str],
            parameters: Mapping[str, Any] | None = None, cwd: str | os.PathLike[str] | None = None,
            timeout: float | None = None) -> Path:
    """Run a notebook with papermill into ``output`` (only declared ``parameters``), and sign the copy."""
    import papermill as pm

    source = find_notebook(notebook)
    parameters = dict(parameters or {})
    declared = pm.inspect_notebook(str(source))
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise OmniLoaderError(f"{source.name} has no parameter {unknown[0]!r} (it declares: {', '.join(declared)})")
    from ..safe_files import ensure_dir, replaced

    output = Path(output)
    ensure_dir(output.parent)
    # papermill writes by name: a new file, renamed into place (never through a link), a failed run's too
    with replaced(output, keep_failed=True) as tmp:
        pm.execute_notebook(str(source), str(tmp), parameters=parameters, kernel_name="python3",
                            cwd=str(cwd or source.parent), progress_bar=False, execution_timeout=timeout)
    return sign(output)


# The folder (relative to the Jupyter server's root, the repository in ``make lab``) whose notebooks are
# stored without outputs.
STORED_CLEAN = "notebooks/"


def pre_save_hook(model: dict[str, Any], path: str, **kwargs: Any) -> None:
    """Jupyter's ``pre_save_hook``: the project's ``notebooks/`` are stored without their outputs (code cells without
    outputs or counts, no widget state)."""
    notebook = model.get("content")
    if model.get("type") == "notebook" and path.lstrip("/").startswith(STORED_CLEAN) and notebook:
        for cell in notebook.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
        notebook.get("metadata", {}).pop("widgets", None)
