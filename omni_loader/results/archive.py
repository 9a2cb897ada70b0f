"""A results directory as one file, so a colleague can send a reproduction as an attachment.

``omni-loader compare`` reads an archive as it reads a directory (:func:`opened`): unpacked into a temporary
directory, tar members through tarfile's ``data`` filter, zip members outside the folder refused, and no more
than :data:`MAX_UNPACKED_BYTES`.
"""

from __future__ import annotations

import os
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ..errors import ResultsError
from .lock import describe_holder, lock_holder
from .suite import METADATA_FILE, read_metadata
from .rows import RUNS_FILE
from ..safe_files import ensure_dir, refuse_links, replaced

FORMATS = {"tar.gz": (".tar.gz", ".tgz"), "zip": (".zip",)}
# What an archive holds: the two files the statistics come from, and what was rendered from them.
PACKED_FILES = (METADATA_FILE, RUNS_FILE, "report.md")
PACKED_DIRS = ("plots", "profiles")  # the report links into both
MAX_UNPACKED_BYTES = 2 * 2**30  # a results directory is kilobytes to megabytes; refuse a decompression bomb


def archive_format(path: str | os.PathLike[str]) -> str | None:
    """'tar.gz' or 'zip' from the file name's ending, else None."""
    name = Path(path).name.lower()
    return next((fmt for fmt, endings in FORMATS.items() if name.endswith(endings)), None)


def packed_files(directory: Path) -> list[Path]:
    """The files :func:`pack` puts in the archive, relative to ``directory`` (links and special files left out)."""
    files = [Path(name) for name in PACKED_FILES if (directory / name).is_file()]
    for sub in PACKED_DIRS:
        root = directory / sub
        if root.is_dir() and not root.is_symlink():
            files += sorted(p.relative_to(directory) for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    return files


def pack(directory: str | os.PathLike[str], out: str | os.PathLike[str] | None = None, fmt: str | None = None,
         overwrite: bool = False) -> Path:
    """Write ``directory`` as one archive; returns its path (default: ``DIR.tar.gz`` beside ``DIR``).

    ``fmt`` is 'tar.gz' or 'zip' (default: from ``out``'s ending, else 'tar.gz'). The directory is first read
    as compare reads an archive, so pack never writes one its own compare refuses.
    """
    from .integrity import check_results

    directory = Path(directory).resolve()
    read_metadata(directory)  # refuses a non-results directory and an unknown schema, in one line
    holder = lock_holder(directory)
    if holder and holder.get("alive"):  # its runs.csv and metadata.json still grow: an archive now is a part of them
        raise ResultsError(f"{directory} is being written by {describe_holder(holder)}: pack it once that writer has "
                           "ended")
    if not (directory / RUNS_FILE).is_file():
        raise ResultsError(f"nothing to pack: {directory} has no {RUNS_FILE}")
    check_results(directory)  # what compare refuses in one line (a damaged header...), refused here, in the same line
    # A linked file would be stored as a link to a path elsewhere, which opened() then refuses: said now instead.
    refuse_links(directory, (*PACKED_FILES, *PACKED_DIRS),
                 why="pack stores a results directory's own files, never links; replace it with a copy and pack again")
    if fmt is None:
        fmt = archive_format(out) if out is not None and archive_format(out) else "tar.gz"
    if fmt not in FORMATS:
        raise ResultsError(f"archive format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    out = Path(out) if out is not None else directory.parent / f"{directory.name}{FORMATS[fmt][0]}"
    if archive_format(out) != fmt:
        raise ResultsError(f"{out}: a {fmt} archive's name must end in {' or '.join(FORMATS[fmt])}")
    if os.path.lexists(out) and not overwrite:
        raise ResultsError(f"{out} already exists (pass --force to replace it)")
    ensure_dir(out.parent)
    folder = directory.name
    files = packed_files(directory)
    total = sum((directory / rel).stat().st_size for rel in files)
    if total > MAX_UNPACKED_BYTES:  # compare's limit on unpacking: an archive it would refuse is not written
        raise ResultsError(f"{directory} holds {total / 2**30:.1f} GiB to pack (plots/, profiles/): compare refuses an "
                           f"archive that unpacks to more than {MAX_UNPACKED_BYTES / 2**30:.0f} GiB; move the largest "
                           "profiles out and pack again")
    with replaced(out) as tmp:  # a new file renamed into place: a link at ``out`` is refused, never written through
        if fmt == "zip":
            with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for rel in files:
                    zf.write(directory / rel, f"{folder}/{rel.as_posix()}")
        else:
            with tarfile.open(tmp, "w:gz") as tf:
                for rel in files:
                    tf.add(directory / rel, arcname=f"{folder}/{rel.as_posix()}", recursive=False, filter=_anonymous)
    return out


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """No user or group names of the packer's machine in the archive."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


@contextmanager
def opened(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The results directory at ``path``, or an archive of one unpacked into a temporary directory."""
    path = Path(path)
    if path.is_dir():
        yield path
        return
    if not path.exists():
        raise ResultsError(f"no such results directory or archive: {path}")
    fmt = archive_format(path)
    if fmt is None:
        raise ResultsError(f"{path} is neither a results directory nor a .tar.gz or .zip archive of one")
    with tempfile.TemporaryDirectory(prefix="omni-loader-archive-") as tmp:
        dest = Path(tmp)
        (_extract_zip if fmt == "zip" else _extract_tar)(path, dest)
        yield _results_root(dest, path)


def _extract_tar(path: Path, dest: Path) -> None:
    try:
        with tarfile.open(path, "r:*") as tf:
            _check_size(path, sum(m.size for m in tf.getmembers() if m.isfile()))
            tf.extractall(dest, filter="data")
    except tarfile.FilterError as exc:
        raise ResultsError(f"{path}: unsafe archive member refused ({exc})") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ResultsError(f"{path} is not a readable .tar.gz archive ({exc})") from None


def _extract_zip(path: Path, dest: Path) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            _check_size(path, sum(i.file_size for i in infos))
            root = dest.resolve()
            for info in infos:
                name = PurePosixPath(info.filename.replace("\\", "/"))
                target = (root / name).resolve()
                if name.is_absolute() or ".." in name.parts or not target.is_relative_to(root):
                    raise ResultsError(f"{path}: unsafe archive member refused ({info.filename!r} would be "
                                       "written outside the folder it is unpacked into)")
            zf.extractall(dest)
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise ResultsError(f"{path} is not a readable .zip archive ({exc})") from None


def _check_size(path: Path, total: int) -> None:
    if total > MAX_UNPACKED_BYTES:
        raise ResultsError(f"{path} would unpack to {total / 2**30:.1f} GiB: not a packed results directory "
                           f"(limit {MAX_UNPACKED_BYTES / 2**30:.0f} GiB)")


def _results_root(dest: Path, archive: Path) -> Path:
    """The folder of the unpacked archive that holds metadata.json: its top level or one folder below."""
    if (dest / METADATA_FILE).is_file():
        return dest
    found = sorted(p.parent for p in dest.glob(f"*/{METADATA_FILE}") if p.is_file())
    if not found:
        raise ResultsError(f"{archive} holds no {METADATA_FILE}: not a packed results directory")
    if len(found) > 1:
        raise ResultsError(f"{archive} holds {len(found)} results directories ({', '.join(p.name for p in found)}); "
                           "pack one per archive")
    return found[0]
