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
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from typing import Any

from tqdm.std import tqdm as _std_tqdm

MODES = ("widget", "terminal", "lines", "off")
ENV = "OMNI_LOADER_PROGRESS"
LINE_STEPS = 4  # lines mode: a line at 0%, 25%, 50%, 75% and a final one
# Every bar of the kit reads the same: what, how far, the time spent and the time left in words, then the step now.
# tqdm's own "30/30 [00:27<00:00, 4.24step/s, ...]" leaves a reader to decode the brackets and the rate, and a
# notebook of several bars would show two formats. A bar whose time left is its own (the profile's) passes its own.
BAR_FORMAT = "{desc}: {n}/{total} |{bar}| {elapsed} elapsed, {remaining} left{postfix}"
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


def counted_down(estimate: float, since: float, after: float = 0.0) -> float:
    """The time left, counted down: ``estimate`` (the running step and the steps after it) less the ``since`` seconds
    since the running step started (or the last update), never under ``after`` (the steps after the running one),
    nor under 0. The one rule of every bar of the kit (:class:`Ticking`, the profile's, 04's and the sweep's).

    Why: tqdm's time left is (steps left) / (rate), fixed from one update to the next: a bar refreshed each second
    while a start waits for /health would read "00:47 left" at 00:08 and at 00:11. Once the step
    now running is overdue, what is left is the steps after it, which the run still has to pay.
    """
    return max(estimate - since, after, 0.0)


def left_words(seconds: float | None, at_least: bool = False) -> str:
    """The time left as the kit's bars say it: ``00:17 left``, ``at least 00:08 left`` (``at_least``: some steps to
    come are not priced, ``seconds`` is the priced rest), ``? left`` (None: nothing priced; or only unpriced steps
    are left, the priced rest rounding to 0, where "at least 00:00 left" would say nothing). The time is written as
    tqdm writes the bar's elapsed time beside it (``01:01``, ``1:02:03``), rounded to the second."""
    if seconds is None or (at_least and round(seconds) == 0):
        return "? left"
    return f"{'at least ' if at_least else ''}{_std_tqdm.format_interval(round(seconds))} left"


class Ticking:
    """A bar whose time left counts down between updates (a mixin before a tqdm class), as :func:`counted_down`
    says: tqdm's estimate less the time since the last update, never under the steps after the one running.
    """

    def update(self, n: float = 1) -> bool | None:
        if not getattr(self, "disable", True):
            self._tick_n, self._tick_at = self.n + n, self._time() - self.start_t  # type: ignore[attr-defined]
        return super().update(n)  # type: ignore[misc]

    @property
    def format_dict(self) -> dict[str, Any]:
        d = super().format_dict  # type: ignore[misc]
        now, n, total = d["elapsed"], d["n"], d["total"]
        if getattr(self, "_tick_n", None) != n:
            self._tick_n, self._tick_at = n, now
        rate = d["rate"] or ((n - d["initial"]) / now if now else None)
        if total and rate and n < total:
            left = counted_down((total - n) / rate, now - self._tick_at, (total - n - 1) / rate)
            d["remaining"] = _std_tqdm.format_interval(left)
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
        self._printed: int | None = None
        self._final = False
        super().__init__(*args, **kwargs)

    def _milestone(self) -> int:
        if not self.total:
            return 0
        return min(LINE_STEPS, int(LINE_STEPS * self.n / self.total))

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg is not None or self._final:  # a clear, or the bar is already done: nothing to write
            return False
        step = self._milestone()
        if self._printed is not None and step <= self._printed:
            return False
        if step >= LINE_STEPS:  # 100% is written by close(), once, with the final figures
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
                self._ema_dt = lambda: None  # the final line shows the overall rate
                self._final = True
                self._write_line()
        self.leave = False  # the line is written; tqdm must not clear or repeat it
        super().close()


class TickingTerminal(Ticking, _std_tqdm):
    """tqdm's redrawn terminal line, its time left counting down between updates."""


def rate_from_now(bar: Any, forget: bool = False) -> None:
    """Count ``bar``'s rate, and so its time left, from now: what it waited on so far was set-up, not a step;
    ``forget``: the steps so far were of another kind too, and their rate is forgotten.

    Why: the A/B bar's first run also paid for reading the storage once and starting the worker server, and
    tqdm's rate is a moving average of the time between updates; 01's bar said "00:55 left" at 3/12 of a
    36 s benchmark. 04's forward-pass bar priced BigVGAN's quick blocks at the DiT's slow evaluations (2.5x
    the time left). Its elapsed time still counts from its first line.
    """
    if getattr(bar, "disable", False):
        return
    bar.last_print_t, bar.last_print_n = bar._time(), bar.n
    if forget:
        from tqdm.std import EMA

        bar._ema_dn, bar._ema_dt = EMA(bar.smoothing), EMA(bar.smoothing)


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


def progress_bar(total: int | None = None, desc: str = "", unit: str = "it", initial: int = 0,
                 enabled: bool = True, leave: bool = True, **kwargs: Any) -> Any:
    """A tqdm bar in the form :func:`progress_mode` chooses; use it like tqdm (``update``,
    ``set_postfix_str``, ``close`` or a ``with`` block). ``enabled=False`` gives a silent bar."""
    mode = progress_mode() if enabled else "off"
    kwargs.setdefault("bar_format", BAR_FORMAT if total else OPEN_FORMAT)
    common = dict(total=total, desc=desc, unit=unit, initial=initial, **kwargs)
    if mode == "off":
        return _std_tqdm(disable=True, **common)
    if mode == "widget":
        from tqdm.auto import tqdm

        return type("TickingWidget", (Ticking, tqdm), {})(leave=leave, **common)
    if mode == "terminal":
        return TickingTerminal(leave=leave, file=sys.stderr, **common)
    stream = sys.stdout if _in_kernel() else sys.stderr
    return LineProgress(file=stream, mininterval=0, dynamic_ncols=False, ascii=True, **common)
