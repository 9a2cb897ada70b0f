"""The kit's clock (:class:`omni_loader.progress.Countdown`) replayed on the step times of a real Run All in
JupyterLab (2 cores, no GPU; each bar's text read once a second), on a fake clock: each replay is read once a second
as the notebook's bar was, and its time left is held to the time truly left. The step times are those the logged
bars imply (when each count moved, and the time left each showed under the clock of then).
"""

from __future__ import annotations

import pytest

from omni_loader.notebook.forward_bar import DIT, VOCODER, VOCODER_SHARE
from omni_loader.profiling.run import PRIORS, WARM_UP
from omni_loader.progress import TIMED, Countdown, Step


def replay(steps: list[tuple[Step, float]], **kwargs) -> list[tuple[float | None, float]]:
    """``steps`` run one after another on a fake clock; (time left shown, time truly left) each second."""
    now, total = [0.0], sum(s for _, s in steps)
    countdown = Countdown([step for step, _ in steps], clock=lambda: now[0], **kwargs)
    ends = [sum(s for _, s in steps[:k + 1]) for k in range(len(steps))]
    countdown.begin(steps[0][0])
    seen, k = [], 0
    for second in range(1, int(total)):
        while k < len(steps) and ends[k] <= second:
            now[0] = ends[k]
            countdown.begin(steps[k + 1][0]) if k + 1 < len(steps) else countdown.end()
            k += 1
        now[0] = second
        seen.append((countdown.left(), total - second))
    return seen


def rises(seen: list[tuple[float | None, float]]) -> float:
    """The largest factor by which the time left rose from one second to the next."""
    shown = [left for left, _ in seen if left is not None]
    return max((b / a for a, b in zip(shown, shown[1:]) if a > 0), default=1.0)


def test_04s_forward_bar_is_not_priced_from_one_slow_evaluation() -> None:
    """04: "00:22 left" at 00:03, then "00:47 left" at 00:04 to 00:06 with 21 s left, and right only at 00:09. The
    DiT's evaluations took 0.7, 3.1, 2.7, 1, 1, 3 s... (a step in three slowed by other work): dropping the first
    left the slow second to price all ten left. The estimate stays within 2x of the truth and never doubles."""
    dit = [0.7, 3.1, 2.7, 1.0, 1.0, 3.0, 1.0, 1.0, 2.5, 1.5, 1.0, 1.8]
    steps = [(Step(DIT), s) for s in dit] + [(Step(VOCODER), 4.98 / 18)] * 18
    seen = replay(steps, priors={VOCODER: (DIT, VOCODER_SHARE * 12 / 18)})
    assert all(0.5 <= left / true <= 2.0 for left, true in seen[2:] if true >= 10), seen
    assert rises(seen[2:]) < 2.0, seen


def test_05s_audit_bar_does_not_double_while_one_large_model_runs() -> None:
    """05's audit: "00:06 left" rose to "00:09" and "00:14" while seamless_m4t ran 4 s, and the 5 small models after it
    took under a second. Its time so far joined the one other model's (0.9 s) as an equal: the price of each model
    left rose to 2.5 s. Counted at most twice its price, it raises the time left by half at most."""
    models = [3.0, 0.9, 4.1] + [0.08] * 5  # the first pays the process's one-off costs: a warm-up, said so
    seen = replay([(Step("model"), s) for s in models], warm_ups=1)
    while_large_runs = [left for left, true in seen[3:7]]
    assert None not in while_large_runs and max(while_large_runs) <= 1.5 * while_large_runs[0], seen


def test_06s_starts_are_not_priced_from_one_fast_start() -> None:
    """06: "01:19 left" at 00:14 with 57 s left, then "00:40 left" at 00:20 with 51 s: after two starts (11.5 s, the
    first one's one-off costs, and 6 s) the first was dropped and the fast second priced all six left. Both count:
    the time left after them is within a tenth of the truth, and never falls to half from one second to the next."""
    starts = [11.5, 6.0, 9.0, 9.0, 13.0, 8.0, 8.0, 6.5]
    seen = replay([(Step("step"), s) for s in starts])
    after_two = seen[17]  # at 00:18, the third start running for half a second
    assert after_two[0] == pytest.approx(after_two[1], rel=0.1), seen
    shown = [left for left, _ in seen if left is not None]
    assert min(b / a for a, b in zip(shown, shown[1:])) > 0.5, seen


def test_02s_profile_bar_prices_the_tools_before_they_run() -> None:
    """02's profile bar read "? left" for 87 of its 105 s: no warm-up, cProfile, torch.profiler or py-spy step had a
    price until one had run, py-spy's last at 12/15. Each has a prior, a factor of its variant's reference run: the
    time left is known from the first reference run's end, and within 2x of the truth until the baseline's
    torch.profiler load (30 s) ends. Its time, scaled by the variants' loads, then prices the optimized one's 2 s
    at 16 s: that tool's cost follows the baseline's 239,148 calls more than its load time."""
    runs = [("baseline", 3.1), ("optimized", 3.0), ("optimized", 2.0), ("baseline", 3.0), ("baseline", 4.0),
            ("optimized", 2.0), ("optimized", 3.0), ("baseline", 3.0)]
    tools = {"baseline": [6.0, 30.0, 12.0], "optimized": [2.0, 2.0, 11.0]}
    steps = [(Step(TIMED, v), s) for v, s in runs] + [(Step(WARM_UP, "baseline"), 7.0)]
    steps += [(Step(kind, v), s) for v in tools for kind, s in zip(("cProfile", "torch.profiler", "py-spy"), tools[v])]
    seen = replay(steps, priors=PRIORS)
    assert sum(left is None for left, _ in seen) <= 4, seen  # the first reference run: 3.1 s
    assert all(0.5 <= left / true <= 2.0 for left, true in seen[4:] if true >= 30), seen
