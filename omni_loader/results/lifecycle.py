"""One benchmark's life in a results directory: recorded running, its runs appended, ended complete or
interrupted. The load A/B (:mod:`omni_loader.bench.runner`) and the startup A/B
(:mod:`omni_loader.startup.serve_ab`) both live it through :func:`recording`.

Why one: the two benchmarks used to write the same steps twice (store the record, append each run,
store the status at the end, mark an interrupted one so that ``--resume`` continues it), and each
copy could drift: a status left ``running`` by an exception, a count stored in one and not the other.
Here the rule is written once: whatever ends the block (a finished loop, Ctrl-C, an error), the
record's status says how it ended, with the fields the benchmark keeps up to date.

The report is drawn after the benchmarks, and its drawing is recorded the same way
(:func:`drawing_report`): metadata.json says ``"report": {"status": "not drawn"}`` until report.md is
written, so a suite whose drawing was stopped (out of memory in matplotlib or OpenBLAS, a kill) is no
longer "complete" with nothing to say that its report is missing; the integrity check names it, and
``omni-loader report DIR`` draws it and records it drawn (:func:`report_drawn`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .rows import RunRow, append_rows, runs_file
from .suite import REPORT_FILE, REPORT_KEY, read_metadata, store_benchmark, store_report, with_status

if TYPE_CHECKING:
    from .integrity import Results


class Recording:
    """The benchmark being written: its record, and the fields that move with each run (counts, activity)."""

    def __init__(self, out: Path, member: str, record: dict[str, Any], fields: dict[str, Any]) -> None:
        self.out, self.member, self.record, self.fields = out, member, record, dict(fields)
        self.runs_file: tuple[int, int] | None = None  # the runs.csv it appends to (taken when it starts)

    def store(self, status: str = "running") -> None:
        store_benchmark(self.out, self.member, with_status(self.record, status, **self.fields))

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
def recording(out: str | os.PathLike[str], member: str, record: dict[str, Any], **fields: Any) -> Iterator[Recording]:
    """Store ``record`` as running, yield the :class:`Recording`, and store how the block ended: ``complete``
    when it ran to its end, ``interrupted`` when anything stopped it (the exception goes on). The caller
    holds the directory's writer lock."""
    rec = Recording(Path(out), member, record, fields)
    rec.store("running")
    status = "interrupted"
    try:
        rec.runs_file = runs_file(out)  # the runs.csv this benchmark appends to: one replaced meanwhile is refused
        yield rec
        status = "complete"
    finally:
        rec.store(status)


# --------------------------------------------------------------------------- the report drawn from the runs


@contextmanager
def drawing_report(out: str | os.PathLike[str], check: Results | None = None) -> Iterator[Results]:
    """Record the report as ``not drawn``, yield the check to draw it from, and record it ``drawn`` when the block
    ends without an error (out of memory, an interrupt: it stays ``not drawn``, and the integrity check says so).

    ``check`` is the directory already checked (else it is checked here); what is yielded is that check without
    the finding that the report was not drawn, which the drawing cures. The caller holds the writer lock."""
    reserve_blas()
    check = report_check(out, check)
    written = store_report(out, "not drawn", check.metadata)  # the lock held: metadata.json is as the check read it
    try:
        yield check
    except MemoryError as exc:  # the command line's one line says so, and what draws it (the frames kept: where)
        raise MemoryError(f"{str(exc) or 'MemoryError'}; {REPORT_FILE} was not drawn: draw it with omni-loader "
                          f"report {out}").with_traceback(exc.__traceback__) from None
    store_report(out, "drawn", written)


def reserve_blas() -> None:
    """Have OpenBLAS (numpy's) map its working buffer now, while memory is free, not at the report's first matrix
    product.

    Why: OpenBLAS maps the buffer at the first product in a process, and when the map fails (out of memory) it
    prints its own line and calls ``exit(1)``: no handler of the kit's runs, so no one line of the kit's, a
    temporary directory (multiprocessing's ``pymp-*``, the fork server's) is left behind, and report.md is not
    drawn. Once the buffer is mapped, later products reuse it, and memory that runs out later is a MemoryError
    (numpy, matplotlib's ``std::bad_alloc``) that the command line words in one line. Seen under an address-space
    limit set as the report began: OpenBLAS's exit at every limit from 8 to 32 MiB above what the process held,
    the kit's line at each of them with the buffer reserved first. A product of one thread's size: a buffer per
    OpenBLAS thread would ask hundreds of MiB of address space of a many-core machine for nothing. And an inverse:
    matplotlib inverts its 3x3 transforms as it draws, and the OpenBLAS of numpy 2.4 (0.3.31) maps LAPACK's buffer
    apart from the product's (the suite saw its exit at caps of 16 to 32 MiB again with only the product done)."""
    import numpy as np

    np.ones((64, 64)) @ np.ones((64, 64))
    np.linalg.inv(np.eye(3) * 2.0)


def report_check(out: str | os.PathLike[str], check: Results | None = None) -> Results:
    """The check a report is drawn from: ``check`` (else the directory checked now) without the finding that
    its report was not drawn: the report being drawn must not say of itself that it is missing."""
    import dataclasses

    from .integrity import REPORT_NOT_DRAWN, check_results

    check = check if check is not None else check_results(out)
    return dataclasses.replace(check, found=tuple(f for f in check.found if f.short != REPORT_NOT_DRAWN))


def report_drawn(out: str | os.PathLike[str]) -> bool:
    """After ``omni-loader report`` drew report.md: a record that says the report was not drawn now says it was
    (under the writer lock; when a writer holds it, that writer draws, and records, its own report when it
    ends). Whether the record changed; a directory that records no drawing is left as it is."""
    from .lock import lock_holder, writer_lock

    report = read_metadata(out).get(REPORT_KEY)
    if not isinstance(report, dict) or report.get("status") == "drawn":
        return False
    holder = lock_holder(out)
    if holder and holder.get("alive"):
        return False
    with writer_lock(out):
        store_report(out, "drawn")
    return True
