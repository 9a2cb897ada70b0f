"""Every file the kit writes is opened here: in place, never through a link, checked before the first byte.

Why: a results directory (or any ``--out`` folder) is shared, copied and unpacked by hand, and a link
planted in it (``report.md -> ~/.bashrc``, ``runs.csv -> /etc/passwd``, ``plots -> /``) would make the
kit write through it: as root, into any file. A *hard* link is the same danger without the arrow:
``report.md`` that is another name of ``~/.bashrc`` is that file. So every writer (runs.csv,
metadata.json, writer.lock, report.md, plots/, compare's, timeline's, pack's, the sweeps' and the
notebooks' outputs) opens its files here: ``O_NOFOLLOW`` (no symbolic link), a regular file only (a
FIFO would hang an open), a file with one name only (``st_nlink`` 1: no hard link), all checked on the
open descriptor before it is truncated or written; folders are made by :func:`ensure_dir` (never a
link). A refusal is one line naming the file. A whole file written by a library or a tool that wants a
path (papermill, an archive, py-spy's ``--output``, torch.profiler's Chrome trace, cProfile's pstats) is
written in a private folder made beside it (mode 0700: nobody else can plant a link there while the tool
writes) and renamed into place (:func:`replaced`): a link at the file's name is refused before the tool
starts and again before the rename, which replaces a name and never writes through one.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .errors import ResultsError

# Open modes as os.open flags (always O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK: see _open_fd).
_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT,  # truncated once the descriptor is checked (see open_fd), never before
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


def hard_link_refusal(path: str | os.PathLike[str], names: int, why: str = WRITES_IN_PLACE) -> ResultsError:
    """The one-line error for a file that has other names (a hard link): writing it writes them all."""
    return ResultsError(f"{path} is a hard link (one of {names} names of one file: writing it would write the "
                        f"others): {why}")


def refuse_link(path: str | os.PathLike[str], why: str = WRITES_IN_PLACE) -> None:
    """Refuse (one line, ending in ``why``) if ``path`` is a symbolic link, or a file with more than one name."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise link_refusal(path, why)
    if not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1:
        raise hard_link_refusal(path, info.st_nlink, why)


def refuse_links(directory: str | os.PathLike[str], names: Any, why: str = WRITES_IN_PLACE) -> None:
    """Refuse (one line, ending in ``why``) if any of ``names`` in ``directory`` is a link (symbolic or hard)."""
    for name in names:
        refuse_link(Path(directory) / name, why)


def open_fd(path: str | os.PathLike[str], mode: str = "w") -> int:
    """An OS file descriptor of ``path`` opened for writing (``w``, ``a``, ``r+``, ``a+``), never through a link.

    A symbolic link, a hard link (a file with another name), a directory, a FIFO or a device where a
    regular file belongs is refused in one line, before a byte is written or truncated (``w`` truncates
    only after the descriptor is checked).
    """
    path = Path(path)
    flags = _FLAGS[mode] | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a planted FIFO cannot hang us
    try:
        fd = os.open(path, flags, 0o644)
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
    if info.st_nlink > 1:
        os.close(fd)
        raise hard_link_refusal(path, info.st_nlink)
    if mode == "w":
        os.ftruncate(fd, 0)
    os.set_blocking(fd, True)
    return fd


def open_file(path: str | os.PathLike[str], mode: str = "w", *, binary: bool = False,
              newline: str | None = None) -> IO[Any]:
    """``path`` as a file object for writing (see :func:`open_fd`): text unless ``binary``."""
    fd = open_fd(path, mode)
    try:
        if binary:
            return os.fdopen(fd, mode.replace("+", "") + "b" + ("+" if "+" in mode else ""))
        return open(fd, mode, newline=newline, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` (created or truncated), never through a link."""
    with open_file(path, "w") as fh:
        fh.write(text)
    return Path(path)


@contextmanager
def replaced(path: str | os.PathLike[str], keep_failed: bool = False) -> Iterator[Path]:
    """A new, empty file of ``path``'s name for a library or a tool that writes by name (papermill, an archive,
    py-spy, torch.profiler), in a private folder made beside ``path``; moved onto ``path`` when the block ends
    without an error (removed otherwise; with ``keep_failed``, what was written is moved into place even then:
    an executed notebook that failed shows where). The folder is the block's to use for other scratch files too
    (``tmp.parent``); it is removed when the block ends.

    ``path`` itself is checked first: a link there (symbolic or hard) is refused in one line before the block
    runs, and again before the move, which replaces the name (:func:`place`), never writes through it. The
    private folder (mode 0700) leaves nobody else a moment to plant a link where the tool writes."""
    path = Path(path)
    _refuse_target(path)
    # a folder of its own, named after the file (papermill warns of a notebook not named .ipynb: the file keeps
    # its name inside)
    private = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp = private / path.name
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))
        os.chmod(tmp, 0o644)  # as open_fd makes a file, whatever the umask
        yield tmp
        place(tmp, path)
    except BaseException:
        if keep_failed and tmp.is_file() and tmp.stat().st_size:
            try:
                place(tmp, path)
            except (ResultsError, OSError):  # a link planted meanwhile: the error that ended the block is told
                pass
        raise
    finally:
        shutil.rmtree(private, ignore_errors=True)


def place(written: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Move the file ``written`` (a regular file of one name, in a folder of the caller's own) onto ``path`` by a
    rename: a link at ``path`` is refused in one line (and the file it names untouched); ``path``'s folder is
    the same file system as ``written``'s."""
    written, path = Path(written), Path(path)
    info = os.lstat(written)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        raise ResultsError(f"{written} is not a regular file of one name: it is not moved to {path}")
    _refuse_target(path)  # planted meanwhile: still never replaced by a rename that would hide it
    os.replace(written, path)
    return path


def _refuse_target(path: Path) -> None:
    refuse_link(path)
    if path.is_dir():
        raise ResultsError(f"{path} is a folder: remove it or name a file, and run again")


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
