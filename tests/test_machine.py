"""What the machine is and what it did meanwhile: recorded facts and the report's warnings."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from omni_loader.host.machine import (BUSY_CORES, Activity, _selected, describe_activity, describe_machine,
                                      machine_profile, machine_warnings)

# A fixed amount of work (not of wall time: a shared machine gives a busy loop less CPU), which then
# reports the CPU time it used, to hold the accounting against.
BUSY = "import time\nsum(range(20_000_000))\nopen({out!r}, 'w').write(str(time.process_time()))\n"


def test_the_profile_reads_this_linux_machine():
    profile = machine_profile()
    assert set(profile) == {"virtualisation", "free_page_reporting", "transparent_hugepages", "cpu_governor", "cpu_count"}
    assert profile["virtualisation"] == "none" or profile["virtualisation"].startswith("virtual machine")
    assert profile["free_page_reporting"] in ("off",) or profile["free_page_reporting"].startswith("on (order ")
    assert _selected("always [madvise] never") == "madvise" and _selected(None) is None
    assert describe_machine(profile).startswith(profile["virtualisation"])
    assert describe_machine(None) == "not recorded"


@pytest.mark.subprocess
def test_cpu_of_other_processes_is_counted_and_our_own_children_are_not(tmp_path):
    """A busy process outside this process's tree is 'other processes'; a busy child of ours is ours.
    Lower bounds only: on a shared machine others can only add to what is measured."""
    from omni_loader.host.machine import _own_cpu_seconds

    before = _own_cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY.format(out=str(tmp_path / "own"))], check=True)
    assert _own_cpu_seconds() - before >= 0.9 * float((tmp_path / "own").read_text())
    # a double fork into a new session: the busy process is no descendant of ours when it runs
    outsider = BUSY.format(out=str(tmp_path / "other"))
    launcher = ("import os, subprocess, sys\nif os.fork() == 0:\n    os.setsid()\n"
                f"    subprocess.run([sys.executable, '-c', {outsider!r}])\n    os._exit(0)\n")
    activity = Activity.start()
    subprocess.run([sys.executable, "-c", launcher], check=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "other").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    theirs = activity.finish()
    used = float((tmp_path / "other").read_text())
    assert theirs["other_cpu_seconds"] >= 0.8 * used, (theirs, used)
    assert theirs["other_cores"] > 0 and BUSY_CORES < 1
    assert describe_activity(theirs).startswith(f"other processes used {theirs['other_cpu_seconds']:,.1f} CPU-s")


def test_warnings_say_what_was_wrong_and_what_to_do():
    quiet = {"seconds": 40.0, "other_cpu_seconds": 2.0, "other_cores": 0.05, "steal_seconds": 0.0}
    busy = {**quiet, "other_cpu_seconds": 40.0, "other_cores": 1.0}
    vm = {"free_page_reporting": "on (order 9)", "cpu_count": 2}
    assert machine_warnings(vm, quiet, "resident") == []
    (warning,) = machine_warnings(vm, busy, "resident")
    assert warning.startswith("busy: other processes used 1.00 of a core") and "--aa" in warning  # after "Machine: "
    (fpr,) = machine_warnings(vm, quiet, "upstream-cpu")
    assert "free page reporting on (order 9)" in fpr and "--construct resident" in fpr
    assert machine_warnings({"free_page_reporting": "off"}, quiet, "upstream-cpu") == []
    stolen = machine_warnings(vm, {**quiet, "steal_seconds": 8.0}, "resident")
    assert len(stolen) == 1 and stolen[0].startswith("the host took 8.0 s of CPU")
    assert machine_warnings(None, None) == []
