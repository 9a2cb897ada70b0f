"""The stage server's log in vLLM-Omni's format, read by the timeline; a three-stage stage-group under serve-ab."""

from __future__ import annotations

import re
import shlex
import time

import pytest

from omni_loader.startup.logfigures import DEFAULT_PATTERNS, extract_figures
from omni_loader.startup.server import StageLog
from omni_loader.startup.timeline import parse_text, read_timeline


def test_a_stage_server_line_parses_into_stage_replica_pid_phase_seconds() -> None:
    when = time.mktime((2026, 3, 14, 10, 0, 5, 0, 0, -1))
    old, new = StageLog(2, pid=4242), StageLog(2, replica=1, pid=4343)
    line = old.line("Loading weights took 0.620436 seconds", when=when)
    assert re.fullmatch(r"\(EngineCore_DP0 pid=4242\) \[Stage-2\] INFO 03-14 10:00:05 \[test_stage_logs\.py:\d+\] "
                        r"Loading weights took 0\.620436 seconds", line), line
    (r,) = parse_text(line).records
    assert (r.stage, r.replica, r.pid, r.phase, r.seconds, r.source, r.end) == (
        "stage-2", 0, 4242, "weight_loading", 0.620436, "reported", 0.0)
    newer = new.line("Loading weights took 0.62 seconds", when=when)
    assert newer.startswith("(StageEngineCoreProc_stage2_replica1 pid=4343) INFO 03-14 10:00:05 [") and "[Stage-" not in newer
    (r,) = parse_text(newer).records
    assert (r.stage, r.replica, r.pid, r.phase, r.seconds, r.lane) == ("stage-2", 1, 4343, "weight_loading", 0.62,
                                                                       "stage-2/replica1")
    # the other markers the stage server writes, and serve-ab's figures read from the same lines
    text = "\n".join([
        old.line("Initializing Token2Wav (model_stage=code2wav), variant baseline", when=when - 4),
        old.line("Using model weights format ['*.safetensors']", when=when - 1),
        old.line("Buffer discovery took 1.564 ms (variant baseline, state_dict() calls 51, persistent buffers 1)", when=when),
        old.line("[Model Loaded] name=Qwen2_5OmniToken2WavForConditionalGenerationVLLM, success=True, size=1.12 MB, "
                 "device=cpu", when=when),
        line,
        old.line("Model loading took 0.0011 GiB memory and 2.221830 seconds", when=when + 1),
        old.line("init engine (stats) took 0.004763 seconds", when=when + 1),
    ])
    t = parse_text(text)
    got = {r.phase: (r.seconds, r.source) for r in t.records}
    assert got["model_loading"] == (2.22183, "reported") and got["init_engine"] == (0.004763, "reported")
    assert got["model_loaded"] == (1.0, "inferred") and t.find("model_loaded")[0].value == 1.12
    assert t.token2wav_lanes() == ["stage-2"] and t.stage_ready() == {"stage-2": 5.0}
    assert dict(extract_figures(text, DEFAULT_PATTERNS)) == {"weight_loading": 0.620436, "model_loading": 2.22183,
                                                             "buffer_discovery": 0.001564}


@pytest.mark.subprocess
@pytest.mark.slow
def test_serve_ab_of_two_three_stage_groups_finds_the_token2wav_stages_weight_loading(stage_group_ab) -> None:
    """Three stage servers per start (stage 2 Token2Wav, baseline or optimized; stages 0 and 1 simulated),
    four measured starts a side: the timeline of every start's log attributes the difference to stage 2's
    weight loading. The run is the suite's shared stage-group A/B (notebook 06's)."""
    from omni_loader.results.suite import benchmark, read_metadata
    from omni_loader.startup.serve_ab import stage_phase_samples, summarize

    out = stage_group_ab
    spec = benchmark(read_metadata(out), "startup")["spec"]
    assert shlex.split(spec["baseline_cmd"])[1:4] == ["-m", "omni_loader.cli.serve", "stage-group"]
    runs = spec["runs"]
    lines = summarize(out)
    print("\n".join(lines))
    samples = stage_phase_samples(out)
    assert {("stage-0", "weight_loading"), ("stage-1", "weight_loading"), ("stage-2", "weight_loading"),
            ("stage-2", "model_loading")} <= set(samples)
    assert all(len(samples[(lane, "weight_loading")][v]) == runs for lane in ("stage-0", "stage-1", "stage-2")
               for v in ("baseline", "optimized"))

    def saving(lane: str) -> float:
        per = samples[(lane, "weight_loading")]
        return sorted(per["baseline"])[runs // 2] - sorted(per["optimized"])[runs // 2]  # same rank both sides

    # stages 0 and 1 run no Token2Wav: their median saving is scheduling noise, and on a busy CI host it grows with the
    # load (8.5 ms beside stage 2's 32.5 ms once, where a factor of 5 failed; 56 ms beside 81 ms once, where a factor
    # of 2 failed). What the attribution means is that stage 2 saves, and saves more than either simulated stage.
    assert saving("stage-2") > 0.02 and saving("stage-2") > max(abs(saving("stage-0")), abs(saving("stage-1"))), \
        {lane: saving(lane) for lane in ("stage-0", "stage-1", "stage-2")}
    by = {tuple(ln.split()[:2]): ln for ln in lines if ln.strip().startswith("stage-")}
    # The claim is read on the Token2Wav row inside stage 2's weight loading (the PR's row). With 4 + 4 starts a
    # claim needs the arms apart: Mann-Whitney's p is 2/70 then and 4/70 (over 0.05) with one pair crossed. A busy
    # CI host once slowed one optimized start to 177 ms beside a baseline's 128 ms: the row rightly claimed nothing,
    # so what is checked is that it claims exactly when the starts allow it, and the medians' sense either way.
    assert "faster" in by[("stage-2", "weight_loading")]
    t2w, row = samples[("stage-2", "token2wav_weight_loading")], by[("stage-2", "token2wav_weight_loading")]
    apart = max(t2w["optimized"]) < min(t2w["baseline"])
    assert ("; faster (95% CI of Δ median excludes 0" if apart else "; no difference claimed (95% CI") in row, t2w
    assert " ms faster, " in row
    assert any(ln.strip().startswith("startup_to_health: At this spread") for ln in lines)  # the detectable change

    # notebook 06's face of the same A/B (second Lab pass): the startup row points at the phase whose medians differ
    # most and says whether the loader change runs in it; no phase of 0 ms in every start takes a row; the imports,
    # a line in whole milliseconds, show no decimals
    from omni_loader.notebook.stages import Starts

    assert re.search(r"The stage table's largest difference of medians is stage-\d's [^:]+: [\d,.]+ ms in the baseline "
                     r"starts, [\d,.]+ ms in the optimized \([\d,.]+ ms (faster|slower)\), a phase (that holds the "
                     r"loader change \(buffer discovery\)|the loader change does not touch)", Starts(out).startup_row())
    html = Starts(out).comparison_table().to_html()
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]]
    assert not [c for c in cells if c[2:5] == ["0", "0", "0"] or c[2:5] == ["0.000", "0.000", "0.000"]], cells
    imports = next(c for c in cells if "imports" in c[1])
    # a log's whole milliseconds: "8,994", or one decimal where a median of two falls between, never "8,994.500"
    assert all(re.fullmatch(r"−?[\d,]+(\.[05])?", x) for x in imports[2:5]), imports

    log = sorted((out / "logs").glob("*-baseline.log"))[0]
    t = read_timeline(log)
    assert t.lane_names() == ["stage-0", "stage-1", "stage-2", "APIServer"] and t.token2wav_lanes() == ["stage-2"]
    assert len({t.lane(f"stage-{i}").pid for i in range(3)} | {t.lane("APIServer").pid}) == 4  # four processes
    path = t.critical_path()
    assert path.ready_marker == "application_ready" and path.gating == "stage-2"
    stages = [int(m) for m in re.findall(r"^\(EngineCore_DP0 pid=\d+\) \[Stage-(\d)\]", log.read_text(), re.M)]
    assert sum(x != y for x, y in zip(stages, stages[1:])) >= 3, stages  # the stages' lines interleave
