"""One writer per results directory: an exclusive lock held for as long as a benchmark writes it.

An ``flock`` on the directory itself (which deleting ``writer.lock`` cannot undo) and on ``writer.lock`` (which
names the holder); the OS drops both when the process dies. Readers take no lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..host.procs import pid_alive
from ..safe_files import open_fd, refuse_links

# Held (flock) by the one process writing the directory; holds its pid and command while it does.
LOCK_FILE = "writer.lock"

_HELD: dict[Path, list[int]] = {}  # directory -> [lock file descriptor, depth, directory descriptor] of this process


# What a writer writes in a results directory: none of them may be a link (see omni_loader.safe_files).
WRITTEN = ("runs.csv", "runs.rejected.csv", "runs.csv.tmp", "metadata.json", "metadata.json.tmp", "report.md",
           "plots", "logs", "profiles")


@contextmanager
def writer_lock(directory: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the results directory's writer lock (made if need be) for the block; re-entrant in one process.

    A second writer is refused in one line naming the holder; so is a directory whose files are symbolic or hard
    links. A directory this call made that holds only the lock file when the block ends is removed.
    """
    directory = Path(directory)
    made = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    directory.mkdir(parents=True, exist_ok=True)
    key = directory.resolve()
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield directory
        finally:
            _HELD[key][1] -= 1
        return
    dir_fd = _lock_directory(directory)
    try:
        fd = open_fd(directory / LOCK_FILE, "r+")
    except BaseException:
        _release(dir_fd)
        _remove_made(made)
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        _release(dir_fd)
        _refuse(directory)
    try:
        refuse_links(directory, WRITTEN)
    except BaseException:
        _release(fd)
        _release(dir_fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(_holder_record()).encode(), 0)
    _HELD[key] = [fd, 1, dir_fd]
    try:
        yield directory
    finally:
        del _HELD[key]
        os.ftruncate(fd, 0)  # an empty lock file: nobody writing
        if made and os.listdir(directory) == [LOCK_FILE]:
            os.unlink(directory / LOCK_FILE)  # while still held: no second writer took it meanwhile
        _release(fd)
        _release(dir_fd)
        _remove_made(made)


def _lock_directory(directory: Path) -> int | None:
    """The directory's own flock (its descriptor), or None where the file system cannot lock a directory."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(dir_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(dir_fd)
        _refuse(directory)
    except OSError:  # e.g. NFS, which emulates flock with locks a read-only descriptor cannot take
        os.close(dir_fd)
        return None
    return dir_fd


def _refuse(directory: Path) -> None:
    raise ResultsError(f"{directory} is being written by {describe_holder(lock_holder(directory))}; one writer per "
                       "results directory: wait for it to finish, or choose another --out") from None


def _release(fd: int | None) -> None:
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _remove_made(made: list[Path]) -> None:
    """Remove the folders a writer made (deepest first) that are still empty."""
    for path in made:
        try:
            path.rmdir()
        except OSError:
            return


def _holder_record() -> dict[str, Any]:
    """This process as the lock file names it: pid, host, the command as the user typed it, since when."""
    from .metadata import command_line, now_iso

    return {"pid": os.getpid(), "host": socket.gethostname(), "command": command_line(), "since": now_iso()}


def lock_holder(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Who holds (or last held, if it died) the writer lock: pid, host, command, since, alive; None if nobody."""
    try:
        text = (Path(directory) / LOCK_FILE).read_text()
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return None
    alive = pid_alive(record["pid"]) if record.get("host") == socket.gethostname() else None  # None: another host
    return {**record, "alive": alive}


def describe_holder(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process"
    command = holder.get("command") or "?"
    command = command if len(command) <= 80 else command[:77] + "..."
    return f"process {holder['pid']} on {holder.get('host', '?')} ({command}, since {holder.get('since', '?')})"
