"""The profile command: cProfile, py-spy and torch.profiler around one tiny load per variant."""

from __future__ import annotations

import json
import stat
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from omni_loader import cli, profiling
from omni_loader.bench import worker
from omni_loader.errors import OmniLoaderError
from omni_loader.names import LEAF_PHASES
from omni_loader.reporting.measurements import LABELS
from omni_loader.token2wav.options import LoadOptions
from omni_loader.profiling.settings import ProfileSettings
from test_notebooks import NOTEBOOK_DIR

VARIANTS = ("baseline", "optimized")
BAR_LINE = "profile: "  # the bar's lines in a log name the py-spy steps too; the skip is said on its own line


@pytest.fixture(scope="module")
def profiled(executed_notebook) -> Path:
    """The suite's one profile of both variants with every tool on the tiny snapshot: notebook 02's run
    (``profile_variants``, the function behind ``omni-loader profile``), made once per suite run and
    read here and by the notebook's own checks. The command itself runs end to end in the py-spy
    tests below (a missing py-spy, no ptrace permission)."""
    run = executed_notebook(NOTEBOOK_DIR / "02_profiles.ipynb")
    assert (run.parameters["size"], run.parameters.get("tools", "all")) == ("tiny", "all")
    return run.results


@pytest.fixture(scope="module")
def profiled_top() -> int:
    """Rows of the profile's top-function tables: notebook 02's ``top`` parameter, as papermill reads it."""
    import papermill as pm

    return int(pm.inspect_notebook(str(NOTEBOOK_DIR / "02_profiles.ipynb"))["top"]["default"])


@pytest.fixture(scope="module")
def tiny_named_buffers() -> int:
    """Named buffers of the tiny Token2Wav as the loader builds it (vllm-omni layout), from the model itself."""
    from omni_loader.token2wav.model import build_model, config_dict

    model = build_model(config_dict("tiny"), layout="vllm-omni", device="meta")
    return sum(1 for _ in model.named_buffers())


def _needs_py_spy(out: Path, variant: str) -> None:
    text = (out / variant / "profile.md").read_text()
    if "py-spy: **skipped**" in text:
        pytest.skip("py-spy could not record here: " + text.split("py-spy: **skipped**:", 1)[1].splitlines()[0])


def _load_phases(out: Path, variant: str) -> dict[str, float]:
    return json.loads((out / variant / "load.json").read_text())["phases"]


# --------------------------------------------------------------------------- the command


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_share_comes_from_the_median_run_of_fresh_processes(profiled: Path) -> None:
    """load.json is each variant's median run of a small benchmark in fresh worker processes (as
    reproduce runs them), not one load inside the profiling process: in a notebook kernel, after the
    profilers' loads, that one load once made the optimized variant "92.6% more" than the baseline."""
    from omni_loader.results.rows import read_runs
    from omni_loader.results.suite import read_metadata

    frame = read_runs(profiled / "reference")
    spec = next(iter(read_metadata(profiled / "reference")["benchmarks"].values()))["spec"]
    assert spec["workers"] == "forkserver" and spec["runs"] == 3
    for variant in VARIANTS:
        load = json.loads((profiled / variant / "load.json").read_text())
        measured = frame[(frame["variant"] == variant) & ~frame["warmup"].astype(bool)]
        totals = sorted(measured[measured["phase"] == "total"]["seconds"])
        assert load["reference"]["runs"] == len(totals) == 3 and load["reference"]["totals"] == totals
        assert load["phases"]["total"] == totals[1]  # the median run
        run = measured[measured["run_id"] == load["reference"]["run_id"]]
        assert load["phases"] == dict(zip(run["phase"], run["seconds"]))
        assert sum(r["minor_faults"] or 0 for r in load["phase_records"]) > 0  # its counters came along


@pytest.mark.subprocess
def test_profile_command_writes_every_file_with_its_content(profiled: Path, profiled_top: int,
                                                            tiny_named_buffers: int) -> None:
    """Each file reads back as what it claims to be, and holds the load of its own variant."""
    for variant in VARIANTS:
        d = profiled / variant
        load = json.loads((d / "load.json").read_text())
        assert load["variant"] == variant
        assert load["state_dict_calls"] == (tiny_named_buffers if variant == "baseline" else 0)
        stats = profiling.read_pstats(d / f"{variant}.pstats")
        assert any(name == "load_token2wav" for (_, _, name) in stats.stats)
        assert profiling.state_dict_call_counts(stats)["primitive"] == load["state_dict_calls"]
        top = profiling.read_top_functions(d / "top_functions.csv")
        assert list(top.columns) == profiling.TOP_COLUMNS and len(top) == profiled_top
        assert all(f"| {f} |" in (d / "top_functions.md").read_text() for f in top["function"])
        phases = profiling.read_phase_functions(d / "phase_functions.csv")
        assert set(phases["phase"]) <= set(LEAF_PHASES) and not phases.empty
        assert set(profiling.trace_phase_ranges(d / "trace.json")["phase"]) == set(load["phases"])
        ops = profiling.read_torch_ops(d / "torch_ops.csv")
        assert not ops.empty and ops["self_cpu_ms"].is_monotonic_decreasing
        assert "|" in (d / "torch_ops.md").read_text()
        text = (d / "profile.md").read_text()
        assert variant in text.splitlines()[0]
    summary = (profiled / "profile.md").read_text()
    assert all(f"`{v}`" in summary or v in summary for v in VARIANTS)
    for variant in VARIANTS:
        _needs_py_spy(profiled, variant)
        flame = ET.parse(profiled / variant / "flame.svg").getroot()
        assert flame.tag == "{http://www.w3.org/2000/svg}svg"
        samples = profiling.speedscope_summary(profiled / variant / "speedscope.json")
        assert samples["load_samples"] > 0
        assert (samples["state_dict_samples"] > 0) == (variant == "baseline")


@pytest.mark.subprocess
def test_top_functions_table_reads_back_sorted_by_cumtime(profiled: Path, profiled_top: int) -> None:
    df = profiling.read_top_functions(profiled, "baseline")
    assert list(df.columns) == profiling.TOP_COLUMNS
    assert len(df) == profiled_top
    assert df["cumtime"].is_monotonic_decreasing
    assert df["function"].str.contains(r"\(load_token2wav\)").any()
    profiler = "_lsprof|omni_loader/profiling/"  # the profiler itself (and its phase clock) is filtered out
    assert not df["function"].str.contains(profiler).any()
    assert not profiling.read_phase_functions(profiled, "baseline")["function"].str.contains(profiler).any()
    assert "| function | ncalls | primitive calls |" in (profiled / "baseline" / "top_functions.md").read_text()
    assert profiling.read_top_functions(profiled / "baseline" / "top_functions.csv").equals(df)


# --------------------------------------------------------------------------- cProfile


@pytest.mark.subprocess
def test_state_dict_primitive_calls_equal_named_buffers(profiled: Path, tiny_named_buffers: int) -> None:
    base = profiling.state_dict_call_counts(profiled / "baseline" / "baseline.pstats")
    assert base["primitive"] == tiny_named_buffers
    assert base["ncalls"] > base["primitive"]  # one call per module per state dict built
    assert profiling.state_dict_primitive_calls(profiled / "baseline" / "baseline.pstats") == tiny_named_buffers
    assert profiling.state_dict_primitive_calls(profiled / "optimized" / "optimized.pstats") == 0
    assert f"{tiny_named_buffers} primitive" in (profiled / "baseline" / "profile.md").read_text()


def test_state_dict_primitive_calls_are_whole_state_dicts(tmp_path: Path) -> None:
    """Primitive calls count the state dicts built, not the recursive call into every child module."""
    import cProfile

    from torch import nn

    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    modules = sum(1 for _ in model.modules())
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(3):
        model.state_dict()
    prof.disable()
    path = tmp_path / "three.pstats"
    prof.dump_stats(path)
    assert profiling.state_dict_call_counts(path) == {"primitive": 3, "ncalls": 3 * modules}
    assert profiling.state_dict_primitive_calls(path) == 3
    assert profiling.state_dict_primitive_calls(profiling.read_pstats(path)) == 3


@pytest.mark.subprocess
def test_phase_functions_attribute_state_dict_to_buffer_discovery(profiled: Path, tiny_named_buffers: int) -> None:
    df = profiling.read_phase_functions(profiled, "baseline")
    assert set(df["phase"]) <= set(LEAF_PHASES)
    state_dict = df[df["function"].str.endswith("(state_dict)")]
    assert list(state_dict["phase"]) == ["buffer_discovery"]
    assert state_dict["primitive_calls"].iloc[0] == tiny_named_buffers
    shares = df.groupby("phase")["share_of_phase"].sum()
    assert ((shares - 1).abs() < 1e-6).all()


# --------------------------------------------------------------------------- py-spy


@pytest.mark.subprocess
def test_speedscope_parses_and_baseline_samples_hold_state_dict(profiled: Path) -> None:
    for variant in VARIANTS:
        _needs_py_spy(profiled, variant)
    base = profiling.speedscope_summary(profiled / "baseline" / "speedscope.json")
    opt = profiling.speedscope_summary(profiled / "optimized" / "speedscope.json")
    assert base["load_samples"] > 0 and base["state_dict_samples"] > 0
    assert opt["load_samples"] > 0 and opt["state_dict_samples"] == 0
    frames = json.loads((profiled / "baseline" / "speedscope.json").read_text())["shared"]["frames"]
    assert any(f["name"].split(".")[-1] == "state_dict" for f in frames)


@pytest.mark.subprocess
def test_flamegraph_svg_parses_and_names_state_dict(profiled: Path) -> None:
    _needs_py_spy(profiled, "baseline")
    root = ET.parse(profiled / "baseline" / "flame.svg").getroot()
    titles = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(True for _ in root.iter("{http://www.w3.org/2000/svg}rect")) and titles
    assert any("state_dict" in t for t in titles)


@pytest.mark.subprocess
def test_flamegraph_of_a_real_profile_leaves_out_the_model_code_import(profiled: Path) -> None:
    """On py-spy's own recording of the current loader (not hand-made stacks): the one-time import of the
    model code, however deep under load_token2wav the loader calls it, is not in the picture, and what
    imports remain (the load's own lazy ones) hold under 10% of its width."""
    from omni_loader.profiling import flamegraph

    for variant in VARIANTS:
        _needs_py_spy(profiled, variant)
        speedscope = profiled / variant / "speedscope.json"
        data = json.loads(speedscope.read_text())
        names = [f["name"].split(".")[-1] for f in data["shared"]["frames"]]
        assert "import_model_code" in names  # the recording holds the import ...
        flame = flamegraph.build(speedscope)

        def walk(node):
            yield node
            for child in node.children.values():
                yield from walk(child)

        nodes = list(walk(flame.root))
        assert not {"import_model_code", "_modeling"} & {n.name.split(".")[-1] for n in nodes}  # ... the picture not
        imports = sum(n.samples for n in flame.root.children.values() if n.name == flamegraph.IMPORT)
        assert imports < 0.10 * flame.root.samples
        assert 0 < flame.samples_kept < flame.samples_total


def test_flamegraph_header_wraps_the_note_to_the_drawings_width() -> None:
    """02's graphs cut their second header line at "...(import_model_code() / _modeling()); recursion a": the note
    what the picture shows is wrapped to lines that fit the drawing (monospace, CHAR units a character), all of it
    shown, and the frames start below the last line."""
    from omni_loader.profiling import flamegraph

    root = flamegraph.Node("load_token2wav", "/x/omni_loader/loader.py", samples=3, seconds=0.3)
    root.child("load_parameters", "/x/omni_loader/loader.py").samples = 3
    flame = flamegraph.Flame(root=root, samples_total=45_678, samples_kept=12_345, title="baseline load")
    body, height = flamegraph.svg_body(flame, "f")
    svg = ET.fromstring(body)
    ns = "{http://www.w3.org/2000/svg}"
    header = [t for t in svg.findall(f"{ns}text") if t.get("fill") == "#555"]
    lines = [t.text or "" for t in header]
    assert len(lines) == 2 and " ".join(lines) == flame.note(), lines
    usable = flamegraph.WIDTH - 2 * flamegraph.PAD
    assert all(flamegraph.PAD + len(line) * flamegraph.CHAR <= usable for line in lines)
    status = svg.find(f"{ns}text[@class='status']")
    frames = [float(r.get("y")) for r in svg.iter(f"{ns}rect") if r.get("y")]
    assert max(float(t.get("y")) for t in header) < float(status.get("y")) < min(frames)
    assert height == min(frames) + 2 * flamegraph.ROW + flamegraph.PAD  # two rows of frames below the header


# --------------------------------------------------------------------------- torch.profiler


@pytest.mark.subprocess
def test_chrome_trace_has_one_range_per_load_phase(profiled: Path) -> None:
    for variant in VARIANTS:
        trace = json.loads((profiled / variant / "trace.json").read_text())  # the file parses as JSON
        ranges = profiling.trace_phase_ranges(trace)
        expected = set(_load_phases(profiled, variant))
        assert expected == {*LEAF_PHASES, "total", "outer_load_weights", "weight_loading"}
        assert Counter(ranges["phase"]) == dict.fromkeys(expected, 1)
        total = ranges.set_index("phase").loc["total"]
        for _, r in ranges.iterrows():  # every phase lies inside the total range
            assert total["ts_us"] <= r["ts_us"] and r["ts_us"] + r["dur_us"] <= total["ts_us"] + total["dur_us"] + 1
    ops = profiling.read_torch_ops(profiled, "baseline")
    assert ops["self_cpu_ms"].is_monotonic_decreasing


# --------------------------------------------------------------------------- the reports


@pytest.mark.subprocess
def test_reports_name_the_largest_phase_from_the_data(profiled: Path) -> None:
    summary = (profiled / "profile.md").read_text()
    for variant in VARIANTS:
        phases = _load_phases(profiled, variant)
        largest = max(LEAF_PHASES, key=phases.get)
        share = phases[largest] / phases["total"]
        text = (profiled / variant / "profile.md").read_text()
        said = f"{LABELS[largest]}, {100 * share:.1f}% of the load"  # in words only (its id read as a raw name)
        assert f":** {said}" in text and f"### {LABELS[largest]}: {100 * share:.1f}% of the load" in text
        assert f":** {said}" in summary
    assert "**Next bottleneck of the optimized load:**" in summary
    assert f"| {LABELS['buffer_discovery']} (`buffer_discovery`) |" in summary  # the side-by-side table in words


def test_notebook_02_names_each_phase_in_words_and_each_share_in_percent(tmp_path: Path) -> None:
    """02's phase-share table, torch's phase ranges and the where-time-goes prose read ``construct``,
    ``read_checkpoint``, ``load_parameters``: each phase is said in 01's words (LABELS), the shares' headers
    name their unit (``baseline share (%)``, one number a cell)."""
    import re
    from html import unescape

    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile
    from omni_loader.profiling.summary import write_summary_report
    from omni_loader.profiling.tables import phase_range_table

    def cells(styler) -> list[list[str]]:
        return [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
                for row in re.findall(r"<tr>(.*?)</tr>", styler.to_html(), re.S)]

    def profile(variant: str, construct: float) -> VariantProfile:
        (tmp_path / variant).mkdir()
        phases = {"construct": construct, "read_checkpoint": 0.01, "buffer_discovery": 0.002,
                  "load_parameters": 0.03, "total": construct + 0.045}
        return VariantProfile(variant, tmp_path / variant, reference={"phases": phases})

    profiles = Profile({"baseline": profile("baseline", 0.06), "optimized": profile("optimized", 0.02)}, tmp_path)
    shares, *_ = profiles.phase_shares()
    header, *rows = cells(shares)
    assert header == ["phase", "baseline (ms)", "baseline share (%)", "optimized (ms)", "optimized share (%)"]
    by_phase = {r[0]: r[1:] for r in rows}
    assert list(by_phase)[:4] == [LABELS[p] for p in ("construct", "read_checkpoint", "buffer_discovery",
                                                      "load_parameters")]
    assert by_phase[LABELS["construct"]] == ["60.00", "57.1", "20.00", "30.8"]
    trace = {"traceEvents": [{"name": f"phase::{p}", "ph": "X", "cat": "user_annotation", "ts": ts, "dur": 5}
                             for ts, p in ((10, "construct"), (20, "load_parameters"))]}
    assert [r[0] for r in cells(phase_range_table(trace))[1:]] == [LABELS["construct"], LABELS["load_parameters"]]
    write_summary_report(profiles, tmp_path)
    shown = profiles.where_time_goes(tmp_path)
    assert (f"**Largest cost of the baseline load:** {LABELS['construct']}, 57.1% of the load "
            "(60.00 ms)") in shown
    assert (f"**Next bottleneck of the optimized load:** {LABELS['load_parameters']}, 46.2% "
            "of the load") in shown
    assert not re.search(r"^#+ `", shown, re.M)  # a heading names its phase in words only
    assert "(phase `" not in shown  # "Construction (phase construct)": the phase in words, no raw identifier


def _cells(styler) -> list[list[str]]:
    """A Styler's rows as text, header first (tags stripped, entities read)."""
    import re
    from html import unescape

    return [[unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", styler.to_html(), re.S)]


def test_notebook_02s_operator_table_holds_operators_only_with_headers_in_words(tmp_path: Path) -> None:
    """02's torch.profiler table (second Lab pass) listed the kit's ``phase::buffer_discovery``, ``phase::construct``,
    ``phase::total`` among the ``aten::`` operators, under "self cpu (ms)" and "cpu total (ms)": the operators alone,
    the top ``n`` of them, under headers in words with their unit; the phase ranges in the table under it, in words;
    the caption counts both, from the file."""
    import re

    import pandas as pd

    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile

    (tmp_path / "baseline").mkdir()
    ops = pd.DataFrame({"name": ["phase::buffer_discovery", "aten::fill_", "phase::total", "aten::copy_", "aten::view"],
                        "calls": [1, 2, 1, 40, 1_200], "self_cpu_ms": [913.8, 300.0, 5.0, 150.0, 1.0],
                        "cpu_total_ms": [1_078.1, 301.2, 3_919.0, 154.5, 2.8]})
    (tmp_path / "baseline" / "torch_ops.csv").write_text(ops.to_csv(index=False))
    trace = {"traceEvents": [{"name": f"phase::{p}", "ph": "X", "cat": "user_annotation", "ts": ts, "dur": 5}
                             for ts, p in ((10, "total"), (12, "buffer_discovery"))]}
    (tmp_path / "baseline" / "trace.json").write_text(json.dumps(trace))
    heading, operators, ranges = Profile({"baseline": VariantProfile("baseline", tmp_path / "baseline")},
                                         tmp_path).torch_operators(top=2)
    header, *rows = _cells(operators)
    assert heading == "### baseline"
    assert header == ["operator", "calls", "self CPU time (ms)", "CPU time incl. children (ms)"]
    assert rows == [["aten::fill_", "2", "300.000", "301.200"], ["aten::copy_", "40", "150.000", "154.500"]]
    caption = re.search(r"<caption>(.*?)</caption>", operators.to_html()).group(1)
    assert caption == ("The top 2 of 3 operators by self CPU time; the load's 2 phases are in the table below, each "
                       "in words")
    assert "phase::" not in caption  # no such rows in this table any more: the caption named rows it does not hold
    assert [r[0] for r in _cells(ranges)[1:]] == [LABELS["total"], LABELS["buffer_discovery"]]
    assert not any("phase::" in c or "_" in c.split("(")[0] for c in header)


def test_the_state_dict_table_says_whose_count_its_third_row_is(tmp_path: Path) -> None:
    """02's ``state_dict`` table named its third row "loader's counter": whose count, of what. The row says the kit's
    loader counted the ``state_dict()`` calls (whole state dicts built), and so does each ``profile.md``."""
    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile
    from omni_loader.profiling.summary import write_summary_report, write_variant_report

    def profile(variant: str, calls: dict[str, int]) -> VariantProfile:
        (tmp_path / variant).mkdir()
        return VariantProfile(variant, tmp_path / variant, state_dict_calls=calls,
                              reference={"phases": {"construct": 0.05, "buffer_discovery": 0.01, "total": 0.06}})

    profiles = Profile({"baseline": profile("baseline", {"primitive": 219, "ncalls": 239_148, "counter": 219}),
                        "optimized": profile("optimized", {"primitive": 0, "ncalls": 0, "counter": 0})}, tmp_path)
    header, *rows = _cells(profiles.state_dict_calls())
    assert header[1:] == ["baseline", "optimized"]
    assert rows == [["primitive calls (whole state dicts)", "219", "0"], ["all calls (with recursion)", "239,148", "0"],
                    ["state_dict() calls counted by the kit's loader (whole state dicts built)", "219", "0"]]
    write_summary_report(profiles, tmp_path)
    write_variant_report(profiles["baseline"])
    summary = (tmp_path / "profile.md").read_text()
    assert "- baseline: 219 (cProfile primitive calls; 239,148 with recursion; 219 counted by the kit's loader)" in summary
    text = (tmp_path / "baseline" / "profile.md").read_text()
    assert ("(239,148 calls including the recursive calls into child modules); the kit's loader, which counts the "
            "model's `state_dict()` calls during buffer discovery (whole state dicts built), counts 219.") in text
    assert "counter" not in summary + text


def test_the_profile_bars_sampling_line_counts_with_thousands_separators(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile bar's last line read "3596 samples" where the flamegraph read "3,596 samples": the kit's
    count (``formatting.count``), thousands separated, the noun in its number."""
    from types import SimpleNamespace

    from omni_loader.profiling import run as profile_run
    from omni_loader.profiling.result import VariantProfile

    monkeypatch.setattr(profile_run, "record_py_spy", lambda job: {"files": {}, "summary": {"samples": 3_596}})
    vp = VariantProfile("optimized", tmp_path)
    line = profile_run._run_py_spy(vp, SimpleNamespace(root=tmp_path), LoadOptions(device="cpu"),
                                   ProfileSettings(repeat=1), ("py-spy", ""), {"phases": {"total": 1.5}})
    assert line.startswith("optimized: py-spy ") and line.endswith(" s, 3,596 samples"), line


# --------------------------------------------------------------------------- the profile's bar


KIT_BAR = r"profile: \d+/\d+ \|[^|]*\| \d\d:\d\d elapsed, (\?|(at least )?\d\d:\d\d) left, "  # progress.BAR_FORMAT


class _Bar:
    """A progress bar stand-in that is on (``disable`` False): every postfix it is given, in order."""

    disable = False

    def __init__(self, **kwargs) -> None:
        self.kwargs, self.postfix, self.texts, self.n, self.closed = kwargs, kwargs.get("postfix", ""), [], 0, False

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.postfix = text
        self.texts.append(text)

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        self.closed = True


def test_the_profile_bars_time_left_reads_as_the_kits_bars_and_counts_down_while_a_step_runs() -> None:
    """02's bar read "01:46 elapsed, about 1 min 01 s left of about 2 min 48 s; optimized: cProfile load", and before
    anything ran "time left not known yet (...)": every other bar reads "mm:ss elapsed, mm:ss left, step" (``? left``
    when unknown). On a fake clock: unknown while a kind to come has not run (not "at least" the part priced), then
    counting down while a step runs; a step that overruns raises the time left, and the last one never reads 00:00
    while it runs."""
    from omni_loader.progress import TIMED, Countdown, Step

    now = [0.0]
    countdown = Countdown([Step(TIMED, "baseline"), Step("cProfile", "baseline"), Step(TIMED, "baseline"),
                           Step(TIMED, "baseline")], clock=lambda: now[0])
    assert countdown.clock_words() == "? left"
    countdown.begin(Step(TIMED, "baseline"))
    now[0] += 10.0
    countdown.end()
    assert countdown.clock_words() == "? left"  # no cProfile load has run: not "at least 00:20 left"
    countdown.begin(Step("cProfile", "baseline"))
    now[0] += 5.0
    countdown.end()
    assert countdown.clock_words() == "00:20 left"  # 2 unprofiled runs of 10 s
    countdown.begin(Step(TIMED, "baseline"))
    now[0] += 4.0
    assert countdown.clock_words() == "00:16 left"  # the running one: 6 of its 10 s left
    now[0] += 30.0
    assert countdown.clock_words() == "00:18 left"  # overdue at 34 s: 3.4 s for itself, the next at the mean of 10 and 20
    # (34 s counted as twice its price)
    countdown.end()
    assert countdown.clock_words() == "00:22 left"  # the mean of 10 and 34: no run is dropped unless declared a warm-up
    countdown.begin(Step(TIMED, "baseline"))
    now[0] += 40.0
    assert countdown.clock_words() == "00:04 left"  # the last step, overdue: a tenth of its time so far, not 00:00
    countdown.end()
    assert countdown.clock_words() == "00:00 left"


def test_the_profile_bar_is_redrawn_while_a_step_runs_and_stops_when_closed() -> None:
    """02's bar stood still for 39 s of a torch.profiler load and 21 s of py-spy's sampling: tqdm redraws on an update
    only. A StepBar with a tick redraws itself (its postfix set again) between the step's start and end, and not
    after it is closed; a bar that is off is not redrawn (no thread)."""
    import threading
    import time

    from omni_loader.progress import TIMED, Countdown, Step, StepBar

    bar = _Bar()
    with StepBar(bar, Countdown([Step(TIMED, "baseline")]), tick=0.01) as steps:
        steps.begin(Step(TIMED, "baseline"), "reference run 1/1 baseline")
        said = len(bar.texts)
        deadline = time.monotonic() + 30
        while len(bar.texts) < said + 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(bar.texts) >= said + 3, bar.texts  # redrawn with no begin() or end() called
        assert bar.texts[-1] == "? left, reference run 1/1 baseline"
        steps.end()
    assert bar.closed and not steps.redrawer.thread.is_alive()
    after = len(bar.texts)
    time.sleep(0.05)
    assert len(bar.texts) == after
    off = _Bar()
    off.disable = True
    threads = threading.active_count()
    StepBar(off, tick=0.01).close()
    assert threading.active_count() == threads


def test_the_profile_bars_lines_read_as_the_kits_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar's own lines (line mode, as a saved notebook keeps them): desc, count, bar, elapsed, time left, step."""
    import io
    import re
    import sys

    from omni_loader import progress
    from omni_loader.progress import BAR_FORMAT, TIMED, Countdown, Step, StepBar

    monkeypatch.setenv(progress.ENV, "lines")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    countdown = Countdown([Step(TIMED, "baseline")] * 4)
    with StepBar(progress.progress_bar(total=4, desc="profile", unit="step", bar_format=BAR_FORMAT,
                                       postfix=f"{countdown.clock_words()}, starting the worker server"),
                 countdown) as bar:
        for k in range(4):
            bar.begin(Step(TIMED, "baseline"), f"reference run {k + 1}/4 baseline")
        bar.end()
    lines = stream.getvalue().splitlines()
    assert lines and all(re.match(KIT_BAR, line) for line in lines), lines
    assert re.match(r"profile: 0/4 .* elapsed, \? left, starting the worker server$", lines[0]), lines


@pytest.mark.subprocess
def test_the_real_runs_profile_and_diff_bars_read_as_the_kits_bars(executed_notebook) -> None:
    """In notebook 02's executed copy (the suite's real run, line mode): every line of the profile bar and of the
    differential profile's bar reads "desc: N/M |bar| mm:ss elapsed, mm:ss left, step", never the old "about 1 min
    01 s left of about 2 min 48 s" or "time left not known yet (...)"."""
    import re

    import nbformat

    run = executed_notebook(NOTEBOOK_DIR / "02_profiles.ipynb")
    nb = nbformat.read(run.copy, as_version=4)
    lines = [line for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             for line in str(o.get("text", "")).splitlines() if line.startswith(("profile: ", "profile --diff: "))]
    assert any(line.startswith("profile: ") for line in lines), lines
    assert not run.parameters.get("diff_runs", 1) or any(line.startswith("profile --diff: ") for line in lines), lines
    kit = KIT_BAR.replace("profile: ", "profile(?: --diff)?: ")
    assert all(re.match(kit, line) for line in lines), [line for line in lines if not re.match(kit, line)]
    diff_lines = [line for line in lines if line.startswith("profile --diff: ")]
    if diff_lines:  # the bar's last words are the comparison's, not the last run's (it took half a minute in Lab)
        from omni_loader.profiling.diff import read_profile_diff

        diff = read_profile_diff(run.results)
        done = f", done: {int(diff.functions['tested'].sum())} functions tested, {len(diff.claimed)} moved"
        assert diff_lines[-1].endswith(done), (diff_lines[-1], done)


def test_the_profile_bars_steps_are_short_enough_for_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The bar wrapped onto a second line in Lab ("py-"/"spy"): each text the run gives its bar, time left and step,
    is short (profile_variants with its workers and tools stood in for); the steps are named."""
    from types import SimpleNamespace

    from omni_loader.profiling import run as profile_run
    from omni_loader.results.planner import PlannedRun

    bar = _Bar()
    plan = ["baseline", "baseline", "optimized", "optimized"]

    def reference_loads(snapshot, variants, options, out, *, runs, warmup, on_run=None):
        for k, variant in enumerate(plan, 1):
            on_run(k, len(plan), PlannedRun(k, variant, k == 1, k, "load"))
        return {v: {"phases": {"total": 2.0}, "variant": v} for v in variants}

    def tool(*args, **kwargs):
        return {"files": {}, "state_dict_calls": 0, "phase_functions": {}, "ops": None, "phase_ranges": {"phase": []}}

    monkeypatch.setattr(profile_run, "progress_bar", lambda **kw: bar.__init__(**kw) or bar)
    monkeypatch.setattr(profile_run, "reference_spec", lambda *a, **k: SimpleNamespace(
        plan=lambda: [SimpleNamespace(variant=v) for v in plan]))
    monkeypatch.setattr(profile_run, "reference_loads", reference_loads)
    monkeypatch.setattr(profile_run, "profile_cprofile", tool)
    monkeypatch.setattr(profile_run, "profile_torch", tool)
    monkeypatch.setattr(profile_run, "record_py_spy", lambda job: {"files": {}, "summary": {"samples": 12_345}})
    monkeypatch.setattr(profile_run, "find_py_spy", lambda *a: ("py-spy", ""))
    monkeypatch.setattr(profile_run, "torch_note", lambda *a: "")
    monkeypatch.setattr(profile_run, "write_variant_report", lambda *a, **k: tmp_path / "profile.md")
    monkeypatch.setattr(profile_run, "write_summary_report", lambda *a, **k: None)
    profiles = profile_run.profile_variants(SimpleNamespace(token2wav_config={}, root=tmp_path), "both", "all",
                                            tmp_path / "out", warmup=0, device="cpu", progress=True)
    assert callable(profiles.torch_notes) and list(profiles) == list(VARIANTS)  # 02's sentences come with the dict
    texts = [bar.kwargs["postfix"], *bar.texts]
    assert all(len(t) <= 60 for t in texts), max(texts, key=len)
    steps = {t.split(" left, ", 1)[1] for t in texts}
    assert {"baseline: cProfile", "optimized: torch.profiler", "reference run 1/4 baseline (warm-up)"} <= steps
    assert any(t.startswith("optimized: py-spy, ") for t in steps), steps
    assert bar.closed


@pytest.mark.subprocess
def test_the_real_runs_operator_tables_leave_the_phase_ranges_to_the_table_under_them(profiled: Path) -> None:
    """On the suite's real profile: each variant's operator table holds no ``phase::`` row while its
    ``torch_ops.csv`` holds one per phase; the phase-range table under it holds them, in words."""
    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile

    shown = Profile({v: VariantProfile(v, profiled / v) for v in VARIANTS}, profiled).torch_operators()
    shown = shown[:3 * len(VARIANTS)]  # the tables; the sentence on which load was slower under them
    assert shown[::3] == [f"### {v}" for v in VARIANTS]
    for variant, operators, ranges in zip(VARIANTS, shown[1::3], shown[2::3]):
        names = [r[0] for r in _cells(operators)[1:]]
        assert names and not any(n.startswith("phase::") for n in names), names
        saved = profiling.read_torch_ops(profiled, variant)["name"]
        phases = {n.removeprefix("phase::") for n in saved if n.startswith("phase::")}
        assert phases == set(_load_phases(profiled, variant))
        assert {r[0] for r in _cells(ranges)[1:]} == {LABELS.get(p, p) for p in phases}


# --------------------------------------------------------------------------- py-spy unavailable


@pytest.mark.slow
@pytest.mark.subprocess
def test_missing_py_spy_says_so_in_one_line_and_other_tools_still_run(
    tiny_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-dir" / "py-spy"
    monkeypatch.setenv(profiling.PY_SPY_ENV, str(missing))
    out = tmp_path / "prof"
    rc = cli.main(["profile", "--variant", "both", "--tool", "all", "--checkpoint", str(tiny_snapshot),
                   "--out", str(out), "--warmup", "0"])
    assert rc == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "py-spy" in ln and not ln.startswith(BAR_LINE)]
    assert len(err) == 1 and str(missing) in err[0] and "not found" in err[0]
    for variant in VARIANTS:
        d = out / variant
        assert (d / f"{variant}.pstats").is_file()
        assert len(profiling.read_top_functions(d / "top_functions.csv")) == profiling.DEFAULT_TOP  # the command's default
        assert (d / "trace.json").is_file() and (d / "torch_ops.csv").is_file()
        assert not (d / "flame.svg").exists() and not (d / "speedscope.json").exists()
        assert "py-spy: **skipped**: py-spy not found at" in (d / "profile.md").read_text()
    assert "## Skipped" in (out / "profile.md").read_text()


@pytest.mark.subprocess
def test_py_spy_without_ptrace_permission_is_skipped_once(
    tiny_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # An executable that answers like py-spy in a container without CAP_SYS_PTRACE.
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\necho 'Error: Failed to attach: Operation not permitted (os error 1)' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "prof"
    rc = cli.main(["profile", "--tool", "py-spy", "--tool", "cprofile", "--checkpoint", str(tiny_snapshot),
                   "--py-spy", str(fake), "--out", str(out), "--warmup", "0", "--construct", "empty"])
    assert rc == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if "py-spy" in ln and not ln.startswith(BAR_LINE)]
    assert len(err) == 1 and "ptrace not permitted" in err[0], err
    for variant in VARIANTS:
        assert (out / variant / "top_functions.csv").is_file()
        assert not (out / variant / "trace.json").exists()  # torch was not asked for
        assert "ptrace not permitted" in (out / variant / "profile.md").read_text()
        assert json.loads((out / variant / "load.json").read_text())["construct"] == "empty"  # --construct reached the loads


# --------------------------------------------------------------------------- bad input, library, worker


def test_bad_input_is_one_line_error(tiny_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from omni_loader.token2wav.checkpoint import open_snapshot

    snap = open_snapshot(tiny_snapshot)
    with pytest.raises(OmniLoaderError, match="unknown profiling tool 'gprof'"):
        profiling.profile_variants(snap, "both", ["gprof"], tmp_path / "a")
    with pytest.raises(OmniLoaderError, match="unknown variant"):
        profiling.profile_variants(snap, "fastest", "all", tmp_path / "a")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert cli.main(["profile", "--checkpoint", str(tiny_snapshot), "--out", str(a_file)]) == 2
    assert cli.main(["profile", "--checkpoint", str(tiny_snapshot), "--rate", "0", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"omni-loader: error: --out {a_file} exists and is not a directory",
                   "omni-loader: error: --rate 0: must be a whole number from 1 to 10,000 samples per second (py-spy "
                   "never starts sampling at 0, and above 10,000 it cannot take samples as fast as it counts them: "
                   "every time comes out too small)"]
    with pytest.raises(OmniLoaderError, match="pstats file not found"):
        profiling.state_dict_primitive_calls(tmp_path / "none.pstats")


@pytest.mark.subprocess
def test_library_api_returns_paths_and_frames(tiny_snapshot: Path, tmp_path: Path) -> None:
    from omni_loader.token2wav.checkpoint import open_snapshot

    options, settings = LoadOptions(layout="transformers", device="cpu"), ProfileSettings(top=9, warmup=0)
    profiles = profiling.profile_variants(open_snapshot(tiny_snapshot), "optimized", "cprofile", tmp_path, options,
                                          settings, top=5)  # a keyword overrides one field of the settings
    vp = profiles["optimized"]
    assert set(profiles) == {"optimized"}
    assert vp.reference["layout"] == "transformers" and "layout transformers" in (tmp_path / "profile.md").read_text()
    assert vp.files["pstats"] == tmp_path / "optimized" / "optimized.pstats" and vp.files["pstats"].is_file()
    assert vp.state_dict_calls == {"primitive": 0, "ncalls": 0, "counter": 0}
    shares = vp.phase_shares()
    assert abs(shares["share"].sum() - 1) < 1e-9 and set(LEAF_PHASES) <= set(shares["phase"])
    assert len(profiling.read_top_functions(tmp_path, "optimized")) == 5
    assert not vp.top_costs(3).empty
    assert (tmp_path / "profile.md").is_file() and "py-spy" not in (tmp_path / "optimized" / "profile.md").read_text()


def test_worker_repeat_option(tiny_snapshot: Path, tmp_path: Path, tiny_named_buffers: int) -> None:
    out = tmp_path / "w.json"
    call = worker.WorkerCall(worker.LoadRequest(str(tiny_snapshot), "baseline", digest=False), str(out), repeat=2)
    argv = worker.worker_command(call, tmp_path / "req.json")
    assert worker.main(argv[3:]) == 0
    data = json.loads(out.read_text())
    assert data["repeat"] == 2 and len(data["repeat_total_seconds"]) == 2
    assert data["state_dict_calls"] == tiny_named_buffers and data["digest"] == ""


def test_auto_repeat_aims_at_enough_samples() -> None:
    assert profiling.auto_repeat(10.0, 250) == 1
    assert profiling.auto_repeat(0.04, 250) == 25
    assert profiling.auto_repeat(0.001, 250) == profiling.MAX_AUTO_REPEAT


# --------------------------------------------------------------------------- settings, overrides, shapes


def test_keywords_override_single_fields_of_the_options_and_settings() -> None:
    """runner.py and notebook 02 pass loose keywords (layout=, device=, top=...); each overrides one field."""
    options, settings = profiling.with_overrides(LoadOptions(dtype="bfloat16"), ProfileSettings(top=3, rate=100),
                                                 {"layout": "transformers", "top": 5, "repeat": None})
    assert options == LoadOptions(layout="transformers", dtype="bfloat16")
    assert settings == ProfileSettings(top=5, rate=100)
    assert profiling.with_overrides(None, None, {}) == (LoadOptions(), ProfileSettings())
    with pytest.raises(TypeError, match="'rows'"):
        profiling.with_overrides(None, None, {"rows": 3})
    with pytest.raises(OmniLoaderError, match="--layout"):
        profiling.with_overrides(None, None, {"layout": "flat"})


@pytest.mark.parametrize(("changes", "message"), [
    ({"top": 0}, "--top must be at least 1, not 0"),
    ({"rate": 0}, "--rate 0: must be a whole number from 1 to 10,000 samples per second"),
    ({"rate": 10**9}, "--rate 1000000000: must be a whole number from 1 to 10,000 samples per second"),
    ({"repeat": 0}, "--repeat must be at least 1, not 0"),
    ({"warmup": -1}, "--warmup must be 0 or more, not -1"),
])
def test_settings_are_checked_with_one_line_naming_the_option(changes: dict, message: str) -> None:
    with pytest.raises(OmniLoaderError, match=message):
        ProfileSettings(**changes)
    with pytest.raises(OmniLoaderError, match=message):
        ProfileSettings().replace(**changes)


def test_settings_repeat_is_given_or_aims_at_enough_samples() -> None:
    assert ProfileSettings(repeat=4).repeat_for(0.001) == 4
    assert ProfileSettings(rate=250).repeat_for(0.04) == profiling.auto_repeat(0.04, 250) == 25
    assert ProfileSettings(py_spy=Path("/x/py-spy")).py_spy == "/x/py-spy"  # a path is kept as text


def test_markdown_tables_right_align_numbers_and_format_columns() -> None:
    import pandas as pd

    from omni_loader.profiling.outputs import frame_markdown

    df = pd.DataFrame({"function": ["a|b", "c"], "calls": [3, 12], "ms": [1.23456, float("nan")]})
    assert frame_markdown(df, {"ms": "{:.2f}"}).splitlines() == [
        "| function | calls | ms |", "| --- | ---: | ---: |", "| a\\|b | 3 | 1.23 |", "| c | 12 | nan |"]


# --------------------------------------------------------------------------- sentences beside 02's tables


def _reference_profiles(tmp_path: Path, phases: dict[str, dict[str, float]]):
    from omni_loader.profiling.notes import Profiles
    from omni_loader.profiling.result import VariantProfile

    for v in phases:
        (tmp_path / v).mkdir(exist_ok=True)
    return Profiles({v: VariantProfile(v, tmp_path / v, reference={"phases": {**p, "total": sum(p.values())}})
                     for v, p in phases.items()})


def test_the_phase_shares_say_which_untouched_phase_differs_most_and_that_it_is_noise(tmp_path: Path) -> None:
    """02's phase shares: Construction 1,144 ms (baseline) against 1,759 ms (optimized) in the median runs, more than
    buffer discovery's saving, and nothing said so. The sentence names the phase the change does not touch whose
    medians differ most, against the changed phase's saving, and says the difference is the machine's, not the fix's;
    with other figures, another phase and "less"."""
    profiles = _reference_profiles(tmp_path, {
        "baseline": {"construct": 1.144, "buffer_discovery": 0.2, "load_parameters": 0.7},
        "optimized": {"construct": 1.759, "buffer_discovery": 0.001, "load_parameters": 0.71}})
    said, = profiles.phase_notes()
    assert said == (
        f"Of the phases the loader change does not touch, {LABELS['construct']} differs most between the two median "
        "runs: 1,144.00 ms (baseline) against 1,759.00 ms (optimized), 615.00 ms more in the optimized run, more than "
        f"{LABELS['buffer_discovery']}'s saving of 199.00 ms. Both variants run the same "
        f"{LABELS['construct'].lower()} code, so that difference is this machine's noise between runs, not the fix; "
        "notebook 01's runs, more of them, say how large that noise is.")
    other = _reference_profiles(tmp_path, {
        "baseline": {"construct": 1.0, "buffer_discovery": 0.2, "load_parameters": 0.75},
        "optimized": {"construct": 1.01, "buffer_discovery": 0.001, "load_parameters": 0.7}})
    said, = other.phase_notes()
    assert (f"{LABELS['load_parameters']} differs most between the two median runs: 750.00 ms (baseline) against "
            "700.00 ms (optimized), 50.00 ms less in the optimized run, less than") in said, said
    assert _reference_profiles(tmp_path, {"baseline": {"construct": 1.0}}).phase_notes() == []


def _torch_files(directory: Path, phases: dict[str, float], ops: dict[str, float]) -> None:
    """A variant's trace.json (a phase:: range per phase, seconds) and torch_ops.csv (self CPU ms per operator)."""
    import pandas as pd

    events = [{"name": f"phase::{p}", "ph": "X", "cat": "user_annotation", "ts": 0, "dur": round(s * 1e6)}
              for p, s in phases.items()]
    (directory / "trace.json").write_text(json.dumps({"traceEvents": events}))
    rows = [("phase::total", 1, 1.0, 1.0), *((n, 3, ms, ms) for n, ms in ops.items())]
    frame = pd.DataFrame(rows, columns=["name", "calls", "self_cpu_ms", "cpu_total_ms"])
    (directory / "torch_ops.csv").write_text(frame.to_csv(index=False))


def test_the_torch_tables_say_which_load_was_slower_there_and_what_else_explains_it(tmp_path: Path) -> None:
    """Under torch.profiler the optimized load came out slower ("Load parameters" 713.556 against 2,063.412 ms,
    aten::copy_ 668 against 2,010 ms), against its unprofiled runs, with no word beside the table. The sentence says
    which load was slower there, in which phase and operator, whether the unprofiled runs agree, what else explains
    it (one load each, first touches on this VM, the profiler's overhead), and that the timed medians carry the claim;
    true either way round, from the files."""
    profiles = _reference_profiles(tmp_path, {"baseline": {"construct": 1.0, "buffer_discovery": 0.3},
                                              "optimized": {"construct": 1.0, "buffer_discovery": 0.001}})
    assert profiles.torch_notes() == []  # torch.profiler did not run: nothing to say
    _torch_files(tmp_path / "baseline", {"total": 3.0, "construct": 1.2, "buffer_discovery": 0.9,
                                         "load_parameters": 0.713556}, {"aten::copy_": 668.0, "aten::fill_": 300.0})
    _torch_files(tmp_path / "optimized", {"total": 3.5, "construct": 1.3, "buffer_discovery": 0.001,
                                          "load_parameters": 2.063412}, {"aten::copy_": 2010.0, "aten::fill_": 290.0})
    said, = profiles.torch_notes()
    assert said.startswith(
        "Under torch.profiler the optimized load was the slower one: 3,500.000 ms against the baseline load's "
        f"3,000.000 ms, most of the gap in {LABELS['load_parameters']} (2,063.412 ms against 713.556 ms), and of the "
        "operators `aten::copy_`'s self CPU time differed most that way (2,010.000 ms against 668.000 ms). Unprofiled, "
        "their median runs were 1,001.000 ms (optimized) and 1,300.000 ms (baseline): the other way round."), said
    assert all(w in said for w in ("one profiled load per variant", "host page fault", "torch.profiler's own overhead"))
    assert said.endswith("The timed A/B medians (notebook 01), not one profiled load, carry the claim.")
    _torch_files(tmp_path / "optimized", {"total": 2.0, "construct": 1.1, "buffer_discovery": 0.001,
                                          "load_parameters": 0.7}, {"aten::copy_": 600.0, "aten::fill_": 290.0})
    said, = profiles.torch_notes()
    assert said.startswith("Under torch.profiler the baseline load was the slower one: 3,000.000 ms against the "
                           f"optimized load's 2,000.000 ms, most of the gap in {LABELS['buffer_discovery']} "), said
    assert ": the same order." in said
