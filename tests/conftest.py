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
    from omni_loader.checkpoint import synthesize

    return synthesize(tmp_path_factory.mktemp("snap") / "tiny", size="tiny", seed=0)


@pytest.fixture
def python() -> str:
    """The interpreter of the test run, for real subprocesses of the CLI."""
    return sys.executable
