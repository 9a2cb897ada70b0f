"""What the machine is and what it did meanwhile: recorded facts and the report's warnings."""

from __future__ import annotations

import subprocess
import sys
import time

from omni_loader.machine import (
    BUSY_CORES,
    Activity,
    _selected,
    describe_activity,
    describe_machine,
    machine_profile,
    machine_warnings,
)

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"


def test_the_profile_reads_this_linux_machine():
    profile = machine_profile()
    assert set(profile) == {"virtualisation", "free_page_reporting", "transparent_hugepages", "cpu_governor", "cpu_count"}
    assert profile["virtualisation"] == "none" or profile["virtualisation"].startswith("virtual machine")
    assert profile["free_page_reporting"] in ("off",) or profile["free_page_reporting"].startswith("on (order ")
    assert _selected("always [madvise] never") == "madvise" and _selected(None) is None
    assert describe_machine(profile).startswith(profile["virtualisation"])
    assert describe_machine(None) == "not recorded"


def test_cpu_of_other_processes_is_counted_and_our_own_children_are_not():
    """A busy process outside this process's tree is 'other processes'; a busy child of ours is not."""
    from omni_loader.machine import _own_cpu_seconds

    before = _own_cpu_seconds()
    subprocess.run([sys.executable, "-c", BUSY.format(s=1.0)], check=True)  # our child: the benchmark's own work
    assert _own_cpu_seconds() - before > 0.8  # counted as ours (so not as another process's); lower bounds only:
    # a shared machine can only add to what others used
    # start_new_session and a double fork: the busy process is no descendant of ours when it runs
    outsider = BUSY.format(s=1.5)
    launcher = ("import os, subprocess, sys\nif os.fork() == 0:\n    os.setsid()\n"
                f"    subprocess.run([sys.executable, '-c', {outsider!r}])\n    os._exit(0)\n")
    activity = Activity.start()
    subprocess.run([sys.executable, "-c", launcher], check=True)
    time.sleep(1.8)
    theirs = activity.finish()
    assert theirs["other_cpu_seconds"] > 0.8, theirs
    assert theirs["seconds"] >= 1.8 and theirs["other_cores"] > BUSY_CORES
    assert describe_activity(theirs).startswith(f"other processes used {theirs['other_cpu_seconds']:,.1f} CPU-s")


def test_warnings_say_what_was_wrong_and_what_to_do():
    quiet = {"seconds": 40.0, "other_cpu_seconds": 2.0, "other_cores": 0.05, "steal_seconds": 0.0}
    busy = {**quiet, "other_cpu_seconds": 40.0, "other_cores": 1.0}
    vm = {"free_page_reporting": "on (order 9)", "cpu_count": 2}
    assert machine_warnings(vm, quiet, "resident") == []
    (warning,) = machine_warnings(vm, busy, "resident")
    assert warning.startswith("the machine was busy: other processes used 1.00 of a core") and "--aa" in warning
    (fpr,) = machine_warnings(vm, quiet, "upstream-cpu")
    assert "free page reporting on (order 9)" in fpr and "--construct resident" in fpr
    assert machine_warnings({"free_page_reporting": "off"}, quiet, "upstream-cpu") == []
    stolen = machine_warnings(vm, {**quiet, "steal_seconds": 8.0}, "resident")
    assert len(stolen) == 1 and stolen[0].startswith("the host took 8.0 s of CPU")
    assert machine_warnings(None, None) == []
