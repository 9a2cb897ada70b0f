"""Files of a results directory opened for writing without following links.

Why: a results directory is shared, copied and unpacked by hand, and a link planted in it
(``report.md -> ~/.bashrc``, ``runs.csv -> /etc/passwd``, ``plots -> /``) would make the kit
write through it: as root, into any file. Every writer of a results directory (runs.csv,
metadata.json, writer.lock, report.md, plots/) opens its files here: ``O_NOFOLLOW``, a regular
file only (a FIFO would hang an open), and a refusal is one line naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

from ..errors import ResultsError

# Open modes as os.open flags (always O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK: see _open_fd).
_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "r+": os.O_RDWR | os.O_CREAT,
    "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND,
}


WRITES_IN_PLACE = ("omni-loader writes a results directory's files only in place, never through a link; remove the "
                   "link (or replace it with a copy) and run again")


def link_refusal(path: str | os.PathLike[str], why: str = WRITES_IN_PLACE) -> ResultsError:
    """The one-line error for a symbolic link where a results directory's file or folder belongs."""
    path = Path(path)
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        target = ""
    return ResultsError(f"{path} is a symbolic link{target}: {why}")


def refuse_links(directory: str | os.PathLike[str], names: Any, why: str = WRITES_IN_PLACE) -> None:
    """Refuse (one line, ending in ``why``) if any of ``names`` in ``directory`` is a symbolic link."""
    for name in names:
        path = Path(directory) / name
        if path.is_symlink():
            raise link_refusal(path, why)


def open_fd(path: str | os.PathLike[str], mode: str = "w", perms: int = 0o644) -> int:
    """An OS file descriptor of ``path`` opened for writing (``w``, ``a``, ``r+``, ``a+``), never through a link.

    A link, a directory, a FIFO or a device where a regular file belongs is refused in one line.
    """
    path = Path(path)
    flags = _FLAGS[mode] | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a planted FIFO cannot hang us
    try:
        fd = os.open(path, flags, perms)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) or path.is_symlink():
            raise link_refusal(path) from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            raise ResultsError(f"{path} is not a regular file: a results directory's {path.name} must be one; "
                               "remove it and run again") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ResultsError(f"{path} is not a regular file: a results directory's {path.name} must be one; remove it "
                           "and run again")
    os.set_blocking(fd, True)
    return fd


def open_file(path: str | os.PathLike[str], mode: str = "w", *, binary: bool = False,
              newline: str | None = None, encoding: str = "utf-8") -> IO[Any]:
    """``path`` as a file object for writing (see :func:`open_fd`): text unless ``binary``."""
    fd = open_fd(path, mode)
    try:
        if binary:
            return os.fdopen(fd, mode.replace("+", "") + "b" + ("+" if "+" in mode else ""))
        return open(fd, mode, newline=newline, encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` (created or truncated), never through a link."""
    with open_file(path, "w") as fh:
        fh.write(text)
    return Path(path)


def ensure_dir(path: str | os.PathLike[str]) -> Path:
    """The folder ``path`` (made if need be; its parents too), refused in one line when it is a link or a file."""
    path = Path(path)
    if path.is_symlink():
        raise link_refusal(path)
    if path.exists() and not path.is_dir():
        raise ResultsError(f"{path} is not a folder: remove it and run again")
    path.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():  # made by someone else between the two looks
        raise link_refusal(path)
    if not path.is_dir():
        raise ResultsError(f"{path} is not a folder: remove it and run again")
    return path
