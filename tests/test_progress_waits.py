"""Waits that say what is happening: notebook 02's profile bar names the step running now (each reference run, the
torch.profiler load before it starts) beside the whole run's time left, from the kit's one clock
(:class:`omni_loader.progress.Countdown`: each kind of step from its durations so far, fake ones here, on a fake
clock), and notebook 06's serve-ab bar how long a start has waited for /health. The texts a bar is given are
captured (a bar stand-in); no measured duration is asserted.
"""

from __future__ import annotations

import io
import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omni_loader import progress
from omni_loader.profiling import run as profile_run
from omni_loader.progress import BAR_FORMAT, TIMED, Countdown, Step
from omni_loader.results.planner import PlannedRun


class Bar:
    """A progress bar stand-in: every postfix it is given and every update, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs, self.events, self.n, self.postfix = kwargs, [], 0, kwargs.get("postfix") or ""

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text
        self.events.append(("postfix", text))

    def update(self, n: int = 1) -> None:
        self.n += n
        self.events.append(("update", n))

    def close(self) -> None:
        self.events.append(("close", None))

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def postfixes(self) -> list[str]:
        return [text for kind, text in self.events if kind == "postfix"]


# --------------------------------------------------------------------------- the whole run's time left


def clocked(steps: list[Step], done: list[tuple[Step, float]], **kwargs: Any) -> tuple[Countdown, list[float]]:
    """A countdown of ``steps`` on a fake clock (the list it returns: the clock), with ``done`` run through it."""
    now = [0.0]
    countdown = Countdown([*(s for s, _ in done), *steps], clock=lambda: now[0], **kwargs)
    for step, seconds in done:
        countdown.begin(step)
        now[0] += seconds
    countdown.end()
    return countdown, now


def test_each_step_is_priced_from_the_durations_of_its_kind_and_an_unknown_kind_is_said() -> None:
    """After 2 unprofiled loads of 1 s and a py-spy step of 3 s: 1 + 3 s left; with a torch.profiler load to come,
    which nothing prices yet, the time left is not known ("? left"), not the 4 s of the steps priced."""
    done = [(Step(TIMED, "baseline"), 1.0), (Step(TIMED, "baseline"), 1.0), (Step("py-spy", "baseline"), 3.0)]
    assert clocked([Step(TIMED, "baseline"), Step("py-spy", "baseline")], done)[0].left() == pytest.approx(4.0)
    unknown, _ = clocked([Step(TIMED, "baseline"), Step("torch.profiler", "baseline")], done)
    assert unknown.left() is None and unknown.clock_words() == "? left"
    assert clocked([], done)[0].clock_words() == "00:00 left"


def test_a_kind_run_on_one_variant_is_scaled_to_another_by_their_unprofiled_loads() -> None:
    """The optimized variant loads 4 times faster unprofiled: its torch.profiler load is priced at a quarter of
    the baseline's; py-spy's worker, 4 loads of it against 1 of the baseline, at the baseline's per load, scaled."""
    done = [*((Step(TIMED, "baseline"), 2.0),) * 3, *((Step(TIMED, "optimized"), 0.5),) * 3,
            (Step("torch.profiler", "baseline"), 20.0), (Step("py-spy", "baseline", loads=1), 6.0)]
    countdown, _ = clocked([], done)
    assert countdown.price(Step("torch.profiler", "optimized")) == pytest.approx(5.0)  # 20 / 2 * 0.5
    assert countdown.price(Step("py-spy", "optimized", loads=4)) == pytest.approx(6.0)  # 6 / 2 * 0.5 * 4
    assert countdown.price(Step("torch.profiler", "baseline")) == pytest.approx(20.0)  # its own kind and variant
    # No unprofiled load of the variant to scale by: the kind's median per load.
    assert countdown.price(Step("torch.profiler", "other")) == pytest.approx(20.0)
    assert countdown.price(Step("cProfile", "optimized")) is None
    # Each variant's reference load given: the scale, in place of the unprofiled steps' durations.
    countdown.scale = {"baseline": 1.0, "optimized": 0.1}
    assert countdown.price(Step("torch.profiler", "optimized")) == pytest.approx(2.0)
    countdown.scale = {"baseline": 1.0}
    assert countdown.price(Step("torch.profiler", "optimized")) == pytest.approx(20.0)


def test_a_kind_not_run_yet_is_priced_by_its_stated_prior_and_else_said_unknown() -> None:
    """02's bar read "at least 00:03 left" for the 36 s of the baseline's torch.profiler load, with 80 s left: the
    steps of a kind not run yet were left out of a sum said as a floor. A kind with no ended step is priced by its
    prior (seconds, or a factor times another kind's price), or the time left is not known; the first step of a
    kind, while it runs, prices nothing: its time so far is no price of the steps of its kind."""
    steps = [Step("torch.profiler", "baseline"), Step("torch.profiler", "optimized")]
    done = [(Step(TIMED, "baseline"), 2.0), (Step(TIMED, "optimized"), 1.0)]
    countdown, now = clocked(steps, done)
    countdown.begin(steps[0])
    now[0] += 30.0
    assert countdown.clock_words() == "? left"  # not "at least" anything
    countdown.begin(steps[1])  # the baseline's took 30 s: the optimized one (half as long unprofiled), 15 s
    now[0] += 5.0
    assert countdown.clock_words() == "00:10 left"
    assert clocked(steps, done, priors={"torch.profiler": 12.0})[0].left() == pytest.approx(24.0)
    assert clocked(steps, done, priors={"torch.profiler": (TIMED, 10.0)})[0].left() == pytest.approx(30.0)


def test_a_kinds_pace_is_the_mean_of_its_steps_none_left_out_but_declared_warm_ups() -> None:
    """No step is dropped by rule: dropping each kind's first priced 04's DiT from its one slow second evaluation
    alone ("00:47 left" with 21 s left). A pace is the steps' mean (the time left is a sum), each step counted at
    most twice the median, so one slow step among several prices the others little; ``warm_ups`` first steps of
    each kind and variant, said so by the caller, never price any (05's audit)."""
    steps = [Step("DiT")] * 3
    assert clocked(steps, [(Step("DiT"), 10.0)])[0].left() == pytest.approx(30.0)  # one step: all there is
    assert clocked(steps, [(Step("DiT"), 10.0), (Step("DiT"), 1.0)])[0].left() == pytest.approx(16.5)
    three = [(Step("DiT"), 10.0), (Step("DiT"), 1.0), (Step("DiT"), 1.0)]
    assert clocked(steps, three)[0].left() == pytest.approx(4.0)  # 10 s counted as 2 s: a pace of 4/3 s
    assert clocked(steps, [(Step("DiT"), 10.0)], warm_ups=1)[0].left() is None
    assert clocked(steps, three, warm_ups=1)[0].left() == pytest.approx(3.0)


def test_a_step_running_past_its_price_raises_the_time_left_and_never_reads_00_00() -> None:
    """A bar sat at "00:00 left" while its last step went on, and at the steps after the one running while that one
    overran. The running step's time so far counts: it is given at least a tenth of it again, and once past its
    price it joins its kind's samples for the steps after it, up to twice its price: 05's one large model, running,
    doubled the price of the small ones after it ("00:06 left" to "00:14 left", done at 00:08)."""
    countdown, now = clocked([Step("run")] * 2, [(Step("run"), 10.0)])
    countdown.begin(Step("run"))
    shown = []
    for running_for in (5.0, 9.5, 20.0, 40.0):
        now[0] = 10.0 + running_for
        shown.append(countdown.left())
    # 5 + 10; a tenth of 9.5 + 10; then 2 + the mean of 10 and 20; 4 + the mean of 10 and 20 (40 s counted as 20)
    assert shown == [pytest.approx(15.0), pytest.approx(10.95), pytest.approx(17.0), pytest.approx(19.0)]
    countdown.begin(Step("run"))  # the last one, priced at 25 s (the mean of 10 and 40)
    now[0] += 60.0
    assert countdown.clock_words() == "00:06 left"  # not 00:00 while it runs
    assert progress.left_words(0.3) == "00:01 left" and progress.left_words(0.0) == "00:00 left"


def test_a_prior_can_be_a_factor_of_the_variants_scale() -> None:
    """03's sweep knows each model's round in seconds from its warm-up (its scale) before any round is timed: a prior
    ``(SCALE, factor)`` prices a kind with no step that counts yet, so that declared warm-ups leave no "? left"."""
    rounds = [Step("round", "small"), Step("round", "big")] * 2
    countdown, _ = clocked(rounds, [], priors={"round": (progress.SCALE, 1.0)}, warm_ups=1)
    countdown.scale = {"small": 0.5, "big": 3.0}
    assert countdown.left() == pytest.approx(7.0)
    countdown.scale = {"small": 0.5}
    assert countdown.left() is None  # a model with no price: not known


def test_countdown_measures_each_step_with_its_clock_and_keeps_the_plan() -> None:
    now = [0.0]
    countdown = Countdown([Step(TIMED, "baseline"), Step(TIMED, "optimized"), Step("py-spy", "baseline"),
                           Step("py-spy", "optimized")], clock=lambda: now[0])
    countdown.revise(Step("py-spy", "optimized", loads=3))  # known once the reference loads said how long one is
    for step, seconds in [(Step(TIMED, "baseline"), 2.0), (Step(TIMED, "optimized"), 1.0),
                          (Step("py-spy", "baseline"), 8.0)]:
        countdown.begin(step)
        now[0] += seconds
    countdown.end()
    assert [(s.kind, s.variant, round(t, 9)) for s, t in countdown.done] == [
        (TIMED, "baseline", 2.0), (TIMED, "optimized", 1.0), ("py-spy", "baseline", 8.0)]
    assert countdown.remaining == [Step("py-spy", "optimized", loads=3)]
    assert countdown.left() == pytest.approx(8.0 / 2.0 * 1.0 * 3)
    assert countdown.drop("py-spy") == 1 and countdown.clock_words() == "00:00 left"


def test_profile_bar_says_what_runs_before_it_runs_beside_the_whole_runs_time_left(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """profile_variants with its workers and tools stood in for, on a fake clock: what the bar says while each one
    runs. Unprofiled runs take 2 s (baseline) and 1 s (optimized), their median loads 0.2 s and 0.1 s; the
    baseline's cProfile load 6 s, its torch.profiler load 20 s: the optimized variant's are priced at half."""
    bar, seen, now = Bar(), {}, [0.0]
    plan = ["baseline", "baseline", "optimized", "optimized"]
    took = {"baseline": 2.0, "optimized": 1.0}

    def reference_loads(snapshot, variants, options, out, *, runs, warmup, on_run=None):
        seen["before references"] = bar.postfix
        for k, variant in enumerate(plan, 1):
            if on_run is not None:
                on_run(k, len(plan), PlannedRun(k, variant, k == 1, k, "load"))
            seen[f"run {k}"] = (bar.postfix, bar.n)
            now[0] += took[variant]
        return {v: {"phases": {"total": took[v] / 10, "weight_loading": 0.05}, "variant": v} for v in variants}

    def tool(name, seconds):
        def run(*args, **kwargs):
            seen[f"{name} {args[1]}"] = bar.postfix  # what the bar said while this tool ran
            now[0] += seconds * took[args[1]] / took["baseline"]
            return {"files": {}, "state_dict_calls": 0, "phase_functions": {}, "ops": None,
                    "phase_ranges": {"phase": []}}
        return run

    monkeypatch.setattr(profile_run, "progress_bar", lambda **kw: bar.__init__(**kw) or bar)
    monkeypatch.setattr(profile_run, "Countdown", lambda steps, **kw: Countdown(steps, clock=lambda: now[0], **kw))
    monkeypatch.setattr(profile_run, "reference_spec", lambda *a, **k: SimpleNamespace(
        plan=lambda: [SimpleNamespace(variant=v) for v in plan]), raising=False)
    monkeypatch.setattr(profile_run, "reference_loads", reference_loads)
    monkeypatch.setattr(profile_run, "profile_cprofile", tool("cprofile", 6.0))
    monkeypatch.setattr(profile_run, "profile_torch", tool("torch", 20.0))
    monkeypatch.setattr(profile_run, "torch_note", lambda *a: "")
    monkeypatch.setattr(profile_run, "write_variant_report", lambda *a, **k: tmp_path / "profile.md")
    monkeypatch.setattr(profile_run, "write_summary_report", lambda *a, **k: None)
    snapshot = SimpleNamespace(token2wav_config={}, root=tmp_path)
    profile_run.profile_variants(snapshot, "both", ("cprofile", "torch"), tmp_path / "out", warmup=0, device="cpu")

    assert bar.kwargs["total"] == 4 + 2 * 2  # a step per reference run and per tool
    assert "{remaining}" not in bar.kwargs["bar_format"]  # no rate per step of steps that differ 100-fold
    # the kit's words for a time left: "? left" until a step has ended (no sum of the steps priced, said as a floor);
    # then every kind not run yet is priced by its prior, a factor of its variant's reference run (02's bar read
    # "? left" for 87 of its 105 s, until py-spy had run once): after the baseline's 2 s runs, cProfile at 1.5 x 2 s
    # and torch.profiler at 5 x 2 s each variant; the step running now is named short (one line in Lab)
    assert seen["before references"] == "? left, starting the worker server"
    assert seen["run 1"] == ("? left, reference run 1/4 baseline (warm-up)", 0)
    assert seen["run 3"] == ("00:30 left, reference run 3/4 optimized", 2)  # 2 + 2 s of runs, 2 x (3 + 10) s of tools
    assert seen["cprofile baseline"] == "00:20 left, baseline: cProfile"  # the runs of 1 s price the optimized ones
    assert seen["torch baseline"] == "00:18 left, baseline: torch.profiler"
    # Every kind has run: the optimized variant's steps at half the baseline's (it loads twice as fast unprofiled):
    # its cProfile (3 s) and torch.profiler (10 s) loads are 13 s left
    assert seen["cprofile optimized"] == "00:13 left, optimized: cProfile"
    assert seen["torch optimized"] == "00:10 left, optimized: torch.profiler"
    assert bar.n == 8 and bar.events[-1] == ("close", None)


def test_the_traversal_sweep_has_the_kits_bar_and_prices_what_is_left_from_the_timing_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """03's sweep bar was tqdm's own ("5.82tree/s, repeat 4/7") and its estimate, drawn from the first (smallest)
    builds, climbed from 00:26 to 02:06 while it built: it is the kit's bar (01's and 02's format: "... elapsed,
    00:55 left, repeat 3/7"), says no time left while it builds, and then prices each model left by its own rounds
    (every round times each model once, in a random order; tests/test_traversal.py follows the prices)."""
    from omni_loader.sweep import traversal

    made: list[Bar] = []
    monkeypatch.setattr(progress, "progress_bar", lambda *a, **k: made.append(Bar(*a, **k)) or made[-1])
    config = traversal.SweepConfig.quick(repeats=2, warmup=0, min_time=0.0, n_values=(8, 16), b_values=(2,),
                                         token2wav=None)
    traversal.run_sweep(config, progress=True)
    bar, = made
    assert bar.kwargs["bar_format"] == BAR_FORMAT and bar.kwargs["total"] == 2 * 3 and bar.n == 6
    building = [bar.kwargs["postfix"], *bar.postfixes()[:2]]
    assert building == [f"{k}/2 models built and warmed up; time left once the timing starts" for k in (0, 1, 2)]
    timing = bar.postfixes()[2:]
    assert timing[0] == "time left after the first model is timed, repeat 1/2"
    assert [re.fullmatch(r"\d\d:\d\d left, repeat (\d)/2", t)[1] for t in timing[1:-1]] == ["1", "2", "2"]
    assert timing[-1] == "done: a warm-up round and 2 repeats of 2 models"


def test_a_refreshed_postfix_in_line_mode_writes_a_bounded_number_of_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    bar = progress.progress_bar(total=10, desc="startup runs", unit="run")
    for run in range(10):
        for second in range(30):  # a wait refreshed every second: 300 refreshes in all
            bar.set_postfix_str(f"run {run + 1}/10 baseline: {second} s waiting for /health", refresh=True)
        bar.update(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) <= progress.LINE_STEPS + 1 and "10/10" in lines[-1]


def test_a_line_mode_bar_writes_its_lines_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log or a saved notebook has no width: the time left and the step, at the end of a long line, are kept."""
    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    text = "at least 4.0 s left + 7 steps not estimated (no warm-up or cProfile load has run yet); baseline: cProfile load"
    bar = progress.progress_bar(total=4, desc="profile", unit="step", bar_format=BAR_FORMAT, postfix=text)
    bar.update(4)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and all(line.endswith(text) for line in lines), lines


# A stand-in server that takes a few seconds to bind (imports, a load), then answers 200: /health is refused
# meanwhile, as a stage server's is before it listens.
SLOW_TO_BIND = r"""
import http.server, sys, time
time.sleep(float(sys.argv[2]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_ab_bar_says_which_start_and_how_long_it_has_waited(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from omni_loader.startup.one_run import free_port
    from omni_loader.startup.serve_ab import serve_ab

    bar = Bar()
    monkeypatch.setattr(progress, "progress_bar", lambda **kw: bar.__init__(**kw) or bar)
    port = free_port()
    cmd = shlex.join([sys.executable, "-c", SLOW_TO_BIND, str(port), "2.5"])  # 2.5 s: the wait is said 3 times
    serve_ab(cmd, cmd, f"http://127.0.0.1:{port}/health", tmp_path / "ab", warmup=0, runs=1, timeout=60.0,
             grace=0.5, progress=True)
    texts = bar.postfixes()
    for start in ("run 1/2 baseline", "run 2/2 optimized"):
        mine = [t for t in texts if t.startswith(start + ": ")]
        assert mine[0] == f"{start}: starting"
        waits = [t for t in mine if " waiting for /health (" in t]
        assert len(waits) >= 3, mine  # said from the first refused poll, then every second: not once per start
        assert all(t.endswith("(not listening yet)") for t in waits)  # a refused connection, said as no error
        assert len(set(waits)) == len(waits)  # the seconds move
        assert mine[-1].startswith(f"{start}: healthy after ")
    assert [n for kind, n in bar.events if kind == "update"] == [1, 1]


@pytest.mark.slow  # two in-process loads of the tiny snapshot
def test_the_ab_bars_time_left_is_priced_from_the_runs_not_the_set_up_before_them(
        tiny_snapshot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """01's A/B bar said "00:55 left" at 3/12 of a 36 s benchmark: tqdm's rate counted the storage read and the
    worker server's start as if they were the first run. On a fake clock (set-up 100 s, each run 2 s) the line
    at 1/2 prices the run left at 2 s, and the elapsed time still holds the set-up."""
    import tqdm.std

    from omni_loader.bench import runner, worker
    from omni_loader.results.spec import BenchmarkSpec
    from omni_loader.token2wav.options import LoadOptions

    clock = [1000.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)

    def storage(spec):
        clock[0] += 100.0
        return {"seconds": 1.0}

    real_run = worker.run_isolated

    def run(*args, **kwargs):
        result = real_run(*args, **kwargs)
        clock[0] += 2.0
        return result

    monkeypatch.setattr(runner, "_storage_throughput", storage)
    monkeypatch.setattr(worker, "run_isolated", run)
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=1, workers="in-process")
    runner.run_benchmark(spec, tmp_path / "res", progress=True)
    half = next(line for line in stream.getvalue().splitlines() if " 1/2 " in line)
    assert half.startswith("A/B runs: ") and "01:42 elapsed, 00:02 left" in half, stream.getvalue()
    # its last line says the runs are done, not which step of the last run it saw last (the report follows)
    assert stream.getvalue().splitlines()[-1].endswith(", all 2 runs done"), stream.getvalue()
    # a cold benchmark (notebook 01 runs one after the warm one) says so in its bar's name
    stream.seek(0), stream.truncate()
    cold = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=1, workers="in-process",
                         load=LoadOptions(device="cpu", cache="cold"))
    runner.run_benchmark(cold, tmp_path / "cold", progress=True)
    assert stream.getvalue().startswith("A/B runs, cold: 0/2 "), stream.getvalue()


@pytest.mark.slow  # four in-process loads of the tiny snapshot
def test_the_ab_bars_time_left_prices_no_run_from_a_warm_up(tiny_snapshot, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The sixth Lab pass: 01's bar said "02:57 left" after its first warm-up, with 39 s left; a warm-up pays the
    first reads and the first fork. On a fake clock (warm-ups 50 s, measured runs 2 s): no line prices the runs left
    from a warm-up ("? left" until a measured run has ended), and the line after the first measured run prices the
    one left at 2 s."""
    import tqdm.std

    from omni_loader.bench import runner, worker
    from omni_loader.results.spec import BenchmarkSpec

    clock = [1000.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(runner, "_storage_throughput", lambda spec: {"seconds": 1.0})
    real_run = worker.run_isolated

    def run(request, *args, **kwargs):
        result = real_run(request, *args, **kwargs)
        clock[0] += 50.0 if run.calls < 2 else 2.0  # the plan's warm-ups come first
        run.calls += 1
        return result

    run.calls = 0
    monkeypatch.setattr(worker, "run_isolated", run)
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=1, workers="in-process", design="fixed")
    runner.run_benchmark(spec, tmp_path / "res", progress=True)
    lines = {line.split(" |")[0]: line for line in stream.getvalue().splitlines()}
    assert "? left" in lines["A/B runs: 2/4"] or " left" not in lines["A/B runs: 2/4"], lines  # after the warm-ups
    assert "00:02 left" in lines["A/B runs: 3/4"], lines


def test_every_bar_reads_alike_unless_it_brings_its_own_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """04's forward pass, 05's audit and 06's starts wrote tqdm's "8/8 [00:12<00:00, 1.55model/s, speecht5]" beside
    the kit's "A/B runs: 12/12 |bar| 00:33 elapsed, 00:00 left, run 12/12 baseline" (the Lab pass): the kit's format
    is every bar's default; a bar with no total says how far it got, with no bar to fill and no time left."""
    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    with progress.progress_bar(total=8, desc="audit", unit="model") as bar:
        for arch in ("bert", "resnet"):
            bar.set_postfix_str(arch)
            bar.update(4)
    with progress.progress_bar(desc="forward pass", unit="step") as bar:
        bar.update(3)
    lines = stream.getvalue().splitlines()
    assert re.fullmatch(r"audit: 8/8 \|#{10}\| \d\d:\d\d elapsed, \d\d:\d\d left, resnet", lines[2]), lines
    assert re.fullmatch(r"forward pass: 3 so far, \d\d:\d\d elapsed", lines[-1]), lines
    assert not any("[" in line or "/s" in line for line in lines), lines


@pytest.mark.parametrize("mode", ["terminal", "lines"])
def test_the_time_left_counts_down_between_updates(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """06's bar, refreshed every second while a start waited for /health, said "00:47 left" at 00:08 and at 00:11.
    On a fake clock (10 s a run): the time left falls as the wait goes on, and once the run is overdue it rises (a
    tenth of its 15 s so far for itself, the run after it at the mean of 10, 10 and 15 s), never down to the price
    of the runs after it alone."""
    import tqdm.std

    clock = [0.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    monkeypatch.setenv(progress.ENV, mode)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress.progress_bar(total=4, desc="startup runs", unit="run")
    for _ in range(2):
        clock[0] += 10.0
        bar.update(1)
    shown = []
    for wait in (2.0, 5.0, 9.0, 15.0):
        clock[0] = 20.0 + wait
        shown.append(re.search(r"(\d\d:\d\d) left", str(bar)).group(1))
    bar.close()
    assert shown == ["00:18", "00:15", "00:11", "00:13"], shown


def test_every_bar_says_its_time_left_in_one_set_of_words() -> None:
    """progress.left_words, as every bar of the kit says a time left: as tqdm writes the elapsed time beside it, "?"
    where it is not known, and 00:00 only when nothing is left (a bar read 00:00 while its last step went on)."""
    assert progress.left_words(17.4) == "00:17 left"
    assert progress.left_words(61.0) == "01:01 left"
    assert progress.left_words(None) == "? left"
    assert progress.left_words(0.3) == "00:01 left"
    assert progress.left_words(0.0) == "00:00 left"


@pytest.mark.parametrize("mode", ["terminal", "lines"])
def test_the_ab_bar_after_a_warm_up_prices_the_runs_left_at_their_own_time(monkeypatch: pytest.MonkeyPatch,
                                                                           mode: str) -> None:
    """01's bar ran low by up to half after its warm-up: the benchmark forgets the warm-up's time and then counts it
    (``rate_from_now(bar, forget=True)``, ``initial`` past it, ``update``), and tqdm's moving rate took that update,
    a few milliseconds after the reset, for a step (in a terminal or a widget, two steps in the next run's time).
    The bar's calls as the benchmark makes them, on a fake clock (a 50 s warm-up, then runs of 10 s): once a run
    has ended, the 4 left are 40 s."""
    import tqdm.std

    clock = [0.0]
    monkeypatch.setattr(tqdm.std, "time", lambda: clock[0])
    monkeypatch.setenv(progress.ENV, mode)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    bar = progress.progress_bar(total=6, desc="A/B runs", unit="run")
    progress.rate_from_now(bar)  # the set-up is done
    clock[0] += 50.0  # the warm-up
    progress.rate_from_now(bar, forget=True)
    bar.initial = bar.n + 1
    clock[0] += 0.01  # the bookkeeping between the warm-up's end and its update
    bar.update(1)
    assert "? left" in str(bar)  # no measured run has ended: nothing prices the runs left
    clock[0] += 10.0
    bar.update(1)
    assert re.search(r"(\S+) left", str(bar)).group(1) == "00:40", str(bar)
    bar.close()


def test_a_redrawer_redraws_a_bar_until_closed_and_leaves_an_off_bar_alone() -> None:
    """06's bar stood still for 6 s between two starts: progress.Redrawer redraws a bar while nothing updates it
    (serve-ab's bar has one for its life), stops when closed, and never draws a bar that is off."""
    import threading

    class Drawn:
        disable = False

        def __init__(self) -> None:
            self.drawn, self.twice = 0, threading.Event()

        def refresh(self) -> None:
            self.drawn += 1
            if self.drawn >= 2:
                self.twice.set()

    bar = Drawn()
    with progress.Redrawer(bar, every=0.01):
        assert bar.twice.wait(10), "the bar was not redrawn"
    after = bar.drawn
    threading.Event().wait(0.05)
    assert bar.drawn == after  # closed: no more redraws
    off = Drawn()
    off.disable = True
    progress.Redrawer(off, every=0.01).close()
    assert off.drawn == 0
