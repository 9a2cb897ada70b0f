"""Stopping a child process and everything it started: the one way the kit does it.

Why one helper: an interrupted or timed-out benchmark must leave nothing running (a leftover server keeps the
next run's port, a worker its memory). Every child leads a process group of its own (``start_new_session=True``,
or ``os.setsid()`` in a forked worker), so stopping it means SIGTERM to every member (found with psutil),
SIGKILL to what is left after a grace period, the leader reaped. A process that leaves the group is caught by
:func:`adopting_orphans`; :class:`ChildGuard` and :func:`die_with_parent` cover a kit that dies without cleanup.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

# How long the last SIGKILL round waits for the group to disappear before naming the survivors.
KILL_WAIT = 5.0
POLL = 0.05


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, and its leader-to-be: the process ``pgid``
    itself, even before it has made the group (a forked child stopped before its ``setsid``)."""
    import psutil  # here, not at the top: a stage server imports this module for die_with_parent, and psutil is slow

    members = []
    for proc in psutil.process_iter(["status"]):
        with suppress(OSError, psutil.Error):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and (proc.pid == pgid or os.getpgid(proc.pid) == pgid):
                members.append(proc.pid)
    return members


def signal_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to group ``pgid``; if the group does not exist yet (a forked child that has not
    called ``setsid`` yet), to the process ``pgid`` itself: its pid is the group's id-to-be."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pgid, sig)
    except PermissionError:
        pass


def stop_group(pgid: int, grace: float, leader: subprocess.Popen | None = None) -> list[int]:
    """Stop process group ``pgid``: SIGTERM, SIGKILL after ``grace`` s (at once when 0), reap ``leader``; returns
    the pids still alive (normally none). An interrupt while waiting kills the group before it propagates."""
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
            with suppress(subprocess.TimeoutExpired):
                leader.wait(timeout=10)
    deadline = time.monotonic() + KILL_WAIT
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        signal_group(pgid, signal.SIGKILL)
        time.sleep(POLL)
    return left


def stop_children(pid: int, grace: float) -> list[int]:
    """Stop every descendant of ``pid`` (not ``pid`` itself): SIGTERM, SIGKILL after ``grace`` s; returns the pids
    still alive. For a process whose children share its group, which cannot be signalled without the caller."""
    import psutil

    try:
        alive = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for action, wait in ((psutil.Process.terminate, grace), (psutil.Process.kill, KILL_WAIT)):
        for proc in alive:
            with suppress(psutil.Error):  # one that has gone is not an error
                action(proc)
        _, alive = psutil.wait_procs(alive, timeout=wait)
    return [p.pid for p in alive]


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
    """Remove the folders ``PREFIX<pid>-*`` in the temporary directory whose process is gone, once per process;
    returns them. Why: a process killed with SIGKILL runs no cleanup, and the pid names what the dead left."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{prefix}*-*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and path.is_dir() and not path.is_symlink() and not pid_alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return tuple(removed)


PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def _prctl(option: int, arg: int) -> bool:
    """``prctl(option, arg)`` (Linux); False where it fails or there is none."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@contextmanager
def adopting_orphans() -> Iterator[Callable[[], list[str]]]:
    """While inside, processes a child leaves behind (a server's helper in a session of its own) come back to this
    process, a subreaper (``prctl PR_SET_CHILD_SUBREAPER``; without it, only own children); the function yielded
    kills and reaps those that appeared since entry and names them (``pid 123 (cmd...)``)."""
    import psutil

    me = psutil.Process()
    before = {p.pid for p in me.children()}
    enabled = _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def survivors() -> list[str]:
        named = []
        for child in me.children():
            if child.pid in before:
                continue
            with suppress(psutil.Error):
                named.append(f"pid {child.pid} ({' '.join(child.cmdline())[:200]})")
                child.kill()
                child.wait(timeout=KILL_WAIT)
        return named

    try:
        yield survivors
    finally:
        if enabled:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


# --------------------------------------------------------------------------- children that die with the kit

GUARD_ENV = "OMNI_LOADER_GUARD"  # in a guarded child's environment (and so its descendants'): whose it is
PARENT_ENV = "OMNI_LOADER_PARENT"  # set by a parent whose children call die_with_parent(): its pid
PR_SET_PDEATHSIG = 1  # linux/prctl.h

# The watcher (ChildGuard's): reads "+PGID" / "-PGID" lines from a pipe only the kit writes; at EOF it stops the
# groups still registered, then every process carrying the kit's token. No imports of the kit's: it starts fast.
_WATCHER = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
env, token, grace = sys.argv[1], sys.argv[2], float(sys.argv[3])
groups = set()
for line in sys.stdin.buffer:
    try:
        (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
    except ValueError:
        pass
def signal_groups(sig):
    for pgid in list(groups):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            groups.discard(pgid)
        except PermissionError:
            pass
signal_groups(signal.SIGTERM)
deadline = time.monotonic() + grace
while groups and time.monotonic() < deadline:
    time.sleep(0.05)
    signal_groups(0)
signal_groups(signal.SIGKILL)
needle = ("%s=%s" % (env, token)).encode()
for entry in os.listdir("/proc"):
    if entry.isdigit() and int(entry) != os.getpid():
        try:
            with open("/proc/%s/environ" % entry, "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    os.kill(int(entry), signal.SIGKILL)
        except OSError:
            pass
"""


class ChildGuard:
    """Children that die with this process even when it cannot clean up (SIGKILL, a crash, out of memory).

    A watcher process holds the read end of a pipe only this process writes: when this process ends, however, the
    watcher reads EOF and stops every group registered with :meth:`watch` (SIGTERM, SIGKILL after ``grace`` s), then
    every process carrying this guard's token (:meth:`env`). Where it cannot start, :attr:`active` is False."""

    def __init__(self, grace: float) -> None:
        import secrets

        self.token = secrets.token_hex(8)
        self._write: int | None = None
        self.proc: subprocess.Popen | None = None
        read, write = os.pipe()
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHER, GUARD_ENV, self.token,
                                          repr(float(grace))], stdin=read, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)
            self._write = write
        except OSError:
            os.close(write)
        finally:
            os.close(read)

    @property
    def active(self) -> bool:
        return self._write is not None

    def env(self) -> dict[str, str]:
        """What a guarded child's environment adds: the token its descendants inherit."""
        return {GUARD_ENV: self.token} if self.active else {}

    def _say(self, line: str) -> None:
        if self._write is None:
            return
        try:
            os.write(self._write, line.encode())
        except OSError:  # the watcher is gone: nothing to tell
            self.close()

    def watch(self, pgid: int) -> None:
        """Stop process group ``pgid`` if this process ends before :meth:`forget`."""
        self._say(f"+{pgid}\n")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` was stopped here: the watcher leaves it (its id may be someone's later)."""
        self._say(f"-{pgid}\n")

    def close(self) -> None:
        """Let the watcher go (it finds nothing left to stop) and reap it."""
        if self._write is not None:
            os.close(self._write)
            self._write = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=KILL_WAIT + 10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def __enter__(self) -> ChildGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def die_with_parent() -> bool:
    """Ask the kernel to send SIGTERM to this process when its parent ends (Linux ``PR_SET_PDEATHSIG``), if the
    parent set :data:`PARENT_ENV` to its pid (one already ended: SIGTERM at once); returns whether it was made. Why:
    a stage-group killed with SIGKILL stops none of its stages; the signal is tied to its main thread."""
    expected = os.environ.get(PARENT_ENV, "")
    if not expected.isdigit():
        return False
    made = _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
    if made and os.getppid() != int(expected):  # the parent ended before the request: it will not be sent
        os.kill(os.getpid(), signal.SIGTERM)
    return made


# What a worker is doing, told by its name as the kernel keeps it (/proc/PID/comm, 15 bytes): the progress bar
# reads it with no channel to the worker; set before a phase's clock starts. Only the top-level steps.
PHASE_NAMES = {"construct": "ol:construct", "outer_load_weights": "ol:load-weights", "post_load": "ol:post-load",
               "digest": "ol:digest", "reference_copy": "ol:ref-copy"}
_ANNOUNCING = [False]  # on in a worker process only: a notebook's kernel keeps its own name


def announce_phases() -> None:
    """From now on this process names itself after each top-level phase it enters (a worker calls it)."""
    _ANNOUNCING[0] = True


def announce(phase: str) -> None:
    """Name this process after ``phase`` (a key of :data:`PHASE_NAMES`) when it announces its phases."""
    if _ANNOUNCING[0] and phase in PHASE_NAMES:
        with suppress(OSError), open("/proc/self/comm", "w") as fh:  # prctl(PR_SET_NAME) as a file: one short write
            fh.write(PHASE_NAMES[phase])  # not Linux, or no /proc: the bar says less, the load is the same


def process_phase(pid: int) -> str | None:
    """The phase a worker announced (a key of :data:`PHASE_NAMES`), or None (not yet, not a worker, gone)."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            name = fh.read().strip()
    except OSError:
        return None
    return next((phase for phase, named in PHASE_NAMES.items() if named == name), None)
