"""One benchmark's life in a results directory: recorded running, its runs appended, ended complete or
interrupted. The load A/B (:mod:`omni_loader.bench.runner`) and the startup A/B
(:mod:`omni_loader.startup.serve_ab`) both live it through :func:`recording`.

Why one: the two benchmarks used to write the same steps twice (store the record, append each run,
store the status at the end, mark an interrupted one so that ``--resume`` continues it), and each
copy could drift: a status left ``running`` by an exception, a count stored in one and not the other.
Here the rule is written once: whatever ends the block (a finished loop, Ctrl-C, an error), the
record's status says how it ended, with the fields the benchmark keeps up to date.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .rows import RunRow, append_rows, runs_file
from .suite import store_benchmark, with_status


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
