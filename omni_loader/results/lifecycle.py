"""One benchmark's life in a results directory: recorded running, its runs appended, ended complete or
interrupted. The load A/B (:mod:`omni_loader.bench.runner`) and the startup A/B
(:mod:`omni_loader.startup.serve_ab`) both live it through :func:`recording`, so whatever ends the block, the
record's status says how it ended.

The report's drawing is recorded the same way (:func:`drawing_report`), so a suite whose drawing was stopped
does not look complete with its report missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .rows import RunRow, append_rows, runs_file
from .suite import REPORT_FILE, Record, Suite, store_benchmark, store_report

if TYPE_CHECKING:
    from .integrity import Results


class Recording:
    """The benchmark being written: its record, and the fields that move with each run (counts, activity)."""

    def __init__(self, out: Path, member: str, record: Record, fields: dict[str, Any]) -> None:
        self.out, self.member, self.record, self.fields = out, member, record, dict(fields)
        self.runs_file: tuple[int, int] | None = None  # the runs.csv it appends to (taken when it starts)

    def store(self, status: str = "running") -> None:
        store_benchmark(self.out, self.member, self.record.with_status(status, **self.fields))

    def ran(self, rows: Iterable[RunRow | dict[str, Any]], **fields: Any) -> None:
        """One run's rows appended the moment it ends; ``fields`` given are stored with the record at once."""
        append_rows(self.out, rows, expect=self.runs_file)
        if fields:
            self.fields.update(fields)
            self.store()

    def update(self, **fields: Any) -> None:
        """Fields stored with the record when it is next stored (at the latest, when the block ends)."""
        self.fields.update(fields)


@contextmanager
def recording(out: str | os.PathLike[str], member: str, record: Record, **fields: Any) -> Iterator[Recording]:
    """Store ``record`` running, yield the :class:`Recording`, store how the block ended. Under the lock."""
    rec = Recording(Path(out), member, record, fields)
    rec.store("running")
    status = "interrupted"
    try:
        with runs_file(out) as rec.runs_file:  # the runs.csv this benchmark appends to: one replaced is refused
            yield rec
        status = "complete"
    finally:
        rec.store(status)


# --------------------------------------------------------------------------- the report drawn from the runs


@contextmanager
def drawing_report(out: str | os.PathLike[str], check: Results | None = None) -> Iterator[Results]:
    """Record the report ``not drawn``, yield the check, record it ``drawn`` unless the block failed."""
    reserve_blas()
    check = report_check(out, check)
    written = store_report(out, "not drawn", check.suite)  # the lock held: metadata.json is as the check read it
    try:
        yield check
    except MemoryError as exc:  # the command line's one line says so, and what draws it (the frames kept: where)
        raise MemoryError(f"{str(exc) or 'MemoryError'}; {REPORT_FILE} was not drawn: draw it with omni-loader "
                          f"report {out}").with_traceback(exc.__traceback__) from None
    store_report(out, "drawn", written)


def reserve_blas() -> None:
    """Have OpenBLAS (numpy's) map its product and LAPACK buffers now, while memory is free. OpenBLAS calls ``exit(1)``
    when that map fails, past every handler of the kit; once mapped, memory that runs out later is a MemoryError the
    command line words in one line. One thread's size, not one per thread."""
    import numpy as np

    np.ones((64, 64)) @ np.ones((64, 64))
    np.linalg.inv(np.eye(3) * 2.0)


def report_check(out: str | os.PathLike[str], check: Results | None = None) -> Results:
    """The check a report is drawn from, without the finding that the report was not drawn."""
    import dataclasses

    from .integrity import REPORT_NOT_DRAWN, check_results

    check = check if check is not None else check_results(out)
    return dataclasses.replace(check, found=tuple(f for f in check.found if f.short != REPORT_NOT_DRAWN))


def report_drawn(out: str | os.PathLike[str]) -> bool:
    """Record report.md drawn after ``omni-loader report`` (unless a live writer will); whether it did."""
    from .lock import lock_holder, writer_lock

    report = Suite.read(out).report
    if report is None or report.get("status") == "drawn":
        return False
    holder = lock_holder(out)
    if holder and holder.get("alive"):
        return False
    with writer_lock(out):
        store_report(out, "drawn")
    return True
