"""The lanes are chosen by markers, and the guard in ``conftest.py`` keeps the markers honest.

A planted test file is run by a real pytest (in a subprocess, with this suite's ``conftest.py`` beside
it): a test that starts a process without ``@pytest.mark.subprocess`` fails with the guard's one line,
whichever way it starts it (``subprocess``, ``os.system``, a multiprocessing ``Process``), even when its
own code catches the error; the same starts under the marker pass, and so does a test that starts none.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"

PLANTED = '''
import multiprocessing
import os
import subprocess
import sys

import pytest


def test_unmarked_subprocess():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_system():
    os.system("true")


def test_unmarked_multiprocessing():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


def test_unmarked_start_swallowed():
    try:
        subprocess.run(["true"])
    except Exception:
        pass


@pytest.fixture
def server():
    return subprocess.Popen([sys.executable, "-c", "pass"]).wait()


def test_unmarked_fixture_starts_it(server):
    assert server == 0


@pytest.mark.subprocess
def test_marked_subprocess():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.subprocess
def test_marked_multiprocessing():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


def test_in_process():
    assert sum(range(4)) == 6
'''


@pytest.mark.subprocess
def test_the_guard_fails_an_unmarked_test_that_starts_a_process(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_planted.py").write_text(PLANTED)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    subprocess: starts a process\n    slow: slow\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "test_planted.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = proc.stdout
    outcome = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            outcome[rest.split("::", 1)[1].split(" ", 1)[0]] = word
    assert outcome == {
        "test_unmarked_subprocess": "FAILED",
        "test_unmarked_system": "FAILED",
        "test_unmarked_multiprocessing": "FAILED",
        "test_unmarked_start_swallowed": "FAILED",
        "test_unmarked_fixture_starts_it": "ERROR",
        "test_marked_subprocess": "PASSED",
        "test_marked_multiprocessing": "PASSED",
        "test_in_process": "PASSED",
    }, out
    assert proc.returncode == 1, out
    assert "test_planted.py::test_unmarked_subprocess started a process (subprocess.Popen) without " \
           "@pytest.mark.subprocess" in out, out
    assert "(multiprocessing Process.start)" in out and "(os.system)" in out, out


def test_files_run_longest_first_and_under_mutmut_shortest_first(monkeypatch) -> None:
    """The suite runs its longest files first (xdist's tail stays short); a mutant's tests run the shortest
    files first, so that the unit tests that kill most mutants come before a file whose fixture runs a
    benchmark (mutmut stops at the first failure). Within a file, the order given is kept."""
    import json
    from types import SimpleNamespace

    import importlib.util

    spec = importlib.util.spec_from_file_location("conftest_copy", CONFTEST)
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    stored = json.loads(conftest.DURATIONS.read_text())
    files = sorted(stored, key=stored.get)
    short, long = files[0], files[-1]
    given = [f"{short}::test_b", f"{long}::test_x", f"{short}::test_a", f"{long}::test_y"]

    def ordered() -> list[str]:
        items = [SimpleNamespace(nodeid=n, get_closest_marker=lambda name: None) for n in given]
        conftest.pytest_collection_modifyitems(None, items)
        return [item.nodeid for item in items]

    monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    assert ordered() == [given[1], given[3], given[0], given[2]]
    monkeypatch.setenv("MUTANT_UNDER_TEST", "omni_loader.reporting.stats.x_compare__mutmut_1")
    assert ordered() == [given[0], given[2], given[1], given[3]]
