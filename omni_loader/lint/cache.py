"""What an earlier audit made of a file, kept by the file's content so an unchanged file is not parsed again.

Keyed by content (a modification time says nothing after a checkout), with the audit's own version,
the Python version and the module name. An entry is a pickle, which can run code when read, so the
folder must be private and this user's, entries regular files of this user, written by rename. A
cache that cannot be used costs time, never a finding."""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from ..names import cache_dir

FORMAT = b"omni-loader audit cache 1"


@lru_cache(maxsize=1)
def audit_version() -> bytes:
    """The package's version, this package's own source bytes and the Python version, hashed."""
    from .. import __version__

    h = hashlib.sha256(FORMAT + __version__.encode() + sys.version.encode())
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + path.read_bytes())
    return h.digest()


def key(module: str, package: bool, data: bytes) -> str:
    return hashlib.sha256(audit_version() + f"{module}\0{package}\0".encode() + data).hexdigest()


class Cache:
    """Entries by key in one private folder, ``audit`` in the kit's cache folder; ``problem`` says why the cache is
    off ('' when on)."""

    def __init__(self) -> None:
        self.folder = cache_dir() / "audit"
        self.problem = ""
        self.used = 0
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = os.lstat(self.folder)
        except OSError as exc:
            self.problem = f"{self.folder}: {exc.strerror or exc}"
            return
        if not stat.S_ISDIR(info.st_mode):
            self.problem = f"{self.folder} is not a folder (a link?)"
        elif info.st_uid != os.getuid():
            self.problem = f"{self.folder} belongs to another user"
        elif info.st_mode & 0o022:
            self.problem = f"{self.folder} is writable by others"

    def get(self, name: str) -> bytes | None:
        if self.problem:
            return None
        try:
            fd = os.open(self.folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            return fh.read() if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() else None

    def put(self, name: str, data: bytes) -> None:
        if self.problem:
            return
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{name[:16]}.", dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, self.folder / name)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # a full disk costs the next audit time, not this one a finding
