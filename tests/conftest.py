"""Shared fixtures. Everything runs on the tiny Token2Wav config so the suite stays fast on 2 cores."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session", autouse=True)
def _interruptible_children() -> None:
    """Let the processes the tests start take Ctrl-C. Several tests send SIGINT to ``omni-loader`` as a
    terminal would; a suite started in the background by a non-interactive shell (``make test &``, CI
    scripts) inherits SIGINT *ignored*, and an ignored signal stays ignored across exec, so every
    process it starts would ignore those interrupts too. A handler (not SIG_IGN) is reset to the
    default at exec, so each child starts as it would from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the embedded synthetic snapshots of the tests out of the user's cache."""
    os.environ["OMNI_LOADER_CACHE"] = str(tmp_path_factory.mktemp("omni-loader-cache"))


@pytest.fixture(scope="session")
def tiny_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic tiny snapshot in the Hub layout (seed 0), shared read-only by all tests."""
    from omni_loader.token2wav.checkpoint import synthesize

    return synthesize(tmp_path_factory.mktemp("snap") / "tiny", size="tiny", seed=0)


@pytest.fixture
def python() -> str:
    """The interpreter of the test run, for real subprocesses of the CLI."""
    return sys.executable


@pytest.fixture
def probe_variant(tmp_path: Path):
    """Make a variant whose discovery step first writes what the load sees, then discovers as optimized.

    ``make(expression, end)`` evaluates ``expression`` inside the load (``os`` and ``torch`` are
    imported) and appends ``str(value) + end`` to a file; it returns the variant's dict, which any
    worker mode imports, and that file.
    """
    def make(expression: str, end: str) -> tuple[dict, Path]:
        from omni_loader.token2wav.variants import Variant

        seen = tmp_path / "seen.txt"
        step = tmp_path / "probe_step.py"
        step.write_text("import os\nimport torch\nfrom omni_loader.token2wav.discovery import find_persistent_buffers\n"
                        f"def find(model):\n    open({str(seen)!r}, 'a').write(str({expression}) + {end!r})\n"
                        "    return find_persistent_buffers(model, 'optimized')\n")
        return Variant("probe", discovery=f"{step}:find").to_dict(), seen

    return make
