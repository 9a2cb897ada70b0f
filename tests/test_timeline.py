"""The startup timeline (omni_loader.startup.timeline, timeline_plot, the ``timeline`` command) and detectable change.

Every log here is written by the test, in the formats vLLM and vLLM-Omni use (no real log text).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omni_loader.cli import main
from omni_loader.startup.detectable import (PR_SAVING_S, call_probability, detectability, detectable_difference,
                                            largest_spread, pooled_spread, runs_needed, runs_needed_by_test, smallest_p)
from omni_loader.errors import OmniLoaderError
from omni_loader.startup.logfigures import DEFAULT_MARKERS, Marker, literal_part
from omni_loader.startup.timeline_cover import UNEXPLAINED
from omni_loader.startup.timeline import (AFTER_STAGES, NoStartupMarkers, parse_text, read_timeline,
                                          read_timelines)
from omni_loader.startup.logfigures import parse_marker_args


def line(stamp: str, message: str, *, stage: int | None = None, replica: int | None = None, pid: int = 4000,
         process: str = "EngineCore_DP0", where: str = "x.py:1", level: str = "INFO") -> str:
    """One log line: ``[Stage-N]`` style (``replica`` None) or ``StageEngineCoreProc_stageN_replicaR`` style."""
    if replica is not None:
        tag = f"(StageEngineCoreProc_stage{stage}_replica{replica} pid={pid}) "
    else:
        tag = f"({process} pid={pid}) " + (f"[Stage-{stage}] " if stage is not None else "")
    return f"{tag}{level} 03-14 10:{stamp} [{where}] {message}\n"


def three_stage_log() -> str:
    """A Qwen2.5-Omni-like three-stage start: stages interleaved, stage 2 is code2wav (Token2Wav)."""
    api = {"process": "APIServer", "pid": 10}
    return "".join([
        line("00:00", "vLLM-Omni API server version 9.9", **api),
        line("00:02", "engine for the thinker", stage=0, pid=20),
        line("00:02", "engine for the talker", stage=1, pid=30),
        line("00:02", "engine starting, model_stage=code2wav", stage=2, pid=40),
        line("00:03", "Using model weights format ['*.pt']", stage=2, pid=40),
        line("00:05", "Loading weights took 1.51 seconds", stage=2, pid=40, where="default_loader.py:293"),
        line("00:05", "Model loading took 1.39 GiB memory and 1.80 seconds", stage=2, pid=40),
        line("00:12", "Loading weights took 8.72 seconds", stage=0, pid=20, where="default_loader.py:293"),
        line("00:13", "Model loading took 9.94 GiB memory and 9.60 seconds", stage=0, pid=20),
        line("00:07", "Loading weights took 3.10 seconds", stage=1, pid=30),
        line("00:08", "Model loading took 1.95 GiB and 4.00 seconds", stage=1, pid=30),
        line("00:20", "Dynamo bytecode transform time: 4.20 s", stage=0, pid=20),
        line("00:25", "torch.compile takes 9.50 s in total", stage=0, pid=20),
        line("00:18", "torch.compile took 6.00 s in total", stage=1, pid=30),
        line("00:27", "Available KV cache memory: 50.10 GiB", stage=0, pid=20),
        line("00:40", "Graph capturing finished in 12 secs, took 0.50 GiB", stage=0, pid=20),
        line("00:41", "init engine (profile, create kv cache, warmup model) took 27.90 seconds", stage=0, pid=20),
        line("00:22", "init engine (profile, create kv cache, warmup model) took 14.00 seconds", stage=1, pid=30),
        line("00:09", "[Orchestrator] Stage-2 reported ready", **api),
        line("00:22", "[Orchestrator] Stage-1 reported ready", **api),
        line("00:42", "[Orchestrator] Stage-0 reported ready", **api),
        line("00:42", "[AsyncOrchestrator] All stages initialized successfully", **api),
        line("00:49", "Chat template warmup completed in 6632.4ms", **api),
        line("00:50", "Starting vLLM API server 0 on http://0.0.0.0:8091", **api),
        "(APIServer pid=10) INFO:     Application startup complete.\n",
        "(OmniServer startup took 50.047s)\n",
    ])


@pytest.fixture
def three_log(tmp_path: Path) -> Path:
    path = tmp_path / "three.log"
    path.write_text(three_stage_log())
    return path


def only(timeline, phase: str, lane: str):
    found = timeline.find(phase, lane)
    assert len(found) == 1, (phase, lane, found)
    return found[0]


# --------------------------------------------------------------------------- reading


def test_interleaved_stages_are_keyed_by_stage_not_by_order(three_log: Path) -> None:
    t = read_timeline(three_log)
    s2, s0, s1 = (only(t, "weight_loading", f"stage-{i}") for i in (2, 0, 1))
    assert (s2.seconds, s0.seconds, s1.seconds) == (1.51, 8.72, 3.10)
    assert s2.line < s0.line  # stage 2 finished first in the file
    assert (s2.pid, s0.pid, s1.pid) == (40, 20, 30) and s2.process == "EngineCore_DP0"
    assert s2.end == 5.0 and s2.start == pytest.approx(5.0 - 1.51) and s2.source == "reported"
    assert s2.timestamp == "03-14 10:00:05" and s2.line == 6
    model0 = only(t, "model_loading", "stage-0")
    assert (model0.seconds, model0.value, model0.end) == (9.60, 9.94, 13.0)
    assert only(t, "model_loading", "stage-1").value == 1.95  # "GiB and", no "memory"
    assert only(t, "graph_capture", "stage-0").seconds == 12.0 and only(t, "graph_capture", "stage-0").value == 0.5
    assert only(t, "kv_cache_memory", "stage-0").value == 50.10
    assert only(t, "weights_format", "stage-2").detail == "['*.pt']"
    assert only(t, "chat_template_warmup", "APIServer").seconds == pytest.approx(6.6324)
    assert t.lane_names()[:3] == ["stage-0", "stage-1", "stage-2"] and t.token2wav_lanes() == ["stage-2"]


def test_torch_compile_takes_and_took_and_untimed_lines(three_log: Path) -> None:
    t = read_timeline(three_log)
    assert only(t, "torch_compile", "stage-0").seconds == 9.5  # older "takes"
    assert only(t, "torch_compile", "stage-1").seconds == 6.0  # newer "took"
    assert only(t, "dynamo_transform", "stage-0").seconds == 4.2
    ready = only(t, "application_ready", "APIServer")  # uvicorn's line has a process tag but no timestamp
    assert ready.kind == "event" and ready.end == 50.0 and ready.timestamp == ""
    omni = only(t, "omni_server_startup", "server")  # no tag at all: the server lane, the latest timestamp
    assert omni.end == 50.0 and omni.seconds == pytest.approx(50.047) and omni.level == -1


def test_the_orchestrator_line_belongs_to_the_stage_it_names(three_log: Path) -> None:
    t = read_timeline(three_log)
    assert {r.lane: r.end for r in t.find("stage_ready")} == {"stage-2": 9.0, "stage-1": 22.0, "stage-0": 42.0}
    assert all(r.pid == 10 for r in t.find("stage_ready"))  # logged by the API server's process
    assert t.stage_ready() == {"stage-0": 42.0, "stage-1": 22.0, "stage-2": 9.0}


def test_new_style_tags_and_replicas() -> None:
    text = "".join([
        line("00:00", "starting", stage=0, replica=0, pid=100),
        line("00:00", "starting", stage=0, replica=1, pid=101),
        line("00:01", "starting", stage=1, replica=0, pid=200),
        line("00:04", "Loading weights took 3.50 seconds", stage=0, replica=1, pid=101),
        line("00:06", "Loading weights took 5.25 seconds", stage=0, replica=0, pid=100),
        line("00:03", "Loading weights took 2.00 seconds", stage=1, replica=0, pid=200),
    ])
    t = parse_text(text)
    assert t.lane_names() == ["stage-0", "stage-0/replica1", "stage-1"]
    assert only(t, "weight_loading", "stage-0").seconds == 5.25
    r1 = only(t, "weight_loading", "stage-0/replica1")
    assert (r1.stage, r1.replica, r1.pid, r1.seconds, r1.end) == ("stage-0", 1, 101, 3.5, 4.0)
    assert t.lane("stage-0/replica1").first == 0.0 and t.lane("stage-1").first == 1.0
    assert t.critical_path().gating == "stage-0" and t.critical_path().margin == pytest.approx(2.0)


def test_a_marker_without_took_is_inferred_from_its_neighbours() -> None:
    text = "".join([
        line("00:00", "engine starting, model_stage=code2wav", stage=2, pid=40),
        line("00:02", "Using model weights format ['*.pt']", stage=2, pid=40),
        line("00:03", "Loading weights took 0.40 seconds", stage=0, pid=20),  # another stage: not a neighbour
        line("00:06", "[Model Loaded] name=Qwen2_5OmniToken2WavModel, success=True, size=1492.80 MB, device=cuda:0",
             stage=2, pid=40),
        line("00:09", "[Model Loaded] name=Other, success=True, size=10.00 MB, device=cuda:0", stage=3, pid=50),
    ])
    t = parse_text(text)
    loaded = only(t, "model_loaded", "stage-2")
    assert (loaded.start, loaded.end, loaded.seconds, loaded.source) == (2.0, 6.0, 4.0, "inferred")
    assert (loaded.value, loaded.detail) == (1492.80, "Qwen2_5OmniToken2WavModel")
    # stage 3 has no earlier marker: from its first line (the line itself here)
    assert only(t, "model_loaded", "stage-3").seconds == 0.0
    assert t.token2wav_lanes() == ["stage-2"]
    assert not t.find("weight_loading", "stage-2")  # missing markers are missing, not zeros


def test_a_log_cut_mid_line(three_log: Path, tmp_path: Path) -> None:
    text = three_stage_log()
    cut = text[: text.index("Loading weights took 8.72") + len("Loading weights took 8.7")]
    path = tmp_path / "cut.log"
    path.write_text(cut)
    t = read_timeline(path)
    assert not t.find("weight_loading", "stage-0")  # "took 8.7" without its unit is no figure
    assert only(t, "weight_loading", "stage-2").seconds == 1.51
    (tmp_path / "cut2.log").write_text(text[: text.index("[default_loader.py:293] Loading weights took 8")])
    assert len(read_timeline(tmp_path / "cut2.log").records) == 3


def test_ansi_colours_and_crlf_read_like_plain(three_log: Path, tmp_path: Path) -> None:
    coloured = "".join(f"\x1b[32m{ln[:ln.index(' [')]}\x1b[0m{ln[ln.index(' ['):]}".replace("took", "\x1b[1mtook\x1b[0m")
                       for ln in three_stage_log().splitlines(keepends=True) if " [" in ln)
    path = tmp_path / "colour.log"
    path.write_bytes(coloured.replace("\n", "\r\n").encode())
    plain = [(r.lane, r.phase, r.start, r.end, r.seconds) for r in read_timeline(three_log).records
             if r.phase not in ("application_ready", "omni_server_startup")]
    assert [(r.lane, r.phase, r.start, r.end, r.seconds) for r in read_timeline(path).records] == plain


def test_a_serve_ab_log_keeps_its_run_and_variant(tmp_path: Path) -> None:
    path = tmp_path / "3-optimized.log"
    path.write_text("# omni-loader serve-ab: run 3, optimized, warm-up\n" + three_stage_log())
    t = read_timeline(path)
    assert t.meta == {"run": 3, "variant": "optimized", "warmup": True}
    assert only(t, "weight_loading", "stage-2").line == 7
    from omni_loader.startup.timeline_plot import gantt

    title = gantt(t).axes[0].get_title()  # the start as the A/B's bar counts it, from 1; the file's id is from 0
    assert title.startswith("Where startup goes: run 4, optimized (warm-up); log 3-optimized.log"), title


def test_timestamps_cross_the_year_and_need_no_order() -> None:
    text = ("(A pid=1) [Stage-0] INFO 12-31 23:59:58 [a.py:1] start\n"
            "(A pid=1) [Stage-0] INFO 01-01 00:00:03 [a.py:1] Loading weights took 4.5 seconds\n")
    r = only(parse_text(text), "weight_loading", "stage-0")
    assert (r.end, r.start) == (5.0, 0.5)


def test_critical_path_names_the_gating_stage_and_its_margin(three_log: Path) -> None:
    path = read_timeline(three_log).critical_path()
    assert (path.gating, path.runner_up, path.margin, path.ready_at, path.ready_marker) == (
        "stage-0", "stage-1", 20.0, 50.0, "application_ready")
    assert [(s.lane, s.phase) for s in path.segments] == [
        ("stage-0", UNEXPLAINED), ("stage-0", "model_loading"), ("stage-0", "init_engine"),
        (AFTER_STAGES, "chat_template_warmup")]
    assert path.segments[1].seconds == pytest.approx(9.6)
    assert path.sentence() == ("ready at 50.0 s (application_ready); stage-0 gated it, ready at 42.0 s, "
                               "20.0 s after stage-1")


def test_gaps_are_the_time_no_phase_covers(three_log: Path) -> None:
    gaps = {(g.lane, round(g.start, 2), round(g.end, 2)) for g in read_timeline(three_log).gaps()}
    # stage 2: its first line at 2 s, model loading from 3.2 s; loaded at 5 s, reported ready at 9 s
    assert gaps == {("stage-0", 2.0, 3.4), ("stage-1", 2.0, 4.0), ("stage-2", 2.0, 3.2), ("stage-2", 5.0, 9.0)}
    assert read_timeline(three_log).gaps(min_gap=1.5) and not any(
        g.seconds <= 1.5 for g in read_timeline(three_log).gaps(min_gap=1.5))


def test_patterns_are_data_the_caller_extends() -> None:
    markers = parse_marker_args(["tokenizer_load=Tokenizer loaded in ([0-9.]+)", "banner=vLLM-Omni API server",
                                 "weight_loading=Weights done in ([0-9.]+) s"])
    text = "".join([line("00:00", "vLLM-Omni API server version 9.9", process="APIServer", pid=10),
                    line("00:04", "Tokenizer loaded in 250 ms", stage=0, pid=20),
                    line("00:09", "Weights done in 2.5 s", stage=0, pid=20),
                    line("00:09", "Loading weights took 9.99 seconds", stage=0, pid=20)])
    t = parse_text(text, markers)
    assert only(t, "tokenizer_load", "stage-0").seconds == 0.25  # the unit after the number
    assert only(t, "banner", "APIServer").kind == "event"
    assert only(t, "weight_loading", "stage-0").seconds == 2.5  # replaced, the default no longer read
    extra = DEFAULT_MARKERS + (Marker("queue", r"queue drained after (?P<seconds>\d+) s"),)
    queue = only(parse_text(line("00:05", "queue drained after 3 s", stage=1, pid=3), extra), "queue", "stage-1")
    assert (queue.start, queue.end) == (-3.0, 0.0)  # from the log's first timestamp: this line's
    for bad in ["nothing", "x=(", "bad name=a(b)"]:
        with pytest.raises(OmniLoaderError):
            parse_marker_args([bad])


@pytest.mark.parametrize("written, seconds", [("250 ms", 0.25), ("2 msecs", 0.002), ("1.5 MINUTES", 90.0),
                                              ("7 µs", 7e-6), ("3 s.", 3.0), ("4", 4.0), ("5 ms2", 5.0),
                                              ("6 parsecs", 6.0)])
def test_the_timeline_and_serve_ab_read_a_unit_alike(written: str, seconds: float) -> None:
    """A figure's unit is the known one written right after it, else seconds, whichever command reads the log."""
    from omni_loader.startup.logfigures import extract_figures

    regex = r"Tokenizer loaded in ([0-9.]+)"
    text = line("00:04", f"Tokenizer loaded in {written}", stage=0, pid=20)
    assert extract_figures(text, {"tokenizer_load": regex}) == [("tokenizer_load", seconds)]
    timeline = parse_text(text, parse_marker_args([f"tokenizer_load={regex}"]))
    assert only(timeline, "tokenizer_load", "stage-0").seconds == seconds


def test_the_prefilter_is_literal_text_every_match_contains() -> None:
    assert literal_part(r"torch\.compile (?:takes|took) ") == "torch.compile "
    assert literal_part(r"\[Model Loaded\] name=(?P<d>[^,]*), success=True") == "[Model Loaded] name="
    assert literal_part(r"Stage-(?P<stage>\d+) reported ready") == " reported ready"  # not "Stage-": every line
    assert literal_part(r"Graphs? done") == "Graph"  # the optional s is not in every match
    assert literal_part(r"x[abc]+ yyyy{2,3}z") == " yyy"
    for none in (r"(a|b) t", r"\d+ s", r"abc|def", r"(?i)loading weights"):
        assert literal_part(none) is None, none
    assert all(m.keyword for m in DEFAULT_MARKERS)
    for marker in DEFAULT_MARKERS:  # every default marker's own example line holds its keyword
        # the kit's stage server's own line (the PR's row) is in no vLLM-Omni log
        assert marker.keyword in three_stage_log() or marker.name in ("model_loaded", "token2wav_weight_loading"), \
            marker.name


def test_a_file_that_is_not_a_log_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("Loading weights took 1.0 seconds, says the README\nnothing else\n")  # no log line at all
    with pytest.raises(NoStartupMarkers):
        read_timelines([path])
    assert main(["timeline", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no vLLM or vLLM-Omni startup marker" in err[0] and str(path) in err[0]
    assert main(["timeline", str(tmp_path / "absent.log")]) == 2


# --------------------------------------------------------------------------- the command and the chart


def test_cli_json_and_text(three_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["timeline", str(three_log), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["timelines"][0]
    assert doc["critical_path"]["gating"] == "stage-0" and doc["critical_path"]["margin"] == 20.0
    rows = {(r["lane"], r["phase"]): r for r in doc["records"]}
    assert rows[("stage-2", "weight_loading")]["seconds"] == 1.51 and rows[("stage-2", "weight_loading")]["pid"] == 40
    assert {g["lane"] for g in doc["gaps"]} == {"stage-0", "stage-1", "stage-2"}
    assert main(["timeline", str(three_log), "--pattern", "banner=API server version"]) == 0
    out = capsys.readouterr().out
    assert "critical path: ready at 50.0 s (application_ready); stage-0 gated it" in out
    assert "Token2Wav stage stage-2" in out and " banner " in out


def test_cli_out_writes_the_table_and_the_chart(three_log: Path, tmp_path: Path) -> None:
    import csv

    out = tmp_path / "out"
    assert main(["timeline", str(three_log), "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "timeline.csv").open()))
    mine = [r for r in rows if r["lane"] == "stage-2" and r["phase"] == "weight_loading"]
    assert len(mine) == 1 and float(mine[0]["seconds"]) == 1.51 and mine[0]["source"] == "reported"
    assert {"stage", "replica", "pid", "phase", "start", "end", "seconds", "source", "line"} <= set(rows[0])
    assert (out / "gantt.png").stat().st_size > 10_000 and (out / "gantt.svg").read_text().startswith("<?xml")
    assert json.loads((out / "timeline.json").read_text())["timelines"][0]["critical_path"]["gating"] == "stage-0"


def test_gantt_lanes_colours_and_the_token2wav_annotation(three_log: Path) -> None:
    from omni_loader.reporting.figures import figure_data
    from omni_loader.startup.timeline_plot import gantt, phase_colour

    t = read_timeline(three_log)
    fig = gantt(t)
    ax = fig.axes[0]
    labels = [tick.get_text() for tick in ax.get_yticklabels()]
    assert labels[:3] == ["stage-0 (gated ready)", "stage-1", "stage-2 Token2Wav"]
    colours = {}
    for container in ax.containers:
        for patch in container.patches:
            if patch.get_fill():
                lane = round(patch.get_y() + patch.get_height() / 2)
                colours.setdefault(container.get_label().lstrip("_"), set()).add(
                    (lane, tuple(round(c, 3) for c in patch.get_facecolor()[:3])))
    weight = colours["weight loading"]  # the legend's words (phase_words), never the phase's snake_case name
    assert {lane for lane, _ in weight} == {0, 1, 2} and len({c for _, c in weight}) == 1  # one colour, 3 lanes
    assert len({c for _, c in colours["init engine"]}) == 1 and phase_colour("x") == phase_colour("x")
    texts = [row["text"] for row in figure_data(fig) if row["kind"] == "text"]
    assert "Token2Wav weight loading 1.51 s (reported)" in texts
    bars = [row for row in figure_data(fig) if row["kind"] == "bar" and row["label"] == "weight loading"]
    assert bars and math.isclose(bars[0]["width"], 8.72)


@pytest.mark.subprocess
def test_a_200_mb_log_is_read_whole_in_constant_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    filler = "".join(line(f"{i // 60 % 60:02d}:{i % 60:02d}", f"step {i} running 3 waiting 0 tokens 4096 kv 12.5%",
                          stage=0, pid=20) for i in range(8000))
    with path.open("w") as fh:
        fh.write(three_stage_log().replace("(OmniServer startup took 50.047s)\n", ""))
        written = 0
        while written < 200 * 2**20:
            fh.write(filler)
            written += len(filler)
        fh.write(line("59:59", "Loading weights took 2.00 seconds", stage=5, pid=90))
    # VmHWM is the peak of this process's own address space; ru_maxrss would also count the peak of the
    # (large) pytest process it was forked from, since Linux keeps that figure across exec.
    probe = ("import re, sys, time; from omni_loader.startup.timeline import read_timeline; t0 = time.perf_counter(); "
             "t = read_timeline(sys.argv[1]); w = time.perf_counter() - t0; "
             "hwm = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)); "
             "print(len(t.records), t.lines, round(w, 2), hwm // 1024, t.find('weight_loading', 'stage-5')[0].line)")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, check=True).stdout
    records, lines, seconds, rss_mib, last_line = out.split()
    assert int(records) == 22 and int(last_line) == int(lines)
    assert int(rss_mib) < 200, f"peak RSS {rss_mib} MiB reading a 200 MB log"
    print(f"a 200 MB log read in {seconds} s, peak RSS {rss_mib} MiB")  # its speed is a figure, not an assertion


# --------------------------------------------------------------------------- what a benchmark can detect


def test_the_kits_rule_needs_four_runs_a_side() -> None:
    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(4, 4) == pytest.approx(2 / 70)
    assert smallest_p(5, 5) == pytest.approx(2 / 252)
    assert call_probability(100.0, 1.0, 3) == 0.0 and math.isinf(detectable_difference(1.0, 3))
    assert call_probability(100.0, 1.0, 5) == pytest.approx(1.0)


def test_the_integral_matches_a_simulation_of_the_prs_rule() -> None:
    from omni_loader.reporting.stats import ALPHA, mann_whitney, ranges_overlap

    rng = np.random.default_rng(7)
    n, spread, diff, sims = 5, 0.45, 1.4, 1500
    called = 0
    for _ in range(sims):
        base = tuple(105.0 + spread * rng.standard_normal(n))
        opt = tuple(105.0 - diff + spread * rng.standard_normal(n))
        if not ranges_overlap(base, opt) and np.median(opt) < np.median(base):
            p = mann_whitney(base, opt)
            called += p is not None and p < ALPHA
    assert called / sims == pytest.approx(call_probability(diff, spread, n), abs=0.035)


def test_the_prs_design() -> None:
    """5 runs a side, a 1.4 s difference of medians: called 80% of the time up to an SD of 0.45 s of one run."""
    assert detectable_difference(1.0, 5) == pytest.approx(3.108, abs=0.002)
    spread = largest_spread(1.4, 5)
    assert spread == pytest.approx(0.4504, abs=0.001)
    assert call_probability(1.4, spread, 5) == pytest.approx(0.8, abs=1e-6)
    assert detectable_difference(spread, 5) == pytest.approx(1.4)
    assert runs_needed(PR_SAVING_S, spread) is None  # separate ranges at 0.48 s: never 80%, at any n
    assert runs_needed_by_test(PR_SAVING_S, spread) == 15
    # a spread so small that the normal approximation says 1 run: the exact test needs 4 a side to reach p < 0.05
    # at all (3 + 3 give p = 0.1 at best); at alpha 0.2, 3 a side
    assert runs_needed_by_test(PR_SAVING_S, 0.01) == 4 and smallest_p(3, 3) >= 0.05 > smallest_p(4, 4)
    assert runs_needed_by_test(PR_SAVING_S, 0.01, alpha=0.2) == 3
    assert runs_needed(PR_SAVING_S, 0.1) == 4 and runs_needed(PR_SAVING_S, 0.2) is None
    assert detectable_difference(spread, 5, floor=2.0) == 2.0  # an A/A floor above it wins


def test_detectability_from_samples() -> None:
    base, opt = [105.0, 105.5, 106.0, 104.5, 105.2], [104.0, 104.2, 103.1, 104.9, 103.6]
    d = detectability(base, opt)
    assert d.spread == pytest.approx(pooled_spread(base, opt)) and (d.n_a, d.n_b) == (5, 5)
    assert d.spread == pytest.approx(float(np.sqrt((np.var(base, ddof=1) + np.var(opt, ddof=1)) / 2)))
    assert d.detectable == pytest.approx(3.108 * d.spread, rel=1e-3)
    assert d.sentence() == f"{d.calls()} {d.needs()}" and d.calls().endswith(
        f"5 + 5 runs call a difference of medians of {d.detectable:.2f} s or more 80% of the time under the PR's "
        f"separate-ranges rule, {d.detectable / PR_SAVING_S:.1f} times the PR's 0.48 s saving.")
    assert detectability(spread=0.1, n=5).runs == 4


# --------------------------------------------------------------------------- serve-ab reads every run's timeline

# A stand-in for a three-stage vLLM-Omni server: its stages' lines interleaved, stage 2 (code2wav) loading its
# weights in argv[2] seconds, the others in times that do not depend on the variant; /health answers 200 at once.
THREE_STAGE_SERVER = r"""
import http.server, random, sys, time
port, t2w = int(sys.argv[1]), float(sys.argv[2])
now = lambda: time.strftime("%m-%d %H:%M:%S")
def say(pid, stage, msg):
    print(f"(StageEngineCoreProc_stage{stage}_replica0 pid={pid}) INFO {now()} [x.py:1] {msg}", flush=True)
say(42, 2, "engine starting, model_stage=code2wav")
say(40, 0, "engine starting, model_stage=thinker")
say(42, 2, f"Loading weights took {t2w + random.uniform(0, 0.02):.2f} seconds")
say(40, 0, "Loading weights took 8.70 seconds")  # the same in both arms: random draws that separate by chance (2 in 70 at 4 + 4) were a flaky claim
say(41, 1, "Loading weights took 3.10 seconds")
print(f"(APIServer pid=39) INFO {now()} [x.py:1] [Orchestrator] Stage-2 reported ready", flush=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.subprocess
def test_serve_ab_attributes_the_difference_to_the_token2wav_stage(tmp_path: Path) -> None:
    import shlex

    from omni_loader.startup.serve_ab import serve_ab, stage_phase_samples, summarize
    from omni_loader.startup.one_run import free_port

    port = free_port()
    cmds = [shlex.join([sys.executable, "-c", THREE_STAGE_SERVER, str(port), seconds]) for seconds in ("1.10", "0.62")]
    out = serve_ab(*cmds, f"http://127.0.0.1:{port}/health", tmp_path / "ab", warmup=0, runs=4, timeout=60,
                   progress=False, grace=2)
    samples = stage_phase_samples(out)
    assert set(samples) == {("stage-0", "weight_loading"), ("stage-1", "weight_loading"), ("stage-2", "weight_loading")}
    assert all(len(v) == 4 for per in samples.values() for v in per.values())
    lines = summarize(out)
    by_lane = {ln.split()[0]: ln for ln in lines if ln.strip().startswith("stage-")}
    assert "ms faster" in by_lane["stage-2"] and "; faster (95% CI of Δ median excludes 0" in by_lane["stage-2"]
    assert "no difference claimed" in by_lane["stage-0"] and "no difference claimed" in by_lane["stage-1"]
    assert any(ln.strip().startswith("startup_to_health: At this spread") for ln in lines)


def test_the_vectorized_kit_verdict_is_the_kits() -> None:
    from omni_loader.startup.detectable import kit_calls
    from omni_loader.reporting.stats import Summary, compare

    rng = np.random.default_rng(3)
    base = 105.0 + 0.5 * rng.standard_normal((40, 5))
    opt = 105.0 - rng.uniform(0, 1.5, (40, 1)) + 0.5 * rng.standard_normal((40, 5))
    mine = kit_calls(base, opt)
    kit = [compare(Summary("baseline", "s", tuple(a)), Summary("optimized", "s", tuple(b))).differs()
           and np.median(b) < np.median(a) for a, b in zip(base, opt)]
    assert 5 <= sum(kit) <= 35 and (mine == np.array(kit)).mean() >= 0.9


def test_the_kits_verdict_at_the_prs_design() -> None:
    from omni_loader.startup.detectable import kit_call_probability, kit_detectable_difference

    assert kit_call_probability(100.0, 1.0, 3) == 0.0  # 3+3 runs cannot reach p < 0.05
    per_sd = kit_detectable_difference(1.0, 5, sims=200)
    assert 2.0 < per_sd < 2.7  # 2.35 SD with 1000 simulations: more lenient than separate ranges (3.11 SD)
    assert kit_call_probability(1.4, 1.4 / per_sd, 5, sims=200) >= 0.8


# --------------------------------------------------------------------------- issue 36, item 3: what a stage was doing


def stage_server_start(stage: int = 2, pid: int = 40) -> str:
    """One Token2Wav stage server's lines as server.py writes them: bound at 0 s, then 12.463 s of imports and
    the snapshot before its first load line (stage 2 of notebook 06's start)."""
    return "".join([
        line("00:00", "stage-server: listening on http://127.0.0.1:38051 (variant baseline, stage 2); /health answers "
                      "503 until the model is loaded", stage=stage, pid=pid),
        line("00:12", "Initializing Token2Wav (model_stage=code2wav), variant baseline, layout vllm-omni, from /tmp/s "
                      "(torch and the model code imported, snapshot found: 12.463 s)", stage=stage, pid=pid),
        line("00:12", "Using model weights format ['*.safetensors']", stage=stage, pid=pid),
        line("00:13", "Token2Wav load_weights took 29.072 ms", stage=stage, pid=pid),
        line("00:13", "Loading weights took 0.037577 seconds", stage=stage, pid=pid),
        line("00:13", "Model loading took 0.0011 GiB memory and 0.765102 seconds", stage=stage, pid=pid),
        line("00:13", "init engine (stats) took 0.001548 seconds", stage=stage, pid=pid),
    ])


def test_the_stage_servers_start_up_is_a_reported_phase_not_a_gap() -> None:
    # the line the timeline reads is the one server.py writes
    assert "torch and the model code imported, snapshot found: " in Path("omni_loader/startup/server.py").read_text()
    t = parse_text(stage_server_start())
    start = only(t, "imports_and_snapshot", "stage-2")
    assert (start.source, start.seconds, start.end) == ("reported", 12.463, 12.0)
    assert not [g for g in t.gaps() if g.lane == "stage-2"]  # 0-12 s was imports and the snapshot, not a gap
    assert [s.phase for s in t.critical_path().segments][:2] == ["imports_and_snapshot", "model_loading"]
    # a caller's own markers still get the stage server's line (the command passes parse_marker_args' markers)
    assert only(parse_text(stage_server_start(), parse_marker_args([])), "imports_and_snapshot", "stage-2")


def test_a_stage_lane_starts_at_its_first_tagged_line_even_without_a_pid() -> None:
    text = "".join([
        line("00:00", "vLLM-Omni API server version 9.9", process="APIServer", pid=10),
        "[Stage-0] INFO 03-14 10:00:02 [omni_stage.py:1] Starting stage worker\n",  # no process tag
        line("00:09", "Model loading took 9.94 GiB memory and 3.00 seconds", stage=0, pid=20),
    ])
    t = parse_text(text)
    assert t.lane("stage-0").first == 2.0
    assert [(g.lane, g.start, g.end) for g in t.gaps()] == [("stage-0", 2.0, 6.0)]


def own_log() -> str:
    """A vLLM-Omni start of one's own: the API server's lines from 0 s, the stages' from 10 s; stages 0 and 1
    start on a line without a process tag and wait 5 s before their first phase; stage 2 (Token2Wav) is done early."""
    api = {"process": "APIServer", "pid": 10}
    return "".join([
        line("00:00", "vLLM-Omni API server version 9.9", **api),
        "[Stage-0] INFO 03-14 10:00:10 [omni_stage.py:1] Starting stage worker (thinker)\n",  # no process tag
        "[Stage-1] INFO 03-14 10:00:10 [omni_stage.py:1] Starting stage worker (talker)\n",
        line("00:11", "engine starting, model_stage=code2wav", stage=2, pid=40),
        line("00:12", "Using model weights format ['*.pt']", stage=2, pid=40),
        line("00:14", "Loading weights took 1.51 seconds", stage=2, pid=40),
        line("00:14", "Model loading took 1.39 GiB memory and 1.80 seconds", stage=2, pid=40),
        line("00:20", "Loading weights took 4.0 seconds", stage=0, pid=20),
        line("00:20", "Model loading took 9.94 GiB memory and 5.00 seconds", stage=0, pid=20),
        line("00:19", "Loading weights took 3.10 seconds", stage=1, pid=30),
        line("00:19", "Model loading took 1.95 GiB and 4.00 seconds", stage=1, pid=30),
        line("00:30", "init engine (profile, create kv cache, warmup model) took 10.0 seconds", stage=0, pid=20),
        line("00:28", "init engine (profile, create kv cache, warmup model) took 9.0 seconds", stage=1, pid=30),
        line("00:16", "[Orchestrator] Stage-2 reported ready", **api),
        line("00:29", "[Orchestrator] Stage-1 reported ready", **api),
        line("00:31", "[Orchestrator] Stage-0 reported ready", **api),
        line("00:31", "[AsyncOrchestrator] All stages initialized successfully", **api),
        line("00:33", "Starting vLLM API server 0 on http://0.0.0.0:8091", **api),
        "(APIServer pid=10) INFO:     Application startup complete.\n",
    ])


def bar_boxes(fig):
    """The display-space boxes of every bar drawn (filled or outlined), after a draw."""
    return [patch.get_window_extent() for ax in fig.axes for c in ax.containers for patch in c.patches]


def test_gantt_starts_at_the_logs_first_line() -> None:
    from omni_loader.startup.timeline_plot import gantt

    t = parse_text(own_log())
    assert min(r.start for r in t.records) > 8  # nothing drawn before 8 s: matplotlib alone would start there
    assert gantt(t).axes[0].get_xlim()[0] == 0


def test_gantt_token2wav_annotation_overlaps_no_bar() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Annotation

    from omni_loader.startup.timeline_plot import gantt

    stages_only = "".join(ln for ln in own_log().splitlines(True) if "APIServer" not in ln)  # three lanes
    for text in (own_log(), stages_only, three_stage_log(), stage_server_start()):
        fig = gantt(parse_text(text))
        FigureCanvasAgg(fig).draw()
        notes = [a for a in fig.axes[0].texts if isinstance(a, Annotation)]
        assert len(notes) == 1 and notes[0].get_text().startswith("Token2Wav ")
        box = notes[0].get_bbox_patch().get_window_extent().padded(3)  # not even touching
        assert not [b for b in bar_boxes(fig) if box.overlaps(b)]


def test_gantt_draws_every_lanes_gap_alike() -> None:
    from omni_loader.startup.timeline_plot import gantt

    t = parse_text(own_log())
    gapped = {g.lane for g in t.gaps()} - {AFTER_STAGES}
    assert gapped == {"stage-0", "stage-1", "stage-2"}
    ax = gantt(t).axes[0]
    names = [tick.get_text().split(" ")[0] for tick in ax.get_yticklabels()]
    drawn = {}
    for ln in ax.get_lines():
        if ln.get_label() in ("unexplained gap", "_gap"):
            (x0, x1), (y0, _) = ln.get_xdata(), ln.get_ydata()
            drawn.setdefault(names[round(y0)], []).append((x0, x1))
    assert set(drawn) == gapped
    assert {lane: sorted(spans) for lane, spans in drawn.items()} == {
        lane: sorted((g.start, g.end) for g in t.gaps() if g.lane == lane) for lane in gapped}
    styles = {(ln.get_color(), ln.get_linewidth()) for ln in ax.get_lines() if ln.get_label() in ("unexplained gap", "_gap")}
    assert len(styles) == 1


# --------------------------------------------------------------------------- notebook 06's tables, chart and sentences


def table_cells(styler) -> list[list[str]]:
    """A Styler's rows (header first) as the text of each cell."""
    import re
    from html import unescape

    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", styler.to_html(), re.S)]


def test_gantt_keeps_its_labels_inside_the_frame_and_names_phases_in_words() -> None:
    """06's chart had "ready 5.0 s" struck through by the right frame, the Token2Wav note on the top frame line and
    a legend of snake_case names: every text sits inside the axes, clear of the frame, and the legend is words."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from omni_loader.startup.timeline_plot import gantt

    for text in (own_log(), three_stage_log(), stage_server_start()):
        fig = gantt(parse_text(text))
        FigureCanvasAgg(fig).draw()
        ax = fig.axes[0]
        frame = ax.get_window_extent()
        texts = [t for t in ax.texts if t.get_text().strip()]
        assert any(t.get_text().startswith("ready ") for t in texts) and len(texts) == 2
        for t in texts:
            box = (t.get_bbox_patch() or t).get_window_extent()
            assert frame.x0 + 2 < box.x0 and box.x1 < frame.x1 - 2 and frame.y0 + 2 < box.y0 and box.y1 < frame.y1 - 2, \
                (t.get_text(), box, frame)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "weight loading" in labels and not [x for x in labels if "_" in x], labels


def test_06s_timeline_table_starts_nothing_before_the_first_line_and_says_units() -> None:
    """06's table printed "-0.0" for a phase starting on the first line and "-0.4" for imports whose reported 4.4 s
    ends at 4 s on a clock of whole seconds; headers had no unit, phases were snake_case, rows in log order."""
    from omni_loader.notebook.stages import timeline

    text = "".join([
        line("00:00", "stage-server: listening", stage=2, pid=40),
        line("00:00", "stage-server: listening", stage=0, pid=20),
        line("00:04", "Initializing Token2Wav (torch and the model code imported, snapshot found: 4.4 s)", stage=2, pid=40),
        line("00:04", "Token2Wav load_weights took 58.3 ms", stage=2, pid=40),
        line("00:04", "Loading weights took 0.069 seconds", stage=2, pid=40),
        line("00:02", "Loading weights took 2.000089 seconds", stage=0, pid=20),
    ])
    styler = timeline(parse_text(text)).table()
    header, *rows = table_cells(styler)
    assert header == ["lane", "phase", "start (s)", "end (s)", "time (ms)", "source", "log line"]
    assert [r[:4] for r in rows] == [["stage-0", "weight loading", "0.0", "2.0"],
                                     ["stage-2", "imports and snapshot", "0.0", "4.0"],
                                     ["stage-2", "weight loading", "3.9", "4.0"],
                                     ["stage-2", "Token2Wav weight loading", "3.9", "4.0"]]
    assert "stage-2 imports and snapshot reported a length that puts its start up to a second before" in styler.to_html()
    assert "stage-0 weight loading reported" not in styler.to_html()  # -0.0001 s is no clamp worth a word


def test_06s_stage_table_orders_phases_as_they_started_and_gives_no_share_of_nothing(tmp_path: Path, monkeypatch) -> None:
    """06's A/B table listed phases alphabetically and showed -100.0% for init engine going 0.001 → 0.002 ms (and
    a blank for a 0 ms phase): stages in number order, each one's phases as they started in the first start, and
    "—" for the share of a baseline under 5 ms, said in the caption."""
    import omni_loader.notebook.stages as stages
    import omni_loader.startup.serve_ab as serve_ab
    from omni_loader.reporting.stats import Summary, compare

    def c(phase, a, b):
        return compare(Summary("baseline", phase, a), Summary("optimized", phase, b))

    comps = [("stage-10", "weight_loading", c("w", (1.0, 1.1, 1.2), (1.0, 1.1, 1.2))),
             ("stage-2", "init_engine", c("i", (1e-6, 1.2e-6, 0.9e-6), (2e-6, 2.1e-6, 1.9e-6))),
             ("stage-2", "imports_and_snapshot", c("s", (4.6, 4.7, 4.8), (4.7, 4.8, 4.9))),
             ("stage-2", "weight_loading", c("w", (0.069, 0.07, 0.071), (0.018, 0.019, 0.02)))]
    monkeypatch.setattr(serve_ab, "stage_phase_comparisons", lambda out, frame=None: comps)
    log = tmp_path / "1-baseline.log"
    log.write_text(stage_server_start() + line("00:09", "Loading weights took 3.0 seconds", stage=10, pid=50))
    monkeypatch.setattr(stages.Starts, "timeline", lambda self: stages.timeline(log))
    styler = stages.Starts(tmp_path).comparison_table()
    header, *rows = table_cells(styler)
    assert [(r[0], r[1]) for r in rows] == [("stage-2", "imports and snapshot"), ("stage-2", "weight loading"),
                                            ("stage-2", "init engine"), ("stage-10", "weight loading")]
    share = {(r[0], r[1]): r[header.index("saving (%)")] for r in rows}
    assert share[("stage-2", "init engine")] == "—" and share[("stage-2", "weight loading")] == "72.9"
    assert share[("stage-10", "weight loading")] == "0.0"
    assert share[("stage-2", "imports and snapshot")] == "\u22122.1"  # 0.1 s slower of 4.7 s, a minus as in "saving (ms)"
    assert "saving (%) shows — where the baseline median is under 5 ms" in styler.to_html()


def starts_frame(baseline, optimized):
    import pandas as pd

    return pd.DataFrame([{"variant": v, "seconds": s, "run_id": i}
                         for i, (v, s) in enumerate([*(("baseline", x) for x in baseline),
                                                     *(("optimized", x) for x in optimized)])])


def test_06s_detectability_is_two_sentences_at_the_measured_spread(monkeypatch) -> None:
    """06 printed a second paragraph at a hard-coded spread of 1 s: both sentences use the starts' own spread; where
    3 + 3 runs can call nothing, the first gives the PR's 5 + 5 at that same spread."""
    import omni_loader.notebook.stages as stages

    base, opt = [5.45, 8.20, 5.53], [7.54, 7.01, 6.12]
    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame(base, opt))
    text = stages.Starts("unused").detectable_sentences()
    spread = pooled_spread(base, opt)
    first, second = text.split("\n\n")
    five = detectable_difference(spread, 5)
    # the second Lab pass: "(where this many cannot call any, with the PR's 5 + 5 at the same spread)" was a hard
    # clause; the first sentence now says the PR's design's smallest difference first, then why 3 + 3 call none
    assert first == (f"At this spread (SD {spread:.2f} s of one run), the PR's 5 + 5 runs would call a difference of "
                     f"medians of {five:.2f} s or more 80% of the time under its separate-ranges rule, "
                     f"{five / PR_SAVING_S:.1f} times the PR's 0.48 s saving; 3 + 3 runs call none, however large (by chance "
                     "alone they have separate ranges 10% of the time, over the 5% the rule allows).")
    best_n, best_p = detectability(base, opt).best
    assert second == (f"No number of runs calls a 0.48 s saving 80% of the time under that rule (its best chance is "
                      f"{best_p:.0%}, at {best_n} runs a side: more runs widen the ranges); a Mann-Whitney test alone "
                      f"would need {runs_needed_by_test(PR_SAVING_S, spread)} runs a side.")
    assert "1 s" not in text and text.count(". ") <= 1  # no spread typed in; two sentences, one a paragraph
    assert "where this many" not in text and "with the PR's" not in text
    base, opt = [5.0, 5.1, 5.2, 5.3, 5.1], [4.0, 4.1, 4.2, 4.3, 4.1]  # five a side calls something: no fallback
    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame(base, opt))
    text = stages.Starts("unused").detectable_sentences()
    assert "the PR's 5 + 5" not in text and text.startswith("At this spread (SD ") and " 5 + 5 runs call a " in text


def test_06s_startup_row_names_its_columns_and_keeps_the_prs_verdict_out_of_the_starts(monkeypatch) -> None:
    import omni_loader.notebook.stages as stages

    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame([5.45, 8.2, 5.53], [7.54, 7.01, 6.12]))
    monkeypatch.setattr("omni_loader.startup.serve_ab.stage_phase_comparisons", lambda out, frame=None: [])
    text = stages.Starts("unused").startup_row()
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert rows[0] == "| variant | starts to /health (s), in the order they ran | median (s) |"
    assert rows[-1] == "| the PR (MI300X) | — (5 a side, not published) | 105.738 → 104.322 |"
    assert "The PR's verdict on its 5 + 5 starts: ranges overlapped." in text and "ranges overlapped |" not in text
    assert "Here the optimized starts' median is 1.48 s slower than the baseline's" in text  # seconds, as the table
    # the difference of the medians as the table shows them: 6.60 − 6.34 = 0.26, not the 0.254 that reads "0.25"
    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame([6.343, 6.2, 6.5], [6.597, 6.4, 6.9]))
    text = stages.Starts("unused").startup_row()
    assert "| 6.34 |" in text and "| 6.60 |" in text and "median is 0.26 s slower than the baseline's" in text, text


# --------------------------------------------------------------------------- the second Lab pass on 06, what remained


def cell_align(styler, column: str) -> set[str]:
    """The text-align each cell of ``column`` ends with (the last one of its style rules wins, as in a browser)."""
    import re

    html = styler.to_html()
    col = table_cells(styler)[0].index(column)
    rules = [props for sel, props in re.findall(r"([^{}]*)\{([^}]*)\}", html) if re.search(rf"_row\d+_col{col}\b", sel)]
    return {re.findall(r"text-align:\s*(\w+)", props)[-1] for props in rules if "text-align" in props}


def model_loaded_log() -> str:
    """Stage 2's lines with a "[Model Loaded]" line in the same second as the weights-format line it is inferred
    from (a phase of 0 s) and imports reported in whole milliseconds."""
    return "".join([
        line("00:00", "stage-server: listening on http://127.0.0.1:38051 (variant baseline, stage 2)", stage=2, pid=40),
        line("00:05", "Initializing Token2Wav (model_stage=code2wav), variant baseline, layout vllm-omni, from /tmp/s "
                      "(torch and the model code imported, snapshot found: 5604 ms)", stage=2, pid=40),
        line("00:05", "Using model weights format ['*.safetensors']", stage=2, pid=40),
        line("00:05", "[Model Loaded] name=Qwen2_5OmniToken2WavForConditionalGenerationVLLM, success=True, "
                      "size=1.12 MB, device=cpu", stage=2, pid=40),
        line("00:05", "Token2Wav load_weights took 63.406 ms", stage=2, pid=40),
        line("00:05", "Loading weights took 0.078004 seconds", stage=2, pid=40),
        line("00:06", "Model loading took 0.0011 GiB memory and 0.150457 seconds", stage=2, pid=40),
        line("00:06", "init engine (stats) took 0.002970 seconds", stage=2, pid=40),
    ])


def lab_comparisons(largest: str = "stage-2 imports_and_snapshot"):
    """06's A/B by stage and phase as the second Lab pass saw it: stage-2's imports 5,604 against 7,011 ms (the
    largest difference), its Token2Wav weight loading 63.406 against 10.416 ms, an inferred phase of 0 ms; with
    ``largest`` ("lane phase") that phase's optimized starts are made 1.5 s slower, and the imports alike."""
    from omni_loader.reporting.stats import Summary, compare

    def c(phase, a, b):
        return compare(Summary("baseline", phase, a), Summary("optimized", phase, b))

    samples = {"stage-0 weight_loading": ((2.000109, 2.0002, 2.0), (2.000117, 2.0002, 2.0)),
               "stage-2 imports_and_snapshot": ((5.604, 5.5, 5.7), (7.011, 6.9, 7.2)),
               "stage-2 model_loaded": ((0.0, 1.0, 0.0), (0.0,) * 3),  # one start's lines crossed a second
               "stage-2 token2wav_weight_loading": ((0.063406, 0.07, 0.06), (0.010416, 0.011, 0.01))}
    if largest != "stage-2 imports_and_snapshot":
        samples["stage-2 imports_and_snapshot"] = ((5.604, 5.5, 5.7),) * 2
        base = samples[largest][0]
        samples[largest] = (base, tuple(x + 1.5 for x in base))
    return [(*key.split(), c(key, a, b)) for key, (a, b) in samples.items()]


def stub_ab(monkeypatch, tmp_path: Path, comps) -> None:
    import omni_loader.notebook.stages as stages
    import omni_loader.startup.serve_ab as serve_ab

    log = tmp_path / "1-baseline.log"
    log.write_text(model_loaded_log())
    monkeypatch.setattr(serve_ab, "stage_phase_comparisons", lambda out, frame=None: comps)
    monkeypatch.setattr(stages.Starts, "timeline", lambda self: stages.timeline(log))
    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame([6.53, 6.56, 6.34], [8.07, 5.97, 7.99]))


def test_06s_stage_table_shows_log_milliseconds_whole_aligns_the_share_and_leaves_out_phases_of_no_length(
        tmp_path: Path, monkeypatch) -> None:
    """Second Lab pass: "saving (%)" was left-aligned beside right-aligned numbers, stage-2's imports (a line in
    whole ms) read "5,604.000", and "up to [Model Loaded] 0.000 0.000 0.000" took a row."""
    import omni_loader.notebook.stages as stages

    stub_ab(monkeypatch, tmp_path, lab_comparisons())
    styler = stages.Starts(tmp_path).comparison_table()
    header, *rows = table_cells(styler)
    by = {r[1]: r for r in rows}
    assert by["imports and snapshot"][2:6] == ["5,604", "7,011", "\u22121,407", "\u221225.1"]  # a minus, no decimals
    assert by["Token2Wav weight loading"][2:5] == ["63.406", "10.416", "52.990"]
    assert "up to [Model Loaded]" not in by and len(rows) == 3
    assert ("stage-2 up to [Model Loaded] has no row: a median of 0 ms in both variants (inferred from timestamps to "
            "the second)") in styler.caption
    for column in ("baseline median (ms)", "saving (ms)", "saving (%)"):
        assert cell_align(styler, column) == {"right"}, column


def test_06s_stage_table_says_a_repeated_inferred_phase_of_no_length_is_inferred(tmp_path: Path, monkeypatch) -> None:
    """A phase's second run in a start (``model_loaded#2``) is inferred as its first is: left out for medians of 0 ms,
    the caption gives the same reason."""
    import omni_loader.notebook.stages as stages

    comps = [(lane, f"{phase}#2" if phase == "model_loaded" else phase, c) for lane, phase, c in lab_comparisons()]
    stub_ab(monkeypatch, tmp_path, comps)
    assert ("stage-2 up to [Model Loaded] (2) has no row: a median of 0 ms in both variants (inferred from timestamps "
            "to the second)") in stages.Starts(tmp_path).comparison_table().caption


def test_06s_timeline_table_leaves_out_an_inferred_phase_of_no_length_and_shows_log_milliseconds_whole() -> None:
    from omni_loader.notebook.stages import timeline

    styler = timeline(parse_text(model_loaded_log())).table()
    header, *rows = table_cells(styler)
    by = {r[1]: r for r in rows}
    assert "up to [Model Loaded]" not in by
    assert "stage-2 up to [Model Loaded] has no row: inferred from timestamps to the second" in styler.caption
    assert by["imports and snapshot"][header.index("time (ms)")] == "5,604"
    assert by["Token2Wav weight loading"][header.index("time (ms)")] == "63.406"


def test_06s_startup_row_names_the_phase_that_moved_most_and_whether_the_change_runs_in_it(
        tmp_path: Path, monkeypatch) -> None:
    """Second Lab pass: "the optimized starts' median is 1.46 s slower … whether that is the change or the spread is
    the next section's question" named no cause, though the table above showed stage-2's imports 1,407 ms slower, a
    step the loader change does not touch."""
    import omni_loader.notebook.stages as stages

    stub_ab(monkeypatch, tmp_path, lab_comparisons())
    text = stages.Starts(tmp_path).startup_row()
    assert ("Here the optimized starts' median is 1.46 s slower than the baseline's. The stage table's largest "
            "difference of medians is stage-2's imports and snapshot: 5,604 ms in the baseline starts, 7,011 ms in the "
            "optimized (1,407 ms slower), a phase the loader change does not touch (it changes buffer discovery only, "
            "inside stage-2's Token2Wav weight loading): a difference there is the machine's, not the change's.") in text
    stub_ab(monkeypatch, tmp_path, lab_comparisons("stage-2 token2wav_weight_loading"))
    text = stages.Starts(tmp_path).startup_row()
    assert ("largest difference of medians is stage-2's Token2Wav weight loading: 63.406 ms in the baseline starts, "
            "1,563.406 ms in the optimized (1,500 ms slower), a phase that holds the loader change (buffer discovery): "
            "whether the starts' difference is the change or the spread") in text
    stub_ab(monkeypatch, tmp_path, lab_comparisons("stage-0 weight_loading"))
    assert "stage-0's weight loading" in stages.Starts(tmp_path).startup_row() and "does not touch" in stages.Starts(tmp_path).startup_row()


def test_which_startup_phases_hold_the_loader_change() -> None:
    from omni_loader.startup.timeline_plot import changed_load_phases, holds_change

    changed = changed_load_phases()
    assert changed == ("buffer_discovery",)  # the PR's pair changes one step
    held = {(lane, phase) for lane in ("stage-0", "stage-2") for phase in
            ("imports_and_snapshot", "model_loading", "weight_loading", "token2wav_weight_loading", "model_loaded",
             "init_engine", "weight_loading#2") if holds_change(lane, phase, ["stage-2"], changed)}
    assert held == {("stage-2", p) for p in ("model_loading", "weight_loading", "token2wav_weight_loading",
                                             "model_loaded", "weight_loading#2")}
    assert not holds_change("stage-2", "weight_loading", ["stage-2"], ("construct",))  # before the weights
    assert holds_change("stage-2", "model_loading", ["stage-2"], ("construct",))


def test_the_gantt_legend_is_as_large_as_the_lane_names() -> None:
    """Second Lab pass: the legend was about 9 px tall at display size (8 pt), smaller than every other text."""
    from omni_loader.startup.timeline_plot import gantt

    for text in (three_stage_log(), model_loaded_log()):
        ax = gantt(parse_text(text)).axes[0]
        legend = {t.get_fontsize() for t in ax.get_legend().get_texts()}
        lanes = {t.get_fontsize() for t in ax.get_yticklabels()}
        assert min(legend) >= max(lanes) >= 10, (legend, lanes)


def test_milliseconds_keep_the_precision_their_log_gave_them() -> None:
    """06's stage table: whole log milliseconds read "5,604", the median of two of them "5,300.5" (not "5,300.500")."""
    from omni_loader.notebook.stages import ms_text

    assert [ms_text(x) for x in (5.604, 5.3005, 0.063406, -1.407)] == ["5,604", "5,300.5", "63.406", "-1,407"]


def _lanes_log(n: int, style: str) -> str:
    """A start of ``n`` stage lanes, three lines each: ``[Stage-N]`` tags, or one of three stages in ``n / 3`` replicas."""
    lines = [line("00:00", "vLLM-Omni API server version 9.9", process="APIServer", pid=10)]
    for i in range(n):
        tags = {"stage": i} if style == "stage" else {"stage": i % 3, "replica": i // 3}
        s = 1 + i % 50
        lines += [line(f"00:{s:02d}", f"engine for stage {i}", pid=20 + i, **tags),
                  line(f"00:{s + 2:02d}", "Loading weights took 1.51 seconds", pid=20 + i, **tags),
                  line(f"00:{s + 3:02d}", "init engine (profile, create kv cache, warmup model) took 2.00 seconds",
                       pid=20 + i, **tags)]
    return "".join(lines) + line("00:59", "[AsyncOrchestrator] All stages initialized successfully",
                                 process="APIServer", pid=10)


@pytest.mark.parametrize("style", ["stage", "replica"])
def test_timeline_work_is_linear_in_the_lanes(style):
    """No search per lane for each record or each new stage: ``[Stage-N]`` tags were found with a pattern made anew
    for each new stage (excluding those seen: 1,000 stages took 33 s), and the printed records were ordered by a
    search of the lane list for each (10,000 lanes: 5 s of 7). Counted, not timed: the pattern compilations and
    list searches made while a log is read and printed do not grow with its lanes."""
    import re

    from omni_loader.cli.timeline import render

    def searches(n: int) -> int:
        text, counted = _lanes_log(n, style), [0]

        def count(frame, event, arg):
            if (event == "c_call" and getattr(arg, "__qualname__", "") == "list.index") or (
                    event == "call" and frame.f_code is re.compile.__code__):
                counted[0] += 1

        sys.setprofile(count)
        try:
            render(parse_text(text), 1.0)
        finally:
            sys.setprofile(None)
        return counted[0]

    searches(60)  # the patterns that are made once, on first use
    small, large = searches(60), searches(240)
    assert large == small, (small, large)
