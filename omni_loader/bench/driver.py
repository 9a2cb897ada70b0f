"""One loop for a plan of runs: the runs not saved yet, each through an arm, each saved the moment it ends.

Why one: ``profile --diff`` kept a loop of its own that saved nothing until its last run, so a kill lost every
sampled run and the diff could not be continued, while each A/B benchmark kept its own loop, lock and resume. Here
the rule is written once: under the directory's writer lock, each planned run whose id is not among those already
saved goes through the *arm* (a run -> its result) and is saved by ``save`` as soon as it ends, so a kill loses at
most the run in flight; the bar (a step bar: ``begin(step, text)``, ``end(text)``) says each run. An interrupt
(Ctrl-C, or SIGTERM, which the command line turns into one) ends in :class:`Interrupted`, whose
:attr:`~Interrupted.line` is the kit's one "interrupted … continue with …" line, the command shell-quoted. A
results suite's member begins (new or continued) and ends (complete or interrupted) in :func:`continuing`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..formatting import count
from ..results.integrity import Results, Resumption, check_results, resume_benchmark
from ..results.lifecycle import Recording, recording
from ..results.lock import writer_lock
from ..results.planner import PlannedRun
from ..results.suite import Record


class Interrupted(KeyboardInterrupt):
    """A plan stopped by an interrupt after ``saved`` of its runs were saved in ``out``; ``command`` continues it.
    A KeyboardInterrupt still: whatever stops on Ctrl-C (a fork server, a py-spy) stops on it too."""

    def __init__(self, saved: int, out: str | os.PathLike[str], command: Sequence[str]) -> None:
        super().__init__(saved)
        self.saved, self.out, self.command = saved, Path(out), list(command)

    @property
    def line(self) -> str:
        return f"interrupted: {count(self.saved, 'run')} saved in {self.out}; continue with: {shlex.join(self.command)}"


def drive(out: str | os.PathLike[str], plan: Sequence[PlannedRun], arm: Callable[[PlannedRun], Any],
          save: Callable[[PlannedRun, Any], None], *, done: Collection[int] = (), resume: Sequence[str] = (),
          bar: Any = None, step: Callable[[PlannedRun], Any] = str,
          words: Callable[[PlannedRun, Any], str] = lambda run, result: f"run {run.run_id + 1}",
          after: Callable[[PlannedRun, Any], bool] | None = None) -> int:
    """Run ``plan``'s runs whose ids are not in ``done`` into ``out``, in order; returns how many runs are saved.

    ``arm(run)`` makes a run and returns its result, which ``save(run, result)`` appends durably before the next
    run starts. ``bar``, when given, is told each run as it starts (``step(run)`` its kind for the time left,
    ``words(run, None)`` its name) and ends (``words(run, result)``); then ``after(run, result)`` may end the plan
    early (True: a sequential design's look that settled). ``resume`` is the command that continues ``out`` after
    an interrupt (:class:`Interrupted`). The writer lock of ``out`` is held throughout (re-entrant: a caller that
    prepared the directory under it keeps it).
    """
    with writer_lock(out):
        todo = [r for r in plan if r.run_id not in set(done)]
        saved = len(plan) - len(todo)
        try:
            for run in todo:
                if bar is not None:
                    bar.begin(step(run), words(run, None))
                result = arm(run)
                save(run, result)
                saved += 1
                if bar is not None:
                    bar.end(words(run, result))
                if after is not None and after(run, result):
                    break
        except KeyboardInterrupt:
            raise Interrupted(saved, out, resume) from None
    return saved


@contextmanager
def continuing(out: str | os.PathLike[str], member: str, resume: bool, new: Callable[[], Record],
               conflicts: Callable[[Results], list[str]], refusal: str,
               fields: Callable[[Resumption | None], dict[str, Any]] = lambda resumed: {},
               ) -> Iterator[tuple[Recording, frozenset[int]]]:
    """Under the writer lock, begin benchmark ``member`` of ``out`` (its record ``new()``) or, on ``resume``,
    continue it: the directory is read and checked once, refused (``refusal``: the ``conflicts(saved)``) when the saved
    spec differs, else its rejected rows set aside so that their runs run again. Yields its recording (stored with ``fields(the resumption or None)``:
    complete or interrupted however the block ends) and the run ids already saved."""
    with writer_lock(out):
        saved = check_results(out) if resume else None
        found = conflicts(saved) if saved else []
        if found:
            raise ResultsError(f"{refusal}: {', '.join(found)}")
        resumed = resume_benchmark(saved, member) if saved else None
        with recording(out, member, resumed.record if resumed else new(), **fields(resumed)) as rec:
            yield rec, resumed.done if resumed else frozenset()
