"""The profile bar's names, at their old address until ``profiling/diff.py`` imports them from their home,
:mod:`omni_loader.progress`."""

from .. import progress

BAR_FORMAT, TICK, TIMED, Countdown, Step, StepBar = (progress.BAR_FORMAT, progress.TICK, progress.TIMED,
                                                      progress.Countdown, progress.Step, progress.StepBar)
