"""The notebooks' A/B tables and cProfile's names as a reader sees them: one number a cell in the unit its header
names, the accounting of a row's saving adding up, the verdict in a word, names broken only at dots and slashes.

Each table is read back from its HTML (what Lab shows), cell by cell, and held against numbers computed here from
the same rows, never typed: ``report.md``'s figures are tested in test_report and test_controls.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from omni_loader.notebook import ab_tables, sections
from omni_loader.reporting.controls import control_report
from omni_loader.reporting.measurements import label
from omni_loader.reporting.stats import compare, phase_summary
from test_controls import _frame
from test_report import _arms_results

ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S)


def cells(styler) -> list[list[str]]:
    """The table's rows (header first) as the text of each cell, tags dropped, a line break kept as a newline."""
    rows = []
    for row in ROW.findall(styler.to_html()):
        rows.append([unescape(re.sub(r"<[^>]+>", "", c.replace("<br>", "\n"))).strip() for c in CELL.findall(row)])
    return rows


def by_first_cell(styler) -> dict[str, dict[str, str]]:
    header, *rows = cells(styler)
    return {r[0]: dict(zip(header, r)) for r in rows}


def ms(seconds: float) -> str:
    """A time as a table cell shows it: ms, 3 decimals, and a minus sign (not a hyphen) when negative."""
    return f"{seconds * 1e3:,.3f}".replace("-", "\u2212")


@pytest.fixture(scope="module")
def arms_dir(tmp_path_factory) -> Path:
    return _arms_results(tmp_path_factory.mktemp("arms") / "res")


def test_a_rows_saving_is_taken_apart_in_a_table_whose_parts_add_up():
    """The optimized arm's load_parameters 0.2 s slower (a control): the saving table gives each enclosing row's
    saving, the changed step's, the controls' and the rest, in ms, each as computed; the rows that contain the
    control are confounded by it, and the control's own row says so."""
    frame = _frame(slower={"load_parameters": 0.2})
    report = control_report(frame)
    shown = by_first_cell(ab_tables.saving_table(report))
    header = cells(ab_tables.saving_table(report))[0]
    assert header == ["row", "saving (ms)", "changed: Buffer discovery (ms)", "controls (ms)", "between phases (ms)",
                      "controls inside", "confounded by"]
    assert list(shown) == [label(r.phase) for r in report.rows]
    assert [r.phase for r in report.rows] == ["weight_loading", "total"]  # the rows time no outer load_weights
    for account in report.rows:
        row = shown[label(account.phase)]
        assert row["saving (ms)"] == ms(account.saving)
        assert row["changed: Buffer discovery (ms)"] == ms(account.changed_saving)
        assert row["controls (ms)"] == ms(account.controls_saving)
        assert row["between phases (ms)"] == ms(account.remainder)
        parts = [float(row[c].replace(",", "").replace("\u2212", "-")) for c in header[2:5]]
        saving = float(row["saving (ms)"].replace(",", "").replace("\u2212", "-"))
        assert sum(parts) == pytest.approx(saving, abs=0.002)  # rounding only
        assert row["controls inside"] == str(len(account.controls))
        assert row["confounded by"] == "Load parameters"
    assert shown["Whole Token2Wav load"]["controls (ms)"].startswith("\u2212")  # a loss keeps its sign: a minus

    controls = by_first_cell(ab_tables.control_table(report))
    slowed = controls["Load parameters"]
    c = compare(phase_summary(frame, "baseline", "load_parameters"), phase_summary(frame, "optimized", "load_parameters"))
    assert slowed["verdict"] == "slower" and slowed["saving (ms)"] == ms(-c.difference)
    assert slowed["baseline median (ms)"] == ms(c.baseline.median)
    assert slowed["95% CI of the saving (ms)"] == f"{ms(-c.ci_high)}\u00a0…\u00a0{ms(-c.ci_low)}"  # unbroken
    assert slowed["inside"] == "confounds weight loading, whole load"
    assert controls["Construction"]["baseline median (ms)"].startswith("1,00")  # thousands separated, 1 s in ms
    assert controls["Construction"]["inside"] == "whole load"  # not a confounder: it did not move


def test_an_ab_table_holds_one_number_a_cell_and_the_verdict_in_a_word(arms_dir):
    """``mine`` against ``baseline`` (3 + 3 runs, every range apart): the counts in their own table, the times in
    ms with the unit in the header, the saving and its share, the ratio, and "no claim" on one line (3 + 3 runs
    cannot reach p < 0.05), where report.md writes the sentence."""
    from omni_loader.results.integrity import check_results

    checked = check_results(arms_dir)
    counts, times = ab_tables.pair_tables(checked.frame, checked.suite, "baseline", "mine")
    assert cells(counts) == [["measurement", "baseline median", "mine median", "saving", "verdict"],
                             ["Calls to state_dict()", "51", "0", "51", "deterministic"]]  # the time tables' sense
    rows = by_first_cell(times)
    assert list(rows) == ["Buffer discovery", "Token2Wav weight loading", "Whole Token2Wav load"]  # mine: no load_parameters
    for phase, name in (("buffer_discovery", "Buffer discovery"), ("total", "Whole Token2Wav load")):
        c = compare(phase_summary(checked.frame, "baseline", phase), phase_summary(checked.frame, "mine", phase))
        row = rows[name]
        assert row["baseline median (ms)"] == ms(c.baseline.median) and row["mine median (ms)"] == ms(c.optimized.median)
        assert row["saving (ms)"] == ms(-c.difference)
        assert row["saving (%)"] == f"{-100 * c.difference / c.baseline.median:,.1f}".replace("-", "\u2212")
        assert row["baseline ÷ mine"] == f"{c.ratio:,.2f}×"  # as the PR table writes a ratio
        assert row["mine min–max (ms)"] == f"{ms(c.optimized.min)}\u00a0…\u00a0{ms(c.optimized.max)}"
        assert row["baseline min–max (ms)"] == f"{ms(c.baseline.min)}\u00a0…\u00a0{ms(c.baseline.max)}"  # both sides
        assert row["verdict"] == "no\u00a0claim"  # non-breaking: a verdict never wraps
    assert rows["Whole Token2Wav load"]["baseline median (ms)"] == "9,100.000"
    assert rows["Whole Token2Wav load"]["saving (ms)"].startswith("\u2212")  # mine is slower there


def test_the_notebook_sections_show_tables_not_markdown_walls(arms_dir):
    """01's controls and results and 05's beyond-the-PR section: tables (Stylers) and short Markdown, no pipe
    table; the PR's rows promised by 05's heading are there, each pair under its heading, the verdict rule once a pair."""
    from omni_loader.reporting.controls import pair_reports
    from omni_loader.results.integrity import check_results

    beyond = sections.results(arms_dir).beyond_the_pr("assign", "mine")
    controls = sections.results(arms_dir).controls()
    for shown in (beyond, controls, sections.results(arms_dir).tables()):
        text = [x for x in shown if isinstance(x, str)]
        assert not any("\n|" in x or x.startswith("|") for x in text), [x[:80] for x in text if "|" in x]
        assert sum(1 for x in shown if not isinstance(x, str)) >= 2
    headings = [x.split("\n")[0] for x in beyond if isinstance(x, str) and x.startswith("#")]
    assert headings == ["### `assign` against `baseline`, the benchmark's first variant",
                        "### `mine` against `baseline`, the benchmark's first variant", "### `mine` against `assign`"]
    assert "**The PR's rows** (`baseline` against `optimized`)" in beyond
    assert sum(1 for x in beyond if isinstance(x, str) and x.startswith("*saving*")) == 2  # the PR's rows, the pair
    pairs = [x.split("\n")[0] for x in controls if isinstance(x, str) and x.startswith("###")]
    checked = check_results(arms_dir)
    # assign changes both timed leaves, so it has no control in these rows, and no table
    assert pairs == [f"### `{r.first}` against `{r.second}`" for r in pair_reports(checked.frame, checked.suite)] \
        == ["### `baseline` against `optimized`", "### `baseline` against `mine`"]


def test_a_functions_name_sits_over_its_file_and_breaks_only_at_dots_and_slashes(tmp_path):
    """cProfile's ``file:line(function)``: the function first, its file and line under it; an identifier with
    underscores (qwen2_5_omni, __init__) is never given a break opportunity; a built-in keeps its one name."""
    from omni_loader.formatting import name_and_file
    from omni_loader.profiling.tables import name_over_file, top_function_table

    path = "transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py"
    assert name_over_file(f"{path}:3653(__init__)") == f"__init__\n{path}:3653"
    assert name_over_file("{built-in method builtins.next}") == "{built-in method builtins.next}"
    assert name_over_file("~:0(<method 'copy_' of 'torch._C.TensorBase' objects>)") == \
        "<method 'copy_' of 'torch._C.TensorBase' objects>"
    html = name_and_file(f"__init__\n{path}:3653")
    assert html.startswith("__init__<br>")
    pieces = html.split("<br>", 1)[1]
    assert re.sub(r"<[^>]+>", "", pieces.replace("<wbr>", "")) == f"{path}:3653"
    broken_after = [p[-1] for p in re.sub(r"</?span[^>]*>", "", pieces).split("<wbr>")[:-1]]
    assert broken_after and set(broken_after) <= {".", "/"}
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "top_functions.csv").write_text(
        "function,ncalls,primitive_calls,tottime,cumtime\n"
        f"{path}:3653(__init__),2174,2174,0.0029228,1.2345678\n{{built-in method builtins.next}},79,51,4.5e-05,0.019\n")
    header, first, second = cells(top_function_table(tmp_path, "baseline"))
    assert header == ["function (file:line)", "all calls (with recursion)", "primitive calls", "own (ms)",
                      "cumulative (ms)"]  # cProfile's "ncalls" in words
    assert first == [f"__init__\n{path}:3653", "2,174", "2,174", "2.923", "1,234.568"]
    assert second[0] == "{built-in method builtins.next}" and second[3] == "0.045"


def test_every_phase_table_keeps_each_range_on_one_line(arms_dir):
    """01's "Every phase" table: each phase's min … max of both variants and the interval of the saving in ms, the
    ends joined by non-breaking spaces (as the A/B tables' ranges), so a range never breaks across lines; the phase's
    name breaks only between its words."""
    from omni_loader.reporting.measurements import comparisons
    from omni_loader.results.integrity import check_results

    comps = [c for c in comparisons(check_results(arms_dir).frame) if c.unit == "s"]
    header, *rows = cells(sections.phase_table(comps))
    assert len(rows) == len(comps) >= 3
    ranges = [h for h in header if "min–max" in h or "CI of the saving" in h]
    assert len(ranges) == 3
    for c, row in zip(comps, rows):
        shown = dict(zip(header, row))
        assert shown["phase"] == label(c.phase)
        two = lambda v: f"{v * 1e3:,.2f}".replace("-", "−")  # noqa: E731 - two decimals of a ms, a true minus
        assert shown["baseline min–max (ms)"] == f"{two(c.baseline.min)}\u00a0…\u00a0{two(c.baseline.max)}"
        assert shown["optimized min–max (ms)"] == f"{two(c.optimized.min)}\u00a0…\u00a0{two(c.optimized.max)}"
        assert shown["baseline (ms)"] == two(c.baseline.median) and shown["baseline ÷ optimized"] == f"{c.ratio:,.2f}×"
        # the saving (baseline − optimized), as the controls' tables give it: Δ median's interval negated and swapped
        ci = next(h for h in ranges if "CI of the saving" in h)
        assert shown[ci] == f"{two(-c.ci_high)}\u00a0…\u00a0{two(-c.ci_low)}", (shown[ci], c.ci_low, c.ci_high)
        for h in ranges:
            assert " " not in shown[h] and "\n" not in shown[h], (h, shown[h])  # no breakable space in any range
    # a phase's name breaks at its spaces only: no <wbr> after a "_" or "(" (the ranges leave that column narrow)
    from dataclasses import replace

    named = [replace(comps[0], phase="hub_check"), *comps[1:]]  # "Hub check (spk_dict.pt through huggingface_hub)"
    names = re.findall(r'<td[^>]*class="data row\d+ col0"[^>]*>(.*?)</td>', sections.phase_table(named).to_html())
    assert [unescape(n) for n in names] == [label(c.phase) for c in named]
    assert "_" in names[0] and "(" in names[0]


def test_06s_stage_table_holds_one_number_a_cell_and_says_the_shared_reason_once(monkeypatch):
    """06's A/B by stage and phase: medians and saving in ms with the unit in the header (a cell held "2,000.406 ms"
    and broke between number and unit), the verdict in a word, and the reason no row of 3 + 3 runs can be a claim in
    the caption, once; a saving that rounds to zero shows as 0.000, never -0.000."""
    import omni_loader.startup.serve_ab as serve_ab
    from omni_loader.notebook.stages import Starts
    from omni_loader.reporting.stats import Summary

    def c(phase, a, b):
        return compare(Summary("baseline", phase, a), Summary("optimized", phase, b))

    comps = [("stage-0", "model_loading", c("model_loading", (2.0004, 2.0001, 2.0009), (2.0037, 2.0030, 2.0040))),
             ("stage-0", "init_engine", c("init_engine", (1e-6, 1.2e-6, 0.9e-6), (1.1e-6, 1e-6, 1.3e-6))),
             ("stage-2", "token2wav_weight_loading", c("t", (0.0361, 0.0350, 0.0370), (0.0059, 0.0055, 0.0060)))]
    monkeypatch.setattr(serve_ab, "stage_phase_comparisons", lambda out, frame=None: comps)
    styler = Starts("unused").comparison_table()
    header, *rows = cells(styler)
    assert header == ["stage", "phase", "baseline median (ms)", "optimized median (ms)", "saving (ms)", "saving (%)",
                      "verdict"]
    from omni_loader.startup.timeline_plot import phase_words

    for (lane, phase, comp), row in zip(comps, rows):
        assert row[:4] == [lane, phase_words(phase), ms(comp.baseline.median), ms(comp.optimized.median)]
        assert row[6] == "no\u00a0claim"
    assert rows[0][4] == ms(-comps[0][2].difference) and rows[1][4] == "0.000"  # -0.0001 ms: not "-0.000"
    assert ("No row can be a claim: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can)."
            in styler.to_html())
    assert styler.caption.index("<br>") < 60  # one short bold line; the notes in plain text under it


def test_a_verdict_is_one_phrase_that_never_wraps_and_the_legend_says_its_rule_once(arms_dir):
    """01's verdict cell once read "no difference claimed" over three lines: each verdict is a word or a short phrase
    whose spaces do not break, and the legend under the tables names exactly the words the tables use, in bold."""
    from omni_loader.reporting.measurements import comparisons
    from omni_loader.reporting.stats import NoiseFloor, Summary
    from omni_loader.results.integrity import check_results

    def c(a, b):
        return compare(Summary("baseline", "buffer_discovery", a), Summary("optimized", "buffer_discovery", b))

    apart = c(tuple(1.0 + i / 100 for i in range(6)), tuple(0.5 + i / 100 for i in range(6)))
    cases = {"faster": apart, "no claim": c((1.0, 1.1, 0.9), (0.5, 0.6, 0.4)), "too few runs": c((1.0,), (0.5,))}
    words = {name: ab_tables.verdict_word(comp) for name, comp in cases.items()}
    assert {name: w.replace("\u00a0", " ") for name, w in words.items()} == {name: name for name in cases}
    assert not any(" " in w for w in words.values()), words  # every space non-breaking
    legend = ab_tables.verdict_legend()
    assert re.findall(r"\*\*(.+?)\*\*", legend) == list(ab_tables.VERDICT_WORDS)
    assert "no difference claimed" not in legend and legend.count("**no claim**") == 1
    # the Every-phase table holds a verdict to the phase's A/A floor, as the PR's rows and report.md do
    wide = NoiseFloor("buffer_discovery", Summary("aa-1", "buffer_discovery", (0.5, 0.5, 0.5)),
                      Summary("aa-2", "buffer_discovery", (1.5, 1.5, 1.5)), -1.0, 1.0)
    floored = by_first_cell(sections.phase_table([apart], {"buffer_discovery": wide}))
    assert floored["Buffer discovery"]["verdict"] == "no\u00a0claim" == ab_tables.verdict_word(apart, wide)
    shown = sections.results(arms_dir).tables()
    checked = check_results(arms_dir)
    verdicts = [row["verdict"] for table in shown if not isinstance(table, str)
                for row in by_first_cell(table).values() if "verdict" in row]
    assert verdicts and all(" " not in v for v in verdicts), verdicts
    assert {v.replace("\u00a0", " ") for v in verdicts} <= {*ab_tables.VERDICT_WORDS, "deterministic", "varies"}
    assert len(comparisons(checked.frame)) >= 3


def test_the_spread_warnings_are_one_paragraph_computed_from_the_runs(arms_dir):
    """01's spread warnings were one line per phase and variant (about 25 lines) copied out of report.md: here one
    paragraph says how many of the timed phases are above the threshold and each one's IQR ÷ median in both variants,
    the figures report.md lists, and where the lines are."""
    from omni_loader.reporting.measurements import comparisons
    from omni_loader.reporting.stats import HIGH_SPREAD, Summary
    from omni_loader.results.integrity import check_results

    def c(phase, a, b):
        return compare(Summary("baseline", phase, a), Summary("optimized", phase, b))

    comps = [c("buffer_discovery", (1.0, 1.5, 2.0, 2.5), (1.0, 1.01, 1.02, 1.03)),
             c("construct", (1.0, 1.01, 1.02, 1.03), (1.0, 1.01, 1.02, 1.03)),
             c("load_parameters", (1.0, 1.01, 1.02, 1.03), (1.0, 2.0, 3.0, 4.0)),
             compare(Summary("baseline", "state_dict_calls", (51,)), Summary("optimized", "state_dict_calls", (0,)),
                     unit="calls")]
    line = ab_tables.spread_line(comps)
    assert "\n" not in line and line.startswith("**Spread warnings**: in 2 of 3 timed phases")
    assert f"above {100 * HIGH_SPREAD:.0f}% of its median" in line
    for comp in (comps[0], comps[2]):
        shares = [f"{100 * s.relative_iqr:.0f}%" for s in (comp.baseline, comp.optimized)]
        assert f"{label(comp.phase)} {shares[0]}\u00a0/\u00a0{shares[1]}" in line, (comp.phase, shares)
    assert "Construction" not in line and ab_tables.spread_line(comps[1:2]) == ""
    opening = sections.results(arms_dir).opening()
    flagged = [comp for comp in comparisons(check_results(arms_dir).frame) if comp.notes]
    assert flagged, "the fixture has no high spread to show"
    assert "spread is high" not in opening and opening.count("**Spread warnings**") == 1
    assert ab_tables.spread_line(comparisons(check_results(arms_dir).frame)) in opening
    assert len(opening.split("**Spread warnings**")[1].strip().splitlines()) == 1


def test_02s_summary_sits_under_the_notebooks_heading_without_the_tables_it_shows_above(tmp_path):
    """profile.md opens with its own H1 and repeats the phase-share table and the state_dict() counts that notebook 02
    shows as tables above it: in the notebook its title is gone (the notebook's "## Where the time goes" says it), the
    two repeats are gone, the sentence setting discovery beside the whole load stays, and its sections are ###; the
    file keeps everything."""
    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile
    from omni_loader.profiling.summary import PHASE_SHARES, STATE_DICT_CALLS, read_summary, write_summary_report

    def profile(variant: str, discovery: float) -> VariantProfile:
        (tmp_path / variant).mkdir()
        phases = {"construct": 0.04, "buffer_discovery": discovery, "load_parameters": 0.002, "total": 0.05 + discovery}
        return VariantProfile(variant, tmp_path / variant, reference={"phases": phases},
                              state_dict_calls={"primitive": 51 if variant == "baseline" else 0, "ncalls": 99,
                                                "counter": 51 if variant == "baseline" else 0})

    profiles = Profile({"baseline": profile("baseline", 0.04), "optimized": profile("optimized", 0.001)}, tmp_path)
    write_summary_report(profiles, tmp_path)
    whole, shown = read_summary(tmp_path, tmp_path), profiles.where_time_goes(tmp_path)
    assert whole.startswith("# Where the time goes") and PHASE_SHARES in whole and STATE_DICT_CALLS in whole
    headings = re.findall(r"^(#+) (.*)$", shown, re.M)
    assert headings and all(level == "###" for level, _ in headings), headings
    assert [h for _, h in headings] == [h for level, h in re.findall(r"^(#+) (.*)$", whole, re.M)
                                        if level == "##" and not ("## " + h).startswith((PHASE_SHARES, STATE_DICT_CALLS))]
    assert "(`buffer_discovery`) |" in whole and "|" not in shown  # the phase-share table once, in the notebook's cell
    assert "primitive calls" in whole and "primitive calls" not in shown
    discovery = next(line for line in whole.splitlines() if line.startswith("Buffer discovery, "))
    assert discovery in shown and "per-variant details in [`baseline/profile.md`](baseline/profile.md)" in shown


def test_a_rows_name_in_the_ab_tables_breaks_between_its_words_only(arms_dir):
    """05's counts table broke "Calls to state_dict()" after "state_" and before ")": the A/B tables' row names (the
    counts, the times, the controls, the saving taken apart) are plain text breaking at their spaces only, as 01's
    Every-phase table's phase names."""
    from omni_loader.results.integrity import check_results

    checked = check_results(arms_dir)
    report = control_report(_frame(slower={"load_parameters": 0.2}))
    tables = [*ab_tables.pair_tables(checked.frame, checked.suite, "baseline", "mine"),
              ab_tables.saving_table(report), ab_tables.control_table(report)]
    names = [name for t in tables if not isinstance(t, str)
             for name in re.findall(r'<td[^>]*class="data row\d+ col0"[^>]*>(.*?)</td>', t.to_html())]
    assert "Calls to state_dict()" in names and len(names) >= 8
    assert not [n for n in names if "<wbr>" in n], names


def test_a_sentence_cell_keeps_each_quantity_whole_and_its_words_free_to_wrap(arms_dir):
    """01's "Beside earlier runs" cells are compare.md's sentences ("27.995 ms [27.995–27.995] → 0.961 ms [0.961–0.961];
    29.13x; faster"): in Lab a range broke at its dash. Each quantity is kept whole (a non-breaking space before its
    unit, a range as "a … b" with non-breaking spaces, as the notebook's other tables write it) while the spaces
    between them still let the sentence wrap."""
    cell = "27.995 ms [27.995–28.100] → 0.961 ms [−0.961–0.970]; 29.13x [28.50–30.01]; faster than 5 runs"
    kept = ab_tables.whole_quantities(cell)
    assert kept == ("27.995\u00a0ms [27.995\u00a0…\u00a028.100] → 0.961\u00a0ms [−0.961\u00a0…\u00a00.970]; 29.13x "
                    "[28.50\u00a0…\u00a030.01]; faster than 5 runs")
    assert ab_tables.whole_quantities(3.5) == 3.5
    html = sections.results(arms_dir).side_by_side([])[0].to_html()
    ranges = re.findall(r"\[[^\]<]*\d[^\]<]*\]", unescape(html))
    assert ranges and all("\u00a0…\u00a0" in r and "–" not in r for r in ranges), ranges  # one notation for a range
    assert not re.search(r"\d (ms|s|µs)\b", unescape(html)), "a number and its unit may break apart"


def _frame_dir(frame, out: Path) -> Path:
    from test_report import _write_results

    runs = [(g["variant"].iloc[0], dict(zip(g["phase"], g["seconds"])), "d") for _, g in frame.groupby("run_id")]
    return _write_results(out, runs)


def test_the_picture_of_where_time_goes_says_whether_the_shared_phases_differ(tmp_path):
    """01's Lab run drew construction 1,639 ms against 1,005 ms under prose saying the rest is what both variants
    pay: the line under the picture says which shared phases differ here, with their medians, or that none does."""
    slow = _frame_dir(_frame(slower={"load_parameters": 0.2}), tmp_path / "slow")
    said = sections.results(slow).shared_phases()
    b, o = (_frame(slower={"load_parameters": 0.2}).query("phase == 'load_parameters'")
            .groupby("variant")["seconds"].median()[["baseline", "optimized"]])
    from omni_loader.formatting import short_duration

    assert said.startswith("Only Buffer discovery differs in code, yet here 1 of the 10 phases both variants run "
                           "unchanged differs too: ")
    assert f"Load parameters {short_duration(b)} → {short_duration(o)}." in said
    clean = sections.results(_frame_dir(_frame(), tmp_path / "clean")).shared_phases()
    assert clean.startswith("Here no phase but Buffer discovery differs") and "what both variants pay" in clean
    # 2 ms of a 300 ms phase: a difference the test claims, far under what confounds a row; said as such, not as
    # bars that "differ by more than the fix" (01 said that of controls that moved 0.1 ms)
    tiny = sections.results(_frame_dir(_frame(slower={"load_parameters": 0.002}), tmp_path / "tiny")).shared_phases()
    assert "differs too by the kit's test (Load parameters" in tiny and "too little to change what the bars say" in tiny
    assert "more than the fix" not in tiny
    # the sixth Lab pass saw construction 300 ms longer in one bar beside "no phase differs": the widest shared gap is
    # named with its medians, and said to be within its runs' spread
    from omni_loader.reporting.measurements import label
    from omni_loader.reporting.stats import compare, phase_summary

    frame = _frame()
    gaps = {p: compare(phase_summary(frame, "baseline", p), phase_summary(frame, "optimized", p)) for p in
            ("construct", "read_checkpoint", "load_parameters", "load_buffers")}
    widest = max(gaps.values(), key=lambda c: abs(c.difference))
    assert (f"the widest gap between their shared segments, {label(widest.phase)} "
            f"{short_duration(widest.baseline.median)} → {short_duration(widest.optimized.median)}, is within its "
            "runs' spread") in clean, clean
    few = _frame(slower={"load_parameters": 0.2})
    few = few[few["run_id"].isin(sorted(few["run_id"].unique())[:6])]  # 3 + 3 runs: no test can claim
    assert "cannot be told from 3 + 3 runs" in sections.results(_frame_dir(few, tmp_path / "few")).shared_phases()


def test_a_confounded_row_is_said_whole_where_no_controls_section_follows(tmp_path):
    """05 showed "Confounded (see Controls): ..." and has no Controls section: the line says what confounding means."""
    from omni_loader.results.integrity import check_results

    checked = check_results(_frame_dir(_frame(slower={"load_parameters": 0.2}), tmp_path / "slow"))
    said = [t for t in ab_tables.pair_tables(checked.frame, checked.suite, "baseline", "optimized")
            if isinstance(t, str)]
    assert len(said) == 1 and said[0].startswith("Confounded: Token2Wav weight loading by Load parameters")
    assert "see Controls" not in said[0] and "differed by at least 1% of the row" in said[0]


def _profiled(out: Path, variant: str, load: float, unprofiled: float, zero: float, copy: float) -> None:
    """A variant's cProfile top functions and reference load as ``profile`` writes them (only the rows read)."""
    import json

    (out / variant).mkdir(parents=True)
    (out / variant / "top_functions.csv").write_text(
        "function,ncalls,primitive_calls,tottime,cumtime\n"
        f"omni_loader/token2wav/loader.py:184(load_token2wav),1,1,0.02,{load}\n"
        f"{{method 'zero_' of 'torch._C.TensorBase' objects}},720,720,{zero},{zero}\n"
        f"{{method 'copy_' of 'torch._C.TensorBase' objects}},809,809,{copy},{copy}\n")
    (out / variant / "load.json").write_text(json.dumps({"phases": {"total": unprofiled}}))


def test_profiled_loads_ranked_against_their_unprofiled_runs_are_explained_beside_the_table(tmp_path) -> None:
    """Second Lab pass: 02's optimized load took 4,512 ms under cProfile against the baseline's 2,451 ms, the reverse
    of the unprofiled runs, with nothing beside the table. Now a sentence says so with the memory work's times,
    read from the files; where the profiled order agrees with the unprofiled one, none."""
    from omni_loader.formatting import duration
    from omni_loader.notebook.profiles import Profile
    from omni_loader.profiling.result import VariantProfile

    def profiles(out: Path) -> Profile:
        return Profile({v: VariantProfile(v, out / v) for v in ("baseline", "optimized")}, out)

    _profiled(tmp_path, "baseline", 2.450861, 2.308954, 0.329587, 0.215436)
    _profiled(tmp_path, "optimized", 4.512022, 1.613814, 2.158664, 1.896065)
    said = profiles(tmp_path).profiled_against_unprofiled()
    assert said.startswith(f"Profiled, the optimized load took {duration(4.512022)} against the baseline load's "
                           f"{duration(2.450861)}, the other way round from their unprofiled runs above "
                           f"({duration(1.613814)} against {duration(2.308954)})")
    assert f"took {duration(2.158664)} + {duration(1.896065)} (optimized) against {duration(0.329587)} + " \
           f"{duration(0.215436)} (baseline)" in said
    assert profiles(tmp_path).top_functions()[-1] == said  # shown under the two tables

    agrees = tmp_path / "agrees"
    _profiled(agrees, "baseline", 2.45, 2.31, 0.33, 0.22)
    _profiled(agrees, "optimized", 1.5, 1.61, 0.3, 0.2)
    assert profiles(agrees).profiled_against_unprofiled() is None


def reference_alignment(markdown: str) -> list[str]:
    return [c.strip() for c in markdown.splitlines()[1].strip().strip("|").split("|")]


def test_01s_memory_and_pr_tables_head_their_columns_as_its_other_tables_do(arms_dir):
    """The Lab pass: 01's memory table read "Baseline median … 3,512 MiB–3,512 MiB" beside tables headed in lower
    case with a range as "a … b". The memory table is the notebook's kind (units in the headers, one figure where a
    range's ends are alike); report.md's Markdown tables shown in 01 head their columns in lower case, acronyms kept."""
    statement, memory = sections.results(arms_dir).equivalence_and_memory()
    assert statement.startswith(("equivalent", "NOT equivalent", "not"))
    html = unescape(memory.to_html())
    header = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*col_heading[^>]*>(.*?)</th>", html)]
    assert header == ["memory", "baseline median (MiB)", "baseline min–max (MiB)", "optimized median (MiB)",
                      "optimized min–max (MiB)", "verdict"], header
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert cells and not [c for c in cells if "MiB" in c or "–" in c], cells  # a range's cell is "a … b", no unit
    # the PR rows beside this run: numbers aligned right in every column but the measurement's
    assert reference_alignment(sections.results(arms_dir).pr_reference()) == ["---"] + ["---:"] * 6
    reference = sections.results(arms_dir).pr_reference()
    assert reference.splitlines()[0] == ("| measurement | PR baseline | PR optimized | PR ratio | this run baseline "
                                         "| this run optimized | this run ratio |")
    assert sections.results(arms_dir).environment().splitlines()[0] == "| item | value |"
    assert sections.lower_headers("| A | CPU |\n| --- | --- |\n| Big | Small |") == "| A | CPU |\n| --- | --- |\n| Big | Small |"
