"""What a person reads: number formats, tables, progress bars, flamegraphs, the device and results place.

Each helper is checked on inputs whose right output is known by hand: the figures from the issue
that asked for them (``2.596139`` s, ``5.129299e+12``, ``7.198605e-01``), a speedscope file written
here with known stacks, a progress bar driven step by step into a string buffer.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from omni_loader.host import devices
from omni_loader import formatting, progress
from omni_loader.notebook import files as notebooks
from omni_loader.profiling import flamegraph
from omni_loader.errors import DeviceError, OmniLoaderError
from omni_loader.reporting.report_environment import command_text

# --------------------------------------------------------------------------- plain text


@pytest.mark.parametrize(("seconds", "text"), [
    (2.596139, "2,596 ms"), (0.806, "806 ms"), (0.001746, "1.75 ms"), (42.6e-6, "42.6 µs"), (541e-9, "541 ns"),
    (12.3, "12.3 s"), (0.0, "0 ms"), (float("nan"), "n/a"), (None, "n/a"),
])
def test_short_duration_picks_a_unit_that_keeps_three_digits(seconds, text) -> None:
    assert formatting.short_duration(seconds) == text


def test_the_parts_of_a_whole_in_seconds_are_said_in_seconds() -> None:
    """04 printed "forward pass 27.3 s: DiT 21.0 s, BigVGAN 6,362 ms": the parts take the whole's unit."""
    unit = formatting.time_unit(27.3)
    assert [formatting.short_duration(x, unit) for x in (21.04, 6.362, 0.05)] == ["21.0 s", "6.36 s", "0.0500 s"]
    assert formatting.short_duration(6.362, formatting.time_unit(6.362)) == "6,362 ms"


def test_a_count_says_its_noun_in_the_number_it_has() -> None:
    """Findings said "1 row(s) of runs.csv have"; now "1 row", "2 rows", "1,092 runs", "0 starts"."""
    assert [formatting.count(n, noun) for n, noun in ((1, "row"), (2, "row"), (1092, "run"), (0, "start"))] == [
        "1 row", "2 rows", "1,092 runs", "0 starts"]
    assert [formatting.count(n, "entry", "entries") for n in (3, 1)] == ["3 entries", "1 entry"]


def test_duration_has_fixed_decimals_thousands_and_the_row_unit() -> None:
    assert formatting.duration(0.378176) == "378.176 ms"
    assert formatting.duration(1.099526) == "1,099.526 ms"
    assert formatting.duration(12.3) == "12.300 s"
    assert formatting.duration(0.5, "s") == "0.500 s"


def test_numbers_never_use_scientific_notation() -> None:
    for value in (5.129299e12, 239_000.0, 7.198605e-01, 0.000541, 1e-9, 123456789.123):
        assert "e" not in formatting.number(value).lower(), value
    assert formatting.number(5.129299e12) == "5,129,299,000,000"
    assert formatting.number(0.000541) == "0.000541"
    assert formatting.percent(7.198605e-01) == "72.0%"
    assert formatting.count(1923743744) == "1,923,743,744"
    assert formatting.mib(1923743744) == "1,834.6 MiB"
    assert formatting.times(203.4) == "203×"


def test_code_keeps_dunder_names_from_turning_bold() -> None:
    assert formatting.code("torch/nn/modules/module.py:1971(__setattr__)") == "`torch/nn/modules/module.py:1971(__setattr__)`"
    assert formatting.code("a`b") == "``a`b``"


def test_command_text_names_a_notebook_run_and_its_shell_equivalent() -> None:
    meta = {"command_line": "ipykernel_launcher.py -f /tmp/tmpab12.json --HistoryManager.hist_file=:memory:",
            "kind": "reproduce", "spec": {"checkpoint": "/snap", "layout": "vllm-omni", "device": "cpu", "warmup": 1,
                                          "runs": 5, "order": "alternate", "workers": "in-process"}}
    text = command_text(meta)
    assert "ipykernel" not in text and "/tmp/tmp" not in text
    assert text.startswith("a notebook (Jupyter kernel)")
    assert "`omni-loader reproduce --checkpoint /snap --layout vllm-omni --device cpu --warmup 1 --runs 5 " \
           "--order alternate --workers in-process`" in text
    assert command_text({"command_line": "omni-loader reproduce --size tiny"}) == \
        "`omni-loader reproduce --size tiny`"


# --------------------------------------------------------------------------- tables


def test_table_puts_the_unit_in_the_column_name_and_formats_every_cell() -> None:
    df = pd.DataFrame({"phase": ["construct", "buffer_discovery"], "median": [2.596139, 0.001746],
                       "share": [0.7198605, 0.0004], "bytes": [1923743744, 12], "ts_us": [5.129299e12, 5.129299e12 + 1]})
    html = formatting.table(df, seconds=["median"], percent=["share"]).to_html()
    assert ">median (ms)</th>" in html
    for shown in (">2,596.139<", ">1.746<", ">72.0%<", ">0.0%<", ">1,923,743,744<", ">5,129,299,000,000<"):
        assert shown in html, shown
    assert not re.search(r"\d[eE][+-]\d", html)
    assert "2.596139" not in html
    assert df.loc[0, "median"] == 2.596139  # the frame itself is untouched


def test_table_wraps_long_names_instead_of_cutting_them() -> None:
    name = "transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py:3653(__init__)"
    html = formatting.table(pd.DataFrame({"function": [name], "calls": [1]})).to_html()
    visible = re.sub(r"<wbr>", "", html)
    assert name.replace("<", "&lt;") in visible  # whole, escaped
    assert "modeling_<wbr>qwen2_<wbr>5_<wbr>omni.<wbr>py:<wbr>3653(<wbr>__init__)" in html
    assert "..." not in visible and "…" not in visible
    html_root = formatting.table(pd.DataFrame({"owner": ["<root>"]})).to_html()
    assert "&lt;root&gt;" in html_root  # text is escaped, not taken for a tag


def test_a_header_in_words_breaks_at_its_spaces_never_after_a_ranges_dash() -> None:
    """01's headers broke in Lab as "baseline min–" over "max (ms)": a word that holds a range's dash is unbreakable,
    the label's spaces still break (the column stays narrow), and the visible text is the label as written."""
    html = formatting.table(pd.DataFrame({"baseline min–max (ms)": ["1\u00a0…\u00a02"], "n": [1]})).to_html()
    header = re.search(r"<th [^>]*>(baseline.*?)</th>", html).group(1)
    assert header == 'baseline <span style="white-space: nowrap">min–max</span> (ms)'
    assert re.sub(r"<[^>]+>", "", header) == "baseline min–max (ms)"


def test_table_never_breaks_a_number_at_its_decimal_point_or_thousands_separator() -> None:
    """A narrow column once showed "1. 564 ms" and "p=0. 00794": a break opportunity inside a number."""
    cell = "1,564.123 ms [3.073–5.688]; p=0.00794; ROCm 7.2.53211; resblocks.3.activations, then"
    html = formatting.table(pd.DataFrame({"cell": [cell]})).to_html()
    for whole in ("1,564.123 ms", "[3.073–5.688]", "p=0.00794", "ROCm 7.2.53211"):
        assert whole in html, whole
    assert "resblocks.<wbr>3.<wbr>activations,<wbr> then" in html  # names still wrap at their parts


def test_table_unit_switches_to_seconds_for_slow_columns_and_rejects_unknown_columns() -> None:
    html = formatting.table(pd.DataFrame({"total_seconds": [12.5, 9.0]}), seconds=["total_seconds"]).to_html()
    assert ">total (s)</th>" in html and ">12.500<" in html
    with pytest.raises(KeyError, match="no column 'nope'"):
        formatting.table(pd.DataFrame({"a": [1]}), seconds=["nope"])


def test_key_values_shows_a_dict_without_reprs() -> None:
    from omni_loader.notebook.showing import key_values

    html = key_values({"synthetic": {"size": "tiny", "seed": 0}, "model_id": None,
                                  "shards": ["model-00001-of-00001.safetensors"]}).to_html()
    assert "{" not in re.sub(r"<style.*?</style>", "", html, flags=re.S) and "None" not in html and "[" not in html
    assert "size:" in html and "seed:" in html and "—" in html
    assert ">model id<" in html and "model_id" not in html  # the key in words


# --------------------------------------------------------------------------- progress


def _drive(total: int, steps: int | None = None, **kwargs) -> list[str]:
    buf = io.StringIO()
    bar = progress.LineProgress(total=total, desc="synth full", file=buf, mininterval=0, ascii=True, ncols=80, **kwargs)
    for _ in range(steps if steps is not None else total):
        bar.update(1)
    bar.close()
    return buf.getvalue().splitlines()


def test_line_progress_writes_a_handful_of_complete_lines_ending_at_the_final_count() -> None:
    lines = _drive(719)
    assert 2 <= len(lines) <= progress.LINE_STEPS + 1
    assert all("\r" not in line for line in lines)
    assert lines[0].startswith("synth full:   0%")
    assert "100%" in lines[-1] and "719/719" in lines[-1]


def test_line_progress_last_line_says_where_an_unfinished_bar_stopped() -> None:
    lines = _drive(100, steps=76, leave=False)
    assert "76/100" in lines[-1] and len(lines) <= progress.LINE_STEPS + 1


def test_progress_mode_outside_a_kernel_and_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.progress_mode(io.StringIO()) == "lines"  # not a terminal: a log or a pipe
    monkeypatch.setenv(progress.ENV, "off")
    assert progress.progress_mode() == "off"
    bar = progress.progress_bar(total=3, desc="x")
    assert bar.disable
    monkeypatch.setenv(progress.ENV, "sparkles")
    with pytest.raises(ValueError, match="OMNI_LOADER_PROGRESS"):
        progress.progress_mode()


# --------------------------------------------------------------------------- devices


def test_auto_resolves_to_what_torch_sees_and_never_stays_auto() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert devices.resolve_device("auto").type == expected
    assert "chosen by device='auto'" in devices.device_banner("auto")
    assert devices.device_banner("cpu").startswith("device: cpu")
    with pytest.raises(DeviceError, match="not one of auto, cpu, cuda"):
        devices.resolve_device("tpu")
    with pytest.raises(DeviceError):
        devices.resolve_device("auto:0")


@pytest.mark.subprocess
@pytest.mark.slow
def test_reproduce_records_the_resolved_device(tiny_snapshot: Path, tmp_path: Path) -> None:
    from omni_loader.token2wav.checkpoint import open_snapshot
    from omni_loader.results.suite import benchmark, read_metadata
    from omni_loader.results.rows import read_runs
    from omni_loader.bench.runner import benchmark_spec
    from omni_loader.job import reproduce
    from omni_loader.token2wav.options import LoadOptions

    spec = benchmark_spec(open_snapshot(tiny_snapshot), LoadOptions(device="auto"), warmup=0, runs=1,
                          workers="in-process")
    out = reproduce(spec, tmp_path / "r", progress=False)
    record = benchmark(read_metadata(out), "load")
    resolved = str(devices.resolve_device("auto"))
    assert record.load_options["device"] == resolved and record["environment"]["device"] == resolved
    assert "auto" not in json.dumps(record["spec"]) and len(read_runs(out))


def test_cli_device_default_is_auto() -> None:
    from omni_loader.cli import parse_args

    args = parse_args(["load"])
    assert args.device == "auto" and "device" not in args.explicit


def test_typed_options_are_known_from_marked_defaults_alone() -> None:
    """What --resume compares: the options typed, a default's value typed included, and nothing else; every
    setting a resume compares is declared with a marked default (a bare command has typed nothing)."""
    from omni_loader.cli import parse_args
    from omni_loader.cli.reproduce import CHECKPOINT_DESTS, SPEC_DESTS
    from omni_loader.cli.serve import SPEC_DESTS as SERVE_DESTS

    bare = parse_args(["reproduce"])
    assert bare.explicit == set() and set(SPEC_DESTS) | set(CHECKPOINT_DESTS) <= set(vars(bare))
    assert (bare.runs, bare.workers, bare.variants, bare.aa, bare.cpus) == (10, "forkserver", ("baseline", "optimized"),
                                                                            False, "auto")
    typed = parse_args(["reproduce", "--runs", "10", "--spawn", "--aa", "--layout", "transformers", "--size", "tiny"])
    assert typed.explicit == {"runs", "workers", "aa", "layout", "size"} and typed.workers == "spawn"
    serve = parse_args(["serve-ab", "--out", "x"])
    assert serve.explicit == {"out"} and set(SERVE_DESTS) <= set(vars(serve)) and serve.grace == 10.0
    assert parse_args(["serve-ab", "--out", "x", "--grace", "5", "--log-pattern", "a=b(1)"]).explicit == {
        "out", "grace", "log_pattern"}


# --------------------------------------------------------------------------- flamegraphs


def _speedscope(path: Path) -> Path:
    """Stacks: start-up imports, the load's own _modeling import, a recursive state_dict tower, an
    import inside the load, and load_parameters; 1 ms per sample."""
    names = ["<module>", "_find_and_load", "run_load", "load_token2wav", "_modeling", "find_persistent_buffers",
             "Module.state_dict", "load_speaker_dict", "load_parameters"]
    frames = [{"name": n, "file": f"/x/omni_loader/{n}.py" if n != "Module.state_dict" else "/x/torch/module.py",
               "line": 1} for n in names]
    i = {n: k for k, n in enumerate(names)}
    stacks = (
        [[i["<module>"], i["_find_and_load"]]] * 50  # imports before the load: left out
        + [[i["run_load"], i["load_token2wav"], i["_modeling"], i["_find_and_load"]]] * 20  # model code import: out
        + [[i["run_load"], i["load_token2wav"], i["find_persistent_buffers"]] + [i["Module.state_dict"]] * 6] * 6
        + [[i["run_load"], i["load_token2wav"], i["load_speaker_dict"], i["_find_and_load"], i["<module>"]]] * 1
        + [[i["run_load"], i["load_token2wav"], i["load_parameters"]]] * 3
    )
    data = {"shared": {"frames": frames},
            "profiles": [{"name": "t", "samples": stacks, "weights": [0.001] * len(stacks)}]}
    path.write_text(json.dumps(data))
    return path


def test_flamegraph_keeps_only_the_load_and_folds_recursion_and_imports(tmp_path: Path) -> None:
    flame = flamegraph.build(_speedscope(tmp_path / "s.json"))
    assert (flame.samples_total, flame.samples_kept) == (80, 10)
    root = flame.root
    assert root.name == "load_token2wav" and root.samples == 10
    kids = {c.name: c for c in root.children.values()}
    assert set(kids) == {"find_persistent_buffers", "load_speaker_dict", "load_parameters"}
    tower = kids["find_persistent_buffers"]
    assert [c.name for c in tower.children.values()] == ["Module.state_dict"]
    assert not next(iter(tower.children.values())).children  # six recursive frames are one
    assert [c.name for c in kids["load_speaker_dict"].children.values()] == [flamegraph.IMPORT]
    assert root.depth() == 3
    assert "10 of 80 samples" in flame.note() and "without the one-time model-code import (import_model_code() / _modeling())" in flame.note()


def test_flamegraph_svg_is_interactive_and_sized_to_fit(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    flame = flamegraph.build(_speedscope(tmp_path / "s.json"), title="test")
    svg = ET.parse(flamegraph.svg(flame, tmp_path / "flame.svg")).getroot()
    assert svg.get("width") == "100%"
    height = float(svg.get("viewBox").split()[3])
    assert height == flamegraph.HEADER + 3 * flamegraph.ROW + flamegraph.PAD  # three rows: the load's depth
    ns = "{http://www.w3.org/2000/svg}"
    titles = [t.text for t in svg.iter(f"{ns}title")]
    assert any(t.startswith("find_persistent_buffers") and "60.0% of the load's samples" in t for t in titles)
    assert any("zoom" in (s.text or "") for s in svg.iter(f"{ns}script"))
    html = flamegraph.FlameView(flame, link_from=tmp_path)._repr_html_()
    assert '<a href="s.json" download>speedscope.json</a>' in html and "<script>" in html


def test_flamegraph_without_load_samples_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"shared": {"frames": [{"name": "main"}]},
                                "profiles": [{"samples": [[0]], "weights": [1.0]}]}))
    with pytest.raises(OmniLoaderError, match="no samples under load_token2wav"):
        flamegraph.build(path)


# --------------------------------------------------------------------------- where results go, signing


def test_results_go_under_the_repository_root_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    monkeypatch.delenv(notebooks.RESULTS_ENV, raising=False)
    repo = Path(__file__).resolve().parent.parent
    assert notebooks.results_root() == repo / "results"
    assert notebooks.results_dir("traversal", stamp=False) == repo / "results" / "traversal"
    assert re.fullmatch(r"notebook01-\d{8}-\d{6}", notebooks.results_dir("notebook01").name)
    assert notebooks.results_dir("x", out_dir=tmp_path / "mine") == (tmp_path / "mine").resolve()
    monkeypatch.setenv(notebooks.RESULTS_ENV, str(tmp_path))
    assert notebooks.results_root() == tmp_path.resolve()


def test_a_signed_notebook_is_trusted_and_a_changed_one_is_not(tmp_path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    nb = new_notebook(cells=[new_code_cell("1", outputs=[new_output("execute_result", {"text/html": "<b>1</b>"},
                                                                     execution_count=1)])])
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    assert not notebooks.is_trusted(path)
    notebooks.sign(path)
    assert notebooks.is_trusted(path)
    nb.metadata["changed"] = True
    nbformat.write(nb, path)
    assert not notebooks.is_trusted(path)


def test_execute_refuses_a_parameter_the_notebook_does_not_declare(tmp_path: Path) -> None:
    with pytest.raises(OmniLoaderError, match="has no parameter 'sise'"):
        notebooks.execute("04", tmp_path / "x.ipynb", {"sise": "tiny"})
    with pytest.raises(OmniLoaderError, match="no single notebook matches"):
        notebooks.find_notebook("99")


def test_table_hides_row_positions_but_keeps_a_meaningful_index() -> None:
    """03's ``.tail(8)`` and 05's filtered frames showed their leftover row numbers as a bare column."""
    frame = pd.DataFrame({"source": ["a", "b", "c"], "N": [1, 2, 3]})
    tail = formatting.table(frame.tail(2)).to_html()
    assert ">b<" in tail and "row_heading" not in tail  # no index cells at all
    named = formatting.table(frame.set_index("source")).to_html()
    assert "row_heading" in named and ">a<" in named
    assert "row_heading" in formatting.table(frame.tail(2), index=True).to_html()


def _text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&lt;", "<").replace("&gt;", ">")


def test_a_name_in_a_code_column_never_breaks_inside() -> None:
    """03's and 04's class and rule names broke after their "_" (``Qwen2_`` over ``5OmniSnakeBeta``): a ``code`` column
    shows each name whole in ``<code>`` (no break opportunity, and ``white-space: nowrap``), breakable only between
    items and after a dot of a qualified name; in an item of words only the names (words with a "_") are code; an
    index named in ``code`` likewise; a header in words keeps its names whole, a bare identifier header still breaks."""
    frame = pd.DataFrame({
        "class": ["Qwen2_5OmniSnakeBeta", "ModuleList"],
        "most common classes": ["Qwen2_5OmniAMPBlock\u00a0×18, ModuleList\u00a0×7", "Conv1d\u00a0×2"],
        "buffer": ["code2wav_dit_model.rotary_embed.inv_freq", "<root>"],
        "flagged by rule_hazards()": ["block (DropsBufferOnSave): overrides _save_to_state_dict", "(none)"],
        "local_name": ["inv_freq", "filter"], "n": [1, 2]})
    styler = formatting.table(frame, code=["class", "most common classes", "buffer", "flagged by rule_hazards()"])
    html = re.sub(r"<style.*?</style>", "", styler.to_html(), flags=re.S)
    cells = re.findall(r'<td[^>]*class="data row(\d) col(\d)"[^>]*>(.*?)</td>', html)
    shown = {(int(r), int(c)): cell for r, c, cell in cells}
    names = re.findall(r"<code>(.*?)</code>", html)
    for name in names:  # no break opportunity inside a name but after a dot before a letter, every part unbreakable
        parts = name.split(".<wbr>")
        assert all(re.fullmatch(r'<span style="white-space: nowrap">[^<]*</span>', p) for p in parts), name
    assert shown[0, 0] == '<code><span style="white-space: nowrap">Qwen2_5OmniSnakeBeta</span></code>'
    assert _text_of(shown[0, 1]) == frame.iloc[0, 1] and shown[0, 1].count("<code>") == 2
    assert _text_of(shown[0, 2]) == "code2wav_dit_model.rotary_embed.inv_freq" and shown[0, 2].count("<wbr>") == 2
    assert _text_of(shown[1, 2]) == "<root>"
    prose = shown[0, 3]
    assert prose.startswith("block (DropsBufferOnSave): overrides <code>") and _text_of(prose) == frame.iloc[0, 3]
    assert shown[1, 3] == "(none)"  # not a name
    assert "inv_<wbr>freq" in shown[0, 4]  # a text column not named in code is as before
    headers = re.findall(r'<th[^>]*col_heading[^>]*>(.*?)</th>', html)
    assert "flagged by rule_hazards()" in headers and "local_<wbr>name" in headers
    indexed = formatting.table(frame[["class", "n"]].set_index("class"), code=["class"]).to_html()
    assert '<code><span style="white-space: nowrap">Qwen2_5OmniSnakeBeta</span></code></th>' in indexed
    assert "Qwen2_<wbr>" not in html + indexed


def test_a_column_of_truth_values_reads_yes_and_no() -> None:
    """03's placement, 04's buffer and 05's audit tables showed Python's True/False in their cells."""
    frame = pd.DataFrame({"agree": [True, False], "inside the fitted range": [True, None], "n": [1, 0]})
    html = re.sub(r"<style.*?</style>", "", formatting.table(frame).to_html(), flags=re.S)
    assert "True" not in html and "False" not in html and "None" not in html
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", html)
    assert cells == ["yes", "yes", "1", "no", "", "0"]


def test_a_plot_names_the_model_size_its_baseline_counted() -> None:
    """01's plots say "full-size" or "tiny" from the baseline's state_dict() calls (one per named buffer): the table
    they read holds each layout's B of each size, as the model code counts them, and a count it does not know is said
    as a count, never guessed."""
    from omni_loader.reporting.plots import MODEL_BY_BUFFERS, model_size_words
    from omni_loader.token2wav.model import inventory

    for layout in ("vllm-omni", "transformers"):
        for size, words in (("full", "full-size"), ("tiny", "tiny")):
            assert MODEL_BY_BUFFERS[inventory(layout, size).named_buffers] == words
    assert model_size_words(219.0) == "full-size Token2Wav" and model_size_words(51) == "tiny Token2Wav"
    assert model_size_words(7) == "Token2Wav (7 buffers)" and model_size_words(float("nan")) == "Token2Wav"


def test_a_discovery_ratio_is_said_with_its_model_runs_and_condition(tmp_path: Path) -> None:
    """kit.discovery_ratios: the PR's row from its table (the released model, 5 + 5 alternating after 1
    warm-up), the quotient of two figures taken apart into B × one state dict ÷ the optimized rule, which multiply
    back to it; the newest saved benchmark is found among results directories, none when there is none."""
    from omni_loader.notebook import sections

    table, said = sections.discovery_ratios()
    frame = table.data
    assert list(frame["figure"]) == ["the PR (its table)"]
    row = frame.iloc[0]
    assert row["model"] == "Qwen/Qwen2.5-Omni-3B (released weights)" and row["B (state dicts)"] == 219
    assert row["runs (baseline + optimized)"] == "5 + 5, alternating, after 1 warm-up each"
    assert row["baseline ÷ optimized"] == "292×" and "MI300X" in row["condition"]
    assert sections.results(root=tmp_path) is None and sections.saved_runs(root=tmp_path) == []
    for name, metadata in {
        "a": {"schema_version": 3, "benchmarks": {"load": {
            "kind": "reproduce", "status": "complete", "started_at": "2026-01-01T00:00:00+00:00"}}},
        "b": {"schema_version": 2, "kind": "reproduce", "status": "complete",  # an older kit's: load at the top
              "started_at": "2026-02-01T00:00:00+00:00"},
        "c": {"schema_version": 3, "benchmarks": {"load": {"kind": "reproduce", "status": "complete",
                                                           "started_at": 5}}},  # not written by the kit: passed over
        "d": {"schema_version": 3, "benchmarks": {"load": {
            "kind": "reproduce", "status": "interrupted", "started_at": "2026-03-01T00:00:00+00:00"}}},
    }.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.json").write_text(json.dumps(metadata))
    assert sections.saved_runs(root=tmp_path) == [tmp_path / "b", tmp_path / "a"]  # complete ones, newest first
    # there against here: B 219 against 51, one state dict 0.002 against 0.003, the optimized rule 0.0015 against 0.005
    words = sections._largest_factor([(219 / 51, 0.002 / 0.003, 0.0015 / 0.005)])
    assert "the model's size (B)" in words and "4.29 times" in words
