"""The step a worker is in, read from its name by the benchmark's progress bar."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import omni_loader.host.procs as procs
import omni_loader.host.timing as timing
from omni_loader.bench.phase_watch import STEP_WORDS, PhaseWatch
from omni_loader.host.procs import PHASE_NAMES, announce, process_phase
from omni_loader.host.timing import PhaseClock

COMM = Path("/proc/self/comm")
pytestmark = pytest.mark.skipif(not COMM.exists(), reason="needs /proc")


class Bar:
    """What the watch writes to: the bar's postfix, as tqdm's set_postfix_str takes it."""

    def __init__(self) -> None:
        self.postfixes: list[str] = []

    def set_postfix_str(self, text: str) -> None:
        self.postfixes.append(text)


@pytest.fixture
def announcing(monkeypatch):
    """This process announces its phases (as a worker does), and gets its own name back afterwards."""
    name = COMM.read_text().strip()
    monkeypatch.setattr(procs, "_ANNOUNCING", [True])
    yield
    COMM.write_text(name)


def test_a_process_that_does_not_announce_keeps_its_name(monkeypatch):
    monkeypatch.setattr(procs, "_ANNOUNCING", [False])  # as any process starts (a test before may have switched it)
    name = COMM.read_text()
    with PhaseClock(timing.torch.device("cpu")).phase("construct"):
        pass
    announce("digest")
    assert COMM.read_text() == name and process_phase(os.getpid()) is None


def test_a_worker_names_itself_after_each_top_level_step_before_its_clock(announcing):
    clock = PhaseClock(timing.torch.device("cpu"))
    with clock.phase("total"):
        with clock.phase("construct"):
            assert process_phase(os.getpid()) == "construct"
        with clock.phase("outer_load_weights"):
            with clock.phase("read_checkpoint"):  # a nested step keeps the top-level name
                assert process_phase(os.getpid()) == "outer_load_weights"
    assert COMM.read_text().strip() == PHASE_NAMES["outer_load_weights"]
    assert all(len(n) <= 15 for n in PHASE_NAMES.values())  # the kernel keeps 15 bytes of a name


def test_the_bar_says_the_step_in_words(announcing):
    bar = Bar()
    pids = []
    with PhaseWatch(bar, "run 3/12 optimized", " (limit 120 s)", chain=pids.append) as watch:
        announce("construct")
        watch.started(os.getpid())
        deadline = time.monotonic() + 10
        while "construct" not in watch.seen and time.monotonic() < deadline:
            time.sleep(0.02)
        announce("digest")
        while "digest" not in watch.seen and time.monotonic() < deadline:
            time.sleep(0.02)
    assert pids == [os.getpid()] and watch.seen == ["construct", "digest"]
    assert bar.postfixes == ["run 3/12 optimized (limit 120 s)",
                             f"run 3/12 optimized: {STEP_WORDS['construct']}",
                             f"run 3/12 optimized: {STEP_WORDS['digest']}"]
    assert not watch.thread.is_alive()  # the reading ends with the run
