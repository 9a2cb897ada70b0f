"""One progress bar for every long step of the kit, right for wherever it is watched.

A progress bar is drawn for a person looking at it now, but the same code also runs where nobody
is: papermill executing a notebook, a CI log, ``make reproduce > log``. tqdm redraws its line
with a carriage return many times a second; in a terminal that is one line that moves, but in a
saved notebook or a log every redraw is kept (dozens of lines per bar, the last one often stuck
at 76% because the final redraw is a clear). So :func:`progress_bar` picks one of three forms:

``widget``    an ipywidgets bar (``tqdm.auto``), when the code runs in a Jupyter kernel that a
              Jupyter server started for an open notebook (JupyterLab sets ``JPY_SESSION_NAME``
              in the kernel's environment) and ipywidgets is installed;
``terminal``  tqdm's usual redrawn line on stderr, when stderr is a terminal;
``lines``     everywhere else (papermill, nbclient, pipes, logs): a few complete lines, one at
              the start, one at each quarter and one at the end, which always says where the
              bar finished. In a kernel they go to stdout, so a notebook has no stderr output.

``OMNI_LOADER_PROGRESS=widget|terminal|lines|off`` overrides the choice.

Every bar's time left comes from one clock, :class:`Countdown` (its doc gives the rules), and reads alike:
``profile: 3/8 |bar| 01:46 elapsed, 01:01 left, optimized: cProfile``, ``? left`` where it is not known yet. A bar
of like steps (:func:`progress_bar`: the A/B runs, the starts) times each update; a bar of steps of several kinds
(:class:`StepBar`: the profile, the sweep, the audit, 04's forward-pass bar) is told each step as it starts.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tqdm.std import tqdm as _std_tqdm

MODES = ("widget", "terminal", "lines", "off")
ENV = "OMNI_LOADER_PROGRESS"
LINE_STEPS = 4  # lines mode: a line at 0%, 25%, 50%, 75% and a final one
# Every bar of the kit reads the same: what, how far, the time spent, then its text: the time left in words and the
# step now. tqdm's own "30/30 [00:27<00:00, 4.24step/s, ...]" leaves a reader to decode the brackets and the rate,
# and a notebook of several bars would show two formats. A StepBar's text holds its time left; a bar of like steps
# has it drawn before its text (LEFT_FORMAT).
BAR_FORMAT = "{desc}: {n}/{total} |{bar}| {elapsed} elapsed{postfix}"
LEFT_FORMAT = BAR_FORMAT.replace("{postfix}", ", {remaining} left{postfix}")
OPEN_FORMAT = "{desc}: {n} so far, {elapsed} elapsed{postfix}"  # no total: no bar to fill, no time left to give


def _in_kernel() -> bool:
    """True inside an IPython kernel (a notebook or console attached to ipykernel)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipykernel brings IPython
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def progress_mode(stream: Any = None) -> str:
    """The form a bar takes here: 'widget', 'terminal', 'lines' or 'off' (see the module doc)."""
    forced = os.environ.get(ENV, "").strip().lower()
    if forced:
        if forced not in MODES:
            raise ValueError(f"${ENV}={forced!r} is not one of {', '.join(MODES)}")
        return forced
    if _in_kernel():
        interactive = bool(os.environ.get("JPY_SESSION_NAME"))
        return "widget" if interactive and importlib.util.find_spec("ipywidgets") is not None else "lines"
    stream = stream or sys.stderr
    try:
        return "terminal" if stream.isatty() else "lines"
    except (AttributeError, ValueError):
        return "lines"


# ----------------------------------------------------------------------------------------------------- the one clock

TICK = 1.0  # seconds between two redraws of a bar while a step runs (tqdm redraws on an update only)
TIMED = "unprofiled"  # the kind whose pace per variant scales the other kinds from one variant to another
OVERDUE = 0.1  # a running step is given at least this share of its time so far again (see Countdown)
SCALE = "scale"  # a prior (SCALE, factor): factor times the step's variant's scale (see Countdown)
Prior = float | tuple[str, float]  # seconds a load, or (another kind or SCALE, times its price)


@dataclass(frozen=True)
class Step:
    """One step of a run: its ``kind`` (:data:`TIMED`, ``"torch.profiler"``, ``"DiT"``...), the ``variant`` it runs
    (a variant of the load, a model of the sweep) and the ``loads`` it makes (py-spy's worker makes several)."""

    kind: str
    variant: str = ""
    loads: int = 1


class Countdown:
    """The time left of a run of steps, planned (``remaining``), running and done, timed by ``clock``.

    Each step left is priced, per load, by the first of:

    1. the ended steps of its kind and variant: their :func:`pace`;
    2. the ended steps of its kind on other variants, each scaled by its variant's :attr:`scale` (each variant's
       unprofiled load, or the sweep's warm-up price of a model; when none is given, the pace of the variant's
       :data:`TIMED` steps): the pace of the ratios, times this variant's scale; with no scale, the kind's pace;
    3. its kind's prior (``priors``): seconds a load, ``(kind, factor)``: ``factor`` times a step of that kind, or
       ``(SCALE, factor)``: ``factor`` times its variant's scale;
    4. nothing: the time left is unknown (``? left``), never a sum that leaves a step out.

    Why each rule. The steps of a run differ a hundredfold (a reference load in a fresh process under a second, a
    torch.profiler load half a minute; a DiT evaluation and a vocoder block), so a rate per step, or the first
    step's time, priced every later kind wrong. A pace is a mean, not a median: the time left is a sum, and on a
    shared machine some steps are slowed by other work, which a median of a few steps prices all or none of. No step
    is left out unless the caller says it is a warm-up (``warm_ups`` first steps of each kind and variant price
    none): a first step is not always the slow one, and dropping it by rule left one sample to price all the rest.
    The step in flight counts: while it runs past its price, its time so far, up to twice that price, joins the
    samples of the steps after it (the time left rises while a step overruns rather than sitting at 00:00, and one
    long step cannot double the price of the short ones after it), and its own time left is at least
    :data:`OVERDUE` of its time so far.
    """

    def __init__(self, steps: Iterable[Step] = (), clock: Callable[[], float] = time.perf_counter,
                 priors: Mapping[str, Prior] | None = None, warm_ups: int = 0) -> None:
        self.remaining, self.done, self.clock = list(steps), [], clock
        self.priors, self.warm_ups = dict(priors or {}), warm_ups
        self.scale: dict[str, float] | None = None
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

    def samples(self, kind: str, flight: tuple[Step, float] | None = None) -> dict[str, list[float]]:
        """Seconds a load of ``kind``'s ended steps, by variant, less each variant's ``warm_ups`` first ones;
        ``flight``: the running step and its time so far, counted too."""
        times: dict[str, list[float]] = {}
        for step, seconds in self.done:
            if step.kind == kind:
                times.setdefault(step.variant, []).append(seconds / max(step.loads, 1))
        out = {v: t[self.warm_ups:] for v, t in times.items()}
        if flight is not None and flight[0].kind == kind:
            out.setdefault(flight[0].variant, []).append(flight[1] / max(flight[0].loads, 1))
        return {v: t for v, t in out.items() if t}

    def price(self, step: Step, flight: tuple[Step, float] | None = None) -> float | None:
        """Seconds ``step`` should take (the class doc's rules), or None when nothing prices it."""
        kind = self.samples(step.kind, flight)
        if step.variant in kind:
            return pace(kind[step.variant]) * step.loads
        if kind:
            scale = {v: self._scale(v) for v in {step.variant, *kind}}
            factors = [t / scale[v] for v, times in kind.items() if scale[v] for t in times]
            if scale[step.variant] and factors:
                return pace(factors) * scale[step.variant] * step.loads
            return pace([t for times in kind.values() for t in times]) * step.loads
        prior = self.priors.get(step.kind)
        if isinstance(prior, tuple):
            other = self._scale(step.variant) if prior[0] == SCALE else self.price(Step(prior[0], step.variant), flight)
            return None if other is None else other * prior[1] * step.loads
        return None if prior is None else prior * step.loads

    def _scale(self, variant: str) -> float | None:
        if self.scale is not None:
            return self.scale.get(variant)
        timed = self.samples(TIMED).get(variant)
        return pace(timed) if timed else None

    def left(self) -> float | None:
        """Seconds left: the running step's rest and the planned steps; None while one of them has no price."""
        flight, own = None, 0.0
        if self.running is not None:
            step, began = self.running
            running_for, price = self.clock() - began, self.price(step)
            if price is None:
                return None
            own = max(price - running_for, OVERDUE * running_for)
            flight = (step, min(running_for, 2 * price)) if running_for > price else None
        prices = [self.price(s, flight) for s in self.remaining]
        return None if None in prices else own + sum(prices)

    def clock_words(self) -> str:
        """The time left as every bar of the kit says it (:func:`left_words`)."""
        return left_words(self.left())


def pace(samples: list[float]) -> float:
    """The price of one step from ``samples``: their mean (the time left is their sum), each counted as at most
    twice their median, so that one step of a burst of other work prices the later ones little."""
    cap = 2 * statistics.median(samples)
    return statistics.fmean(min(t, cap) for t in samples)


def clock_text(seconds: float) -> str:
    """``00:17``, ``01:01``, ``1:02:03``: as tqdm writes the elapsed time beside it, to the second; a time left above
    zero is never written 00:00 (that reads as done while work goes on)."""
    return _std_tqdm.format_interval(max(round(seconds), 1) if seconds > 0 else 0)


def left_words(seconds: float | None) -> str:
    """The time left as the kit's bars say it: ``00:17 left``, or ``? left`` where it is not known."""
    return "? left" if seconds is None else f"{clock_text(seconds)} left"


LIKE = Step("step")  # every step of a bar of like steps


class Ticking:
    """A bar of like steps (a mixin before a tqdm class) whose time left is the one clock's (:class:`Countdown`): each
    update times the steps it counts since the last (or since :func:`rate_from_now`), the steps up to ``initial``
    untimed (resumed, or warm-ups), and the time left counts down between updates.

    Why not tqdm's own: a moving average of the rate, fed an update right after a reset as a step of no time,
    priced the A/B runs left at half their time after a warm-up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.countdown: Countdown | None = None  # tqdm draws once in its __init__, before there is one
        super().__init__(*args, **kwargs)
        self.countdown = Countdown(clock=lambda: self._time())  # type: ignore[attr-defined]
        self.timed_from = getattr(self, "start_t", 0.0)

    def update(self, n: float = 1) -> bool | None:
        if self.countdown is not None and not self.disable:  # type: ignore[attr-defined]
            now = self._time()  # type: ignore[attr-defined]
            timed = int(self.n + n - max(self.n, self.initial))  # type: ignore[attr-defined]
            if timed > 0:
                self.countdown.done += [(LIKE, (now - self.timed_from) / timed)] * timed
            self.timed_from = now
        return super().update(n)  # type: ignore[misc]

    @property
    def format_dict(self) -> dict[str, Any]:
        d = super().format_dict  # type: ignore[misc]
        total, n = d["total"], d["n"]
        if total and self.countdown is not None:
            self.countdown.remaining = [LIKE] * max(int(total - n) - 1, 0)
            self.countdown.running = (LIKE, self.timed_from) if n < total else None
            left = self.countdown.left()
            d["remaining"] = "?" if left is None else clock_text(left)
        return d


class LineProgress(Ticking, _std_tqdm):
    """tqdm that writes whole lines at a few milestones instead of redrawing one line.

    At most ``LINE_STEPS + 1`` lines: the start, each crossed quarter, and the end; the last line
    is written on ``close()`` and always shows the final count, whatever ``leave`` says. A line is
    written whole, its bar 10 characters wide: a log or a saved notebook has no width to fit, and a
    line cut at 100 characters lost what a long bar said last (the profile's time left and step).
    """

    @property
    def format_dict(self) -> dict[str, Any]:
        return {**super().format_dict, "ncols": None}  # no width: tqdm neither cuts the line nor widens the bar

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._printed, self._final = -1, False  # the last milestone written
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        step = int(LINE_STEPS * self.n / self.total) if self.total else 0
        # nothing to write for a clear, a bar already done, a milestone written, or 100% (close() writes that once,
        # with the final figures)
        if msg is not None or self._final or not self._printed < step < LINE_STEPS:
            return False
        self._printed = step
        self._write_line()
        return True

    def _write_line(self) -> None:
        self.fp.write(self.__str__() + "\n")
        self.fp.flush()

    def close(self) -> None:
        if not self.disable and not self._final:
            with self._lock:
                self._final = True
                self._write_line()
        self.leave = False  # the line is written; tqdm must not clear or repeat it
        super().close()


def rate_from_now(bar: Any, forget: bool = False) -> None:
    """Time ``bar``'s steps from now: what it waited on so far was set-up, not a step; ``forget``: the steps timed so
    far were of another kind (warm-ups), and price none of the steps left.

    Why: the A/B bar's first run also paid for reading the storage once and starting the worker server (01's bar said
    "00:55 left" at 3/12 of a 36 s benchmark), and a warm-up pays the first reads and the first fork. Its elapsed
    time still counts from its first line."""
    if isinstance(bar, Ticking) and bar.countdown is not None and not bar.disable:
        bar.timed_from = bar._time()
        if forget:
            bar.countdown.done.clear()


class Redrawer:
    """Redraw ``bar`` every ``every`` seconds until :meth:`close` (or the end of a ``with`` block), so its elapsed
    time moves and its time left counts down through a stretch that makes no update; a bar that is off is left be.

    Why: tqdm draws on ``update()`` and ``set_postfix_str()`` only: a bar would stand still for the seconds between
    two starts (the server being stopped and its log read), then jump.
    """

    def __init__(self, bar: Any, every: float = 1.0) -> None:
        self.bar, self.stop = bar, threading.Event()
        self.thread = threading.Thread(target=self._redraw, args=(every,), name="progress redraw", daemon=True)
        if not getattr(bar, "disable", True):
            self.thread.start()

    def _redraw(self, every: float) -> None:
        while not self.stop.wait(every):
            self.bar.refresh()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()

    def __enter__(self) -> Redrawer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class StepBar:
    """A bar whose text is "<time left>, <what runs now>": the time left its :class:`Countdown`'s, the step named
    before it starts (a step can take half a minute); ``unknown``: the words for a time left not known yet.
    With ``tick`` (seconds), a :class:`Redrawer` redraws it that often until :meth:`close`, its time left counted
    down to now, so its elapsed time moves through a long step; a bar that is off (``disable``) is not redrawn.
    A step's text is short: the bar is one line in Lab (a long one wrapped "py-/spy")."""

    def __init__(self, bar: Any, countdown: Countdown | None = None, tick: float | None = None,
                 unknown: str = left_words(None)) -> None:
        self.bar, self.countdown = bar, countdown if countdown is not None else Countdown()
        self.text, self.unknown, self.timed = "", unknown, True
        self.lock = threading.RLock()
        self.redrawer = Redrawer(self, tick) if tick else None

    @property
    def disable(self) -> bool:
        """The bar is off (nothing to redraw)."""
        return bool(getattr(self.bar, "disable", True))

    def words(self) -> str:
        """What the bar says now: the time left and the step, or the last words alone (:meth:`finish`)."""
        if not self.timed:
            return self.text
        left = self.countdown.left()
        return f"{self.unknown if left is None else left_words(left)}, {self.text}"

    def refresh(self) -> None:
        """Drawn again with the time left counted down to now (what the redrawer calls each tick)."""
        if self.text:
            self.say(self.text)
        else:
            self.bar.refresh()

    def say(self, text: str, refresh: bool = True) -> None:
        with self.lock:
            self.text = text
            self.bar.set_postfix_str(self.words(), refresh=refresh)

    def begin(self, step: Step, text: str) -> None:
        """``step`` starts now; ``text`` names it. A step still running has ended: the bar advances, and the line a
        bar in line mode writes then names the step that starts."""
        with self.lock:
            ran = self.countdown.running is not None
            self.countdown.begin(step)
            self.say(text, refresh=not ran)
            if ran:
                self.bar.update(1)

    def end(self, text: str | None = None) -> None:
        """The running step ended; ``text`` says what it found (none: the step's name stays)."""
        with self.lock:
            ran = self.countdown.running is not None
            self.countdown.end()
            self.say(self.text if text is None else text, refresh=False)
            if ran:
                self.bar.update(1)

    def finish(self, text: str) -> None:
        """The last step ended and nothing is left to time: ``text`` alone, the bar's last words."""
        with self.lock:
            self.timed = False
            self.end(text)

    def close(self) -> None:
        """The redrawing stops, then the bar closes (its last line)."""
        if self.redrawer is not None:
            self.redrawer.close()
        self.bar.close()

    def __enter__(self) -> StepBar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def progress_bar(total: int | None = None, desc: str = "", unit: str = "it", initial: int = 0,
                 enabled: bool = True, leave: bool = True, **kwargs: Any) -> Any:
    """A tqdm bar in the form :func:`progress_mode` chooses; use it like tqdm (``update``,
    ``set_postfix_str``, ``close`` or a ``with`` block). ``enabled=False`` gives a silent bar."""
    mode = progress_mode() if enabled else "off"
    kwargs.setdefault("bar_format", LEFT_FORMAT if total else OPEN_FORMAT)
    common = dict(total=total, desc=desc, unit=unit, initial=initial, **kwargs)
    if mode == "off":
        return _std_tqdm(disable=True, **common)
    if mode == "widget":
        from tqdm.auto import tqdm

        return type("TickingWidget", (Ticking, tqdm), {})(leave=leave, **common)
    if mode == "terminal":
        return type("TickingTerminal", (Ticking, _std_tqdm), {})(leave=leave, file=sys.stderr, **common)
    stream = sys.stdout if _in_kernel() else sys.stderr
    return LineProgress(file=stream, mininterval=0, dynamic_ncols=False, ascii=True, **common)
