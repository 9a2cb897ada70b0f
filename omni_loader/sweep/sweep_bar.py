"""The traversal sweep's bar: its words while it builds, times and ends, and its time left, counting down between
two models.

:class:`RoundsLeft` prices the rounds still to come (each model by its own cost); :class:`SweepBarText` puts that
price on the bar and counts it down while one model is timed: the sweep updates its bar once per model, and a model
can take seconds (tqdm's time left would stand still through them), so the kit's
:class:`~omni_loader.progress.Redrawer` redraws it each second with the time left less the time since the last model,
never below the price of the models after the one being timed (which the run still has to pay).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


class RoundsLeft:
    """The time the sweep's rounds still to come will take: ``estimates`` (seconds per round, from the warm-up;
    NaN or 0 where none) per model, ``repeats`` rounds of each. :meth:`timed` records one model's timed round.

    Why not the mean time of the models timed so far: the models range from a 16-module tree (microseconds a
    call) to the real Token2Wav (about a second a round), timed in a random order, so early in the first round
    the mean is of small trees only (03's bar said "00:43 left" where 79 s were left). A model's round is priced
    by its own timed rounds once it has some; before, by its warm-up price (:func:`round_estimate`) scaled by how
    far the warm-up prices of the models timed so far were from their timed rounds (a warm-up call is a cold
    one); without warm-up prices (``warmup = 0``), at the mean round so far."""

    def __init__(self, estimates: Sequence[float], repeats: int) -> None:
        self.estimates = [e if e > 0 and math.isfinite(e) else math.nan for e in estimates]
        self.repeats = repeats
        self.spent = [0.0] * len(self.estimates)
        self.rounds = [0] * len(self.estimates)

    def timed(self, model: int, seconds: float) -> None:
        self.spent[model] += seconds
        self.rounds[model] += 1

    def prices(self) -> list[float] | None:
        """Each model's price of one round to come, or None before any model is timed."""
        done = [i for i, k in enumerate(self.rounds) if k]
        if not done:
            return None
        # how far the warm-up prices were from the timed rounds, over the models timed so far that have one
        priced = [i for i in done if not math.isnan(self.estimates[i])]
        scale = (sum(self.spent[i] for i in priced) / sum(self.estimates[i] * self.rounds[i] for i in priced)
                 if priced else math.nan)
        mean = sum(self.spent[i] for i in done) / sum(self.rounds[i] for i in done)
        out = []
        for i, estimate in enumerate(self.estimates):
            if self.rounds[i]:
                out.append(self.spent[i] / self.rounds[i])
            elif not math.isnan(estimate) and not math.isnan(scale):
                out.append(estimate * scale)
            else:
                out.append(mean)
        return out

    def seconds(self) -> float | None:
        """Seconds left, or None before any model is timed."""
        prices = self.prices()
        if prices is None:
            return None
        return sum(price * (self.repeats - rounds) for price, rounds in zip(prices, self.rounds))


def building_words(built: int, models: int) -> str:
    """The sweep bar's text while it builds: no time left yet (the trees grow, so the first builds' pace says
    nothing of the last ones', nor of the timing)."""
    return f"{built}/{models} models built and warmed up; time left once the timing starts"


def timing_words(repeat: int, repeats: int, timed: int, to_time: int, seconds: float,
                 left: float | None = None) -> str:
    """The sweep bar's text while it times: ``00:55 left, repeat 3/7``. ``left``: the seconds left as
    :class:`RoundsLeft` prices them (each model by its own cost); without it, each of the ``to_time - timed``
    models left at the mean time of those timed so far (``seconds`` over ``timed``)."""
    from tqdm import tqdm

    if not timed:
        return f"time left after the first model is timed, repeat {repeat}/{repeats}"
    if left is None:
        left = seconds / timed * (to_time - timed)
    return f"{tqdm.format_interval(left)} left, repeat {repeat}/{repeats}"


def done_words(repeats: int, models: int) -> str:
    """The sweep bar's last text. Its count is models × (repeats + 1): every model is built and warmed up once (the
    first round of ticks) and then timed ``repeats`` times, so the words name the warm-up round too: "264/264 ...
    done: 7 repeats of 33 models" would not add up."""
    return f"done: a warm-up round and {repeats} repeat{'' if repeats == 1 else 's'} of {models} models"


class CountdownText:
    """A bar's text whose time left counts down between two updates: :meth:`set` at each update (``say``: the words
    for a time left, or for None when none is known yet; ``left``: the time left then; ``after``: the part of it the
    steps after the one that starts now take), :meth:`refresh` from the kit's :class:`~omni_loader.progress.Redrawer`
    (this object stands for the bar there: ``disable`` is the bar's).

    Shown: ``left`` less the time since :meth:`set`, and no less than ``after`` (once the step running is overdue,
    what is left is the steps after it)."""

    def __init__(self, bar: Any, clock: Callable[[], float] = time.perf_counter) -> None:
        self.bar, self.clock = bar, clock
        self.lock = threading.Lock()
        self.say: Callable[[float | None], str] = lambda left: ""
        self.left: float | None = None
        self.after, self.at = 0.0, 0.0

    @property
    def disable(self) -> bool:
        return getattr(self.bar, "disable", True)

    def words(self) -> str:
        from ..progress import counted_down

        if self.left is None:
            return self.say(None)
        return self.say(counted_down(self.left, self.clock() - self.at, self.after))

    def set(self, say: Callable[[float | None], str], left: float | None, after: float = 0.0,
            refresh: bool = True) -> None:
        with self.lock:
            self.say, self.left, self.after, self.at = say, left, after, self.clock()
            self.bar.set_postfix_str(self.words(), refresh=refresh)

    def refresh(self) -> None:
        with self.lock:
            if self.left is not None:
                self.bar.set_postfix_str(self.words(), refresh=False)
            self.bar.refresh()


class SweepBarText(CountdownText):
    """The sweep bar's text while it times (:func:`timing_words`), counting down between two models (see
    :class:`CountdownText`); :meth:`at_repeat` at each model timed."""

    def __init__(self, bar: Any, repeats: int, clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(bar, clock)
        self.repeats = repeats

    def at_repeat(self, repeat: int, left: float | None, after: float = 0.0, refresh: bool = True) -> None:
        def say(seconds: float | None) -> str:
            if seconds is None:
                return timing_words(repeat, self.repeats, 0, 0, 0.0)
            return timing_words(repeat, self.repeats, 1, 1, 0.0, left=seconds)

        self.set(say, left, after, refresh)
