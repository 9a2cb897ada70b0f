"""How long a profiling run has left, from the measured durations of each kind of step it has made so far.

Why not a rate per step (tqdm's ``remaining``): a profile's steps take from under a second (a reference
load in a fresh process) to half a minute (the torch.profiler load), so a rate per step said "01:09 left"
where about 98 s were left. Here every step has a kind (:class:`Step`), and each step still to come is
estimated from the steps *of its kind* already measured (:func:`estimate_left`):

1. the same kind on the same variant has run: the median of those, per load;
2. the same kind has run on another variant: how many times that variant's unprofiled load it took, times
   this variant's unprofiled load (a torch.profiler load of the optimized variant from the baseline's, scaled
   by how much faster the optimized variant loads unprofiled). The unprofiled load is the median of the
   :data:`TIMED` steps done, or, given (``scale``), each variant's reference load: the load py-spy's loads per
   worker are chosen by, without a fresh process's start around it;
3. the same kind has run, no unprofiled load to scale by: its median per load;
4. no step of its kind has run: not estimated, and the text says so ("at least 4.0 s left + 2 steps not
   estimated (no torch.profiler load has run yet)"), never a guess from the step count.

:class:`Countdown` keeps the steps done and to come (a clock), :class:`StepBar` puts the step that runs now,
named before it starts, and the whole run's time left on a progress bar, in the kit's form (``profile: 3/8 |bar|
01:46 elapsed, 01:01 left, optimized: cProfile``, ``? left`` before any step of a kind to come has run), counting
down each second while a step runs (a thread redraws it: tqdm redraws on an update only, and the bar's elapsed time
stood still for the 39 s of a torch.profiler load).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TIMED = "unprofiled"  # an unprofiled load in a fresh process (a reference run): what the other kinds are scaled by
# No tqdm "{remaining}" (a rate per step, see above): the postfix holds the whole run's time left, then the step now
# (StepBar writes "01:01 left, optimized: cProfile": the kit's bar, omni_loader.progress.BAR_FORMAT, read alike).
BAR_FORMAT = "{desc}: {n}/{total} |{bar}| {elapsed} elapsed{postfix}"
TICK = 1.0  # seconds between two redraws of a StepBar while a step runs


@dataclass(frozen=True)
class Step:
    """One step of a run: its ``kind`` (:data:`TIMED`, ``"torch.profiler"``...), the ``variant`` it loads and
    the ``loads`` it makes (py-spy's worker makes several)."""

    kind: str
    variant: str = ""
    loads: int = 1


@dataclass(frozen=True)
class Estimate:
    """The time left: ``seconds`` of the steps that could be estimated, ``steps`` left in all, and the kinds
    of those that could not (``unknown``, in order, each once; ``untimed`` of them)."""

    seconds: float
    steps: int
    unknown: tuple[str, ...] = ()
    untimed: int = 0

    def words(self, elapsed: float | None = None) -> str:
        """``about 25 s left of about 56 s`` (the whole, with ``elapsed``, where every step is estimated),
        ``at least 4.0 s left + 3 steps not estimated (no torch.profiler or py-spy load has run yet)``, or
        ``time left not known yet (...)``."""
        if not self.steps:
            return "nothing left"
        if not self.unknown:
            whole = f" of about {seconds_words(elapsed + self.seconds)}" if elapsed is not None else ""
            return f"about {seconds_words(self.seconds)} left{whole}"
        kinds = ", ".join(self.unknown[:-1]) + " or " * (len(self.unknown) > 1) + self.unknown[-1]
        why = f"no {kinds} load has run yet"
        if self.untimed == self.steps:
            return f"time left not known yet ({why})"
        return (f"at least {seconds_words(self.seconds)} left + {self.untimed} step{'s' * (self.untimed != 1)} "
                f"not estimated ({why})")


    def clock(self, running_for: float = 0.0, running: float | None = None) -> str:
        """The time left as the kit's bars say it (:func:`~omni_loader.progress.left_words`): ``01:01 left``,
        ``at least 00:04 left`` (some steps not estimated), ``? left`` (none estimated, or only those not estimated
        are left). ``running``: the estimate of the step that runs now (counted in :attr:`seconds`), of which
        ``running_for`` seconds have passed: the time left counts down while it runs, and once it is overdue, only
        the steps after it are left (:func:`~omni_loader.progress.counted_down`)."""
        from ..progress import counted_down, left_words

        if not self.steps:
            return left_words(0.0)
        if self.untimed == self.steps:
            return left_words(None)
        seconds = self.seconds if running is None else counted_down(self.seconds, running_for, self.seconds - running)
        return left_words(seconds, at_least=bool(self.unknown))


def seconds_words(seconds: float) -> str:
    """``0.4 s``, ``25 s``, ``1 min 38 s``: a wait in the precision a person reads it in."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 59.5:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def estimate_left(done: Sequence[tuple[Step, float]], remaining: Iterable[Step],
                  scale: Mapping[str, float] | None = None) -> Estimate:
    """The time the ``remaining`` steps will take, from the ``done`` ones' measured seconds (the module doc's rules;
    ``scale``: each variant's unprofiled load in seconds, else the :data:`TIMED` steps' median)."""
    total, steps, unknown, untimed = 0.0, 0, [], 0
    for step in remaining:
        steps += 1
        seconds = step_seconds(step, done, scale)
        if seconds is None:
            untimed += 1
            unknown += [step.kind] if step.kind not in unknown else []
        else:
            total += seconds
    return Estimate(total, steps, tuple(unknown), untimed)


def step_seconds(step: Step, done: Sequence[tuple[Step, float]], scale: Mapping[str, float] | None = None
                 ) -> float | None:
    """One step's estimate from the steps done, or None when no step of its kind has run."""
    kind = [(s, seconds / max(s.loads, 1)) for s, seconds in done if s.kind == step.kind]
    if not kind:
        return None
    same = [per_load for s, per_load in kind if s.variant == step.variant]
    if same:
        return statistics.median(same) * step.loads
    timed = {v: scale.get(v) if scale is not None else _timed_median(done, v)
             for v in {step.variant, *(s.variant for s, _ in kind)}}
    factors = [per_load / timed[s.variant] for s, per_load in kind if timed[s.variant]]
    if timed[step.variant] and factors:
        return statistics.median(factors) * timed[step.variant] * step.loads
    return statistics.median(per_load for _, per_load in kind) * step.loads


def _timed_median(done: Sequence[tuple[Step, float]], variant: str) -> float | None:
    times = [seconds / max(s.loads, 1) for s, seconds in done if s.kind == TIMED and s.variant == variant]
    return statistics.median(times) if times else None


class Countdown:
    """The steps of a run, planned (``steps``), running and done, timed by ``clock`` (a seconds counter)."""

    def __init__(self, steps: Iterable[Step] = (), clock: Callable[[], float] = time.perf_counter) -> None:
        self.remaining, self.done, self.clock = list(steps), [], clock
        self.scale: dict[str, float] | None = None  # each variant's unprofiled load, once known (estimate_left)
        self.started = clock()
        self.running: tuple[Step, float] | None = None

    def begin(self, step: Step) -> None:
        """``step`` starts now (the one running, if any, has ended): it leaves the plan (its first step of the
        same kind and variant, or else its first step)."""
        self.end()
        match = next((i for i, s in enumerate(self.remaining) if (s.kind, s.variant) == (step.kind, step.variant)), 0)
        if self.remaining:
            del self.remaining[match]
        self.running = (step, self.clock())

    def end(self) -> None:
        """The running step has ended: its duration is measured."""
        if self.running is not None:
            step, began = self.running
            self.done.append((step, self.clock() - began))
            self.running = None

    def revise(self, step: Step) -> None:
        """A planned step is now known better (py-spy's loads, once the reference loads said how long one takes)."""
        self.remaining = [step if (s.kind, s.variant) == (step.kind, step.variant) else s for s in self.remaining]

    def drop(self, kind: str) -> int:
        """Planned steps of ``kind`` that will not run (reference runs that never started); how many."""
        kept = [s for s in self.remaining if s.kind != kind]
        dropped, self.remaining = len(self.remaining) - len(kept), kept
        return dropped

    def left(self) -> Estimate:
        """The running step (whole) and the planned ones, estimated from the ones done."""
        return estimate_left(self.done, [*([self.running[0]] if self.running else []), *self.remaining], self.scale)

    def words(self) -> str:
        return self.left().words(elapsed=self.clock() - self.started)

    def clock_words(self) -> str:
        """The time left on the bar (:meth:`Estimate.clock`): the running step's estimate less its time so far."""
        from ..progress import left_words

        left = self.left()
        if self.running is None:
            return left.clock()
        step, began = self.running
        running_for, estimate = self.clock() - began, step_seconds(step, self.done, self.scale)
        if estimate is None and self.remaining:
            # The first step of its kind runs: what it has taken so far prices the steps of its kind after it, a
            # floor that grows while it runs (the fourth Lab pass read "at least 00:03 left" for 36 s, 80 s left).
            floor = estimate_left([*self.done, (step, running_for)], self.remaining, self.scale)
            return left_words(floor.seconds, at_least=True)
        return left.clock(running_for, estimate)


class StepBar:
    """A progress bar that advances a step per step ended and says, beside the whole run's time left (its
    :class:`Countdown`, as :meth:`Countdown.clock_words`), the step that runs now, before it starts (a step can take
    half a minute). With ``tick`` (seconds), the kit's :class:`~omni_loader.progress.Redrawer` redraws it that often
    until :meth:`close`, its time left counted down to now (:meth:`refresh`), so its elapsed time moves through a long
    step (04's and 06's bars do the same); a bar that is off (``disable``) is not redrawn. A step's text is short: the
    bar is one line in Lab (a long one wrapped "py-/spy")."""

    def __init__(self, bar: Any, countdown: Countdown | None = None, tick: float | None = None) -> None:
        from ..progress import Redrawer

        self.bar, self.countdown, self.text = bar, countdown if countdown is not None else Countdown(), ""
        self.lock = threading.RLock()
        self.redrawer = Redrawer(self, tick) if tick else None

    @property
    def disable(self) -> bool:
        """The bar is off (nothing to redraw)."""
        return bool(getattr(self.bar, "disable", True))

    def refresh(self) -> None:
        """Drawn again with the time left counted down to now (what the redrawer calls each tick)."""
        self.say(self.text)

    def say(self, text: str, refresh: bool = True) -> None:
        with self.lock:
            self.text = text
            self.bar.set_postfix_str(f"{self.countdown.clock_words()}, {text}", refresh=refresh)

    def begin(self, step: Step, text: str) -> None:
        """``step`` starts now; ``text`` names it (a step still running has ended: the bar advances)."""
        with self.lock:
            if self.countdown.running is not None:
                self.bar.update(1)
            self.countdown.begin(step)
            self.say(text)

    def end(self, text: str | None = None) -> None:
        """The running step ended; ``text`` says what it found (on the line a bar in line mode writes now; none:
        the step's name stays, beside the time left without it)."""
        with self.lock:
            running = self.countdown.running is not None
            self.countdown.end()
            self.say(self.text if text is None else text, refresh=False)
            if running:
                self.bar.update(1)

    def close(self) -> None:
        """The redrawing stops, then the bar closes (its last line)."""
        if self.redrawer is not None:
            self.redrawer.close()
        self.bar.close()

    def __enter__(self) -> StepBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
