"""Stopping a child process and everything it started: the one way the kit does it.

Why one helper: a server under serve-ab forks its own workers, a load worker may start threads
or helpers, and a benchmark that is interrupted or times out must leave nothing running behind
it (a leftover server keeps the next run's port; a leftover worker keeps its memory). Every such
child is started as the leader of a process group of its own (``start_new_session=True``, or
``os.setsid()`` in a forked worker), so stopping it means stopping its group: SIGTERM to every
member, SIGKILL to whatever is left after a grace period, the leader reaped. Members are found
with psutil. A process that leaves the group (``setsid`` in a server's child) is caught by
:func:`adopting_orphans`: the kit becomes its subreaper, so it comes back to the kit when its parent dies.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

# How long the last SIGKILL round waits for the group to disappear before naming the survivors.
KILL_WAIT = 5.0
POLL = 0.05


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, and its leader-to-be: the process ``pgid``
    itself, even before it has made the group (a forked child stopped before its ``setsid``)."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and (proc.pid == pgid or os.getpgid(proc.pid) == pgid):
                members.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return members


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to group ``pgid``; if the group does not exist yet (a forked child that has not
    called ``setsid`` yet), to the process ``pgid`` itself: its pid is the group's id-to-be."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        try:
            os.kill(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    except PermissionError:
        pass


def stop_group(pgid: int, grace: float = 10.0, leader: subprocess.Popen | None = None) -> list[int]:
    """Stop process group ``pgid``: SIGTERM, SIGKILL after ``grace`` s (at once when 0), reap ``leader``.

    Returns the pids still alive at the end (normally none). An interrupt while waiting kills the
    group before it propagates, so Ctrl-C never leaves the group running.
    """
    def gone() -> bool:
        return (leader is None or leader.poll() is not None) and not group_members(pgid)

    try:
        if grace > 0 and not gone():
            signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and not gone():
                time.sleep(POLL)
        if not gone():
            signal_group(pgid, signal.SIGKILL)
    except BaseException:
        signal_group(pgid, signal.SIGKILL)  # interrupted while stopping: leave nothing behind
        raise
    finally:
        if leader is not None:
            try:
                leader.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
    deadline = time.monotonic() + KILL_WAIT
    left = group_members(pgid)
    while left and time.monotonic() < deadline:
        signal_group(pgid, signal.SIGKILL)
        time.sleep(POLL)
        left = group_members(pgid)
    return left


def stop_children(pid: int, grace: float = 1.0) -> list[int]:
    """Stop every descendant of ``pid`` (not ``pid`` itself): SIGTERM, SIGKILL after ``grace`` s.

    For a process whose children share its group (the multiprocessing fork server's workers that
    have not made their own yet): its group cannot be signalled without signalling the caller.
    Returns the pids still alive.
    """
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    _each(children, psutil.Process.terminate)
    _, alive = psutil.wait_procs(children, timeout=grace)
    _each(alive, psutil.Process.kill)
    _, alive = psutil.wait_procs(alive, timeout=KILL_WAIT)
    return [p.pid for p in alive]


def _each(procs: list[psutil.Process], action) -> None:
    """``action`` on every process of ``procs`` that still exists (one that has gone is not an error)."""
    for proc in procs:
        try:
            action(proc)
        except psutil.Error:
            pass


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def remove_dead_owners_dirs(prefix: str, root: str | None = None) -> tuple[str, ...]:
    """Remove the folders ``PREFIX<pid>-*`` in the temporary directory whose process is gone; once per process.

    Why: a process killed with SIGKILL runs no cleanup, so a temporary folder it made stays. Naming
    each folder after its maker's pid lets the next one remove what the dead left. Returns the
    folders removed.
    """
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and path.is_dir() and not path.is_symlink() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return tuple(removed)


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def _set_subreaper(on: bool) -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); False where it cannot."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextmanager
def adopting_orphans() -> Iterator[Callable[[], list[str]]]:
    """While inside, processes that a child leaves behind come back to this process; the function yielded
    kills and reaps those that appeared since entry and names them (``pid 123 (cmd...)``).

    Why: a server may start a helper in a session of its own, out of its process group, so stopping the
    group leaves the helper running (holding a port, memory, a GPU). As a subreaper (``prctl
    PR_SET_CHILD_SUBREAPER``), this process inherits such a helper when its parent dies, so it can be
    found among this process's children and stopped. Without prctl (not Linux) nothing is adopted and
    the function finds only the children this process started itself.
    """
    me = psutil.Process()
    before = {p.pid for p in me.children()}
    enabled = _set_subreaper(True)

    def survivors() -> list[str]:
        named = []
        for child in me.children():
            if child.pid in before:
                continue
            try:
                named.append(f"pid {child.pid} ({' '.join(child.cmdline())[:200]})")
                child.kill()
                child.wait(timeout=KILL_WAIT)
            except psutil.Error:
                continue
        return named

    try:
        yield survivors
    finally:
        if enabled:
            _set_subreaper(False)
