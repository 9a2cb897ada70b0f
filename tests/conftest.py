"""Shared fixtures. Everything runs on the tiny Token2Wav config so the suite stays fast on 2 cores."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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
