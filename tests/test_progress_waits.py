"""Waits that say what is happening (issue 36, item 4): notebook 02's profile bar names the step running now
(each reference run, the torch.profiler load before it starts) and notebook 06's serve-ab bar how long a start
has waited for /health. The texts a bar is given are captured (a bar stand-in); no duration is asserted.
"""

from __future__ import annotations

import io
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from omni_loader import progress
from omni_loader.profiling import run as profile_run


class Bar:
    """A progress bar stand-in: every postfix it is given and every update, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.kwargs, self.events, self.n, self.postfix = kwargs, [], 0, ""

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


def test_reference_progress_names_the_run_running_now_and_advances_per_run() -> None:
    bar, now = Bar(), [100.0]
    refs = profile_run.ReferenceProgress(bar, clock=lambda: now[0])
    for k, what in enumerate(["baseline (warm-up)", "baseline", "optimized (warm-up)", "optimized"], 1):
        refs(k, 4, what)
        now[0] += 2.0  # a fake clock: each run takes 2 s
    refs.finish(4, "reference loads: baseline 0.100 s, optimized 0.050 s")
    assert bar.postfixes() == [
        "reference loads: run 1/4 baseline (warm-up)",
        "reference loads: run 2/4 baseline, about 6 s left of them",  # 3 runs left at 2 s each
        "reference loads: run 3/4 optimized (warm-up), about 4 s left of them",
        "reference loads: run 4/4 optimized, about 2 s left of them",
        "reference loads: baseline 0.100 s, optimized 0.050 s",
    ]
    assert [n for kind, n in bar.events if kind == "update"] == [1, 1, 1, 1] and bar.n == 4


def test_profile_bar_says_what_runs_before_it_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """profile_variants with its workers and tools stood in for: what the bar says while each one runs."""
    bar, seen = Bar(), {}
    plan = ["baseline", "baseline", "optimized", "optimized"]

    def reference_loads(snapshot, variants, options, out, *, runs, warmup, on_run=None):
        seen["before references"] = bar.postfix
        for k, variant in enumerate(plan, 1):
            if on_run is not None:
                on_run(k, len(plan), variant)
            seen[f"run {k}"] = (bar.postfix, bar.n)
        phases = {"total": 0.1, "weight_loading": 0.05}
        return {v: {"phases": phases, "variant": v} for v in variants}

    def tool(name):
        def run(*args, **kwargs):
            seen[f"{name} {args[1]}"] = bar.postfix  # what the bar said while this tool ran
            return {"files": {}, "state_dict_calls": 0, "phase_functions": {}, "ops": None,
                    "phase_ranges": {"phase": []}}
        return run

    monkeypatch.setattr(profile_run, "progress_bar", lambda **kw: bar.__init__(**kw) or bar)
    monkeypatch.setattr(profile_run, "reference_spec", lambda *a, **k: SimpleNamespace(plan=lambda: plan), raising=False)
    monkeypatch.setattr(profile_run, "reference_loads", reference_loads)
    monkeypatch.setattr(profile_run, "profile_cprofile", tool("cprofile"))
    monkeypatch.setattr(profile_run, "profile_torch", tool("torch"))
    monkeypatch.setattr(profile_run, "torch_note", lambda *a: "")
    monkeypatch.setattr(profile_run, "write_variant_report", lambda *a, **k: tmp_path / "profile.md")
    monkeypatch.setattr(profile_run, "write_summary_report", lambda *a, **k: None)
    snapshot = SimpleNamespace(token2wav_config={}, root=tmp_path)
    profile_run.profile_variants(snapshot, "both", ("cprofile", "torch"), tmp_path / "out", warmup=0, device="cpu")

    assert bar.kwargs["total"] == 4 + 2 * 2  # a step per reference run and per tool
    assert "{remaining}" not in bar.kwargs["bar_format"]  # no rate per step of steps that differ 100-fold
    assert seen["before references"].startswith("reference loads: starting the worker server")
    assert seen["run 1"] == ("reference loads: run 1/4 baseline", 0)
    assert seen["run 3"][0].startswith("reference loads: run 3/4 optimized, about ") and seen["run 3"][1] == 2
    assert seen["cprofile baseline"] == "baseline: cProfile load"
    assert seen["torch baseline"].startswith("baseline: torch.profiler load")
    assert seen["torch optimized"].startswith("optimized: torch.profiler load")
    assert bar.n == 8 and bar.events[-1] == ("close", None)


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
    for start in ("run 1/2 baseline #1", "run 2/2 optimized #1"):
        mine = [t for t in texts if t.startswith(start + ": ")]
        assert mine[0] == f"{start}: starting"
        waits = [t for t in mine if " waiting for /health (" in t]
        assert len(waits) >= 3, mine  # said from the first refused poll, then every second: not once per start
        assert all(t.endswith("(connection refused)") for t in waits)
        assert len(set(waits)) == len(waits)  # the seconds move
        assert mine[-1].startswith(f"{start}: healthy after ")
    assert [n for kind, n in bar.events if kind == "update"] == [1, 1]
