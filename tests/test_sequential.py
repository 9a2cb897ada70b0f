"""The sequential design: looks, the stop rule, the error rate each look spends, and a benchmark that stops."""

from __future__ import annotations

import pandas as pd
import pytest

from omni_loader.bench.runner import run_benchmark
from omni_loader.results.spec import BenchmarkSpec
from omni_loader.results.integrity import check_results
from omni_loader.results.planner import FIRST_LOOK, LOOK_ALPHAS, look_alpha, looks
from omni_loader.results.suite import Suite, benchmark, read_metadata
from omni_loader.reporting.report import render_report
from omni_loader.reporting.sequential import design_alpha, design_sentence, look_at, settled
from test_controls import _frame

TEXT_ONLY_REPORTS = True  # report.md without plots here: these tests read its text (conftest._text_only_reports)


def test_looks_are_sequential_only_where_a_stop_leaves_the_arms_balanced():
    assert looks("sequential", 10, "blocks") == (FIRST_LOOK, 10)
    assert looks("sequential", 20, "alternate") == (FIRST_LOOK, 20)
    assert looks("fixed", 10, "blocks") == (10,)
    assert looks("sequential", 10, "shuffle") == (10,)  # not made of rounds: a cut would unbalance the arms
    assert looks("sequential", 10, "blocks", aa=True) == (10,)  # the A/A floor is measured at the full size
    assert looks("sequential", FIRST_LOOK, "blocks") == (FIRST_LOOK,)
    assert looks("sequential", 3, "blocks") == (3,)


def test_the_looks_spend_at_most_the_kits_error_rate():
    assert sum(LOOK_ALPHAS) == pytest.approx(0.05)
    assert look_alpha((10,), 10) == 0.05
    assert (look_alpha((5, 10), 5), look_alpha((5, 10), 10)) == LOOK_ALPHAS
    # five runs a side can reach the first look's error rate (complete separation: p = 2 / C(10, 5))
    assert 2 / 252 < LOOK_ALPHAS[0]


def test_a_clear_pair_with_quiet_controls_is_settled_at_the_first_look():
    ok, why = settled(_frame(runs=FIRST_LOOK), Suite({}), LOOK_ALPHAS[0])
    assert ok, why
    assert why == f"every headline row claimed and no control confounds at α={LOOK_ALPHAS[0]:g}"


def test_a_control_that_differs_keeps_the_benchmark_going():
    ok, why = settled(_frame(slower={"load_parameters": 0.2}, runs=FIRST_LOOK), Suite({}), LOOK_ALPHAS[0])
    assert not ok and why == "control Load parameters (optimized) confounds: it differs by at least 1% of an enclosing row"


def test_a_control_that_differs_too_little_to_confound_does_not():
    ok, why = settled(_frame(slower={"split_buffers": 0.0001}, runs=FIRST_LOOK), Suite({}), LOOK_ALPHAS[0])
    assert ok, why


def test_a_control_is_read_at_the_looks_share_too():
    """A control 0.2 s slower in four of five optimized runs (one below a baseline run: Mann-Whitney p = 4/252, between
    the first look's 0.01 and the fixed design's 0.05) confounds at 0.05, not at the first look's share."""
    frame = _frame(slower={"load_parameters": 0.2}, runs=FIRST_LOOK)
    one = frame[(frame["variant"] == "optimized")]["run_id"].iloc[0]
    lower = 0.3020 - frame[(frame["run_id"] == one) & (frame["phase"] == "load_parameters")]["seconds"].iloc[0]
    frame.loc[(frame["run_id"] == one) & frame["phase"].isin(["load_parameters", "weight_loading", "total"]),
              "seconds"] += lower  # above four baseline runs' 0.3000-0.3018 s, below the fifth's 0.3024 s
    assert settled(frame, Suite({}), LOOK_ALPHAS[0])[0]
    ok, why = settled(frame, Suite({}), 0.05)
    assert not ok and why.startswith("control Load parameters (optimized) confounds")


def test_a_pair_that_runs_the_same_steps_is_never_settled():
    """An A/A pair (both arms the optimized rule) has no headline row: nothing to claim, and no enclosing row is
    asked for either (its leaves meet no changed phase)."""
    frame = _frame(runs=FIRST_LOOK)
    frame = frame[frame["variant"] == "optimized"].copy()
    again = frame.assign(variant="again", run_id=frame["run_id"] + 1000)
    meta = Suite({"spec": {"variants": ["optimized", "again"], "custom_variants": [{"name": "again"}]}})
    ok, why = settled(pd.concat([frame, again]), meta, LOOK_ALPHAS[0])
    assert not ok and why == "optimized and again run the same steps: nothing to claim"


def test_a_headline_row_not_yet_claimed_keeps_the_benchmark_going():
    ok, why = settled(_frame(runs=4), Suite({}), LOOK_ALPHAS[0])  # 4 + 4 runs cannot reach p < 0.01
    assert not ok
    assert why.startswith("Buffer discovery (optimized) not claimed; Token2Wav weight loading (optimized) not claimed")


SETTLED = "settled, as this test says"


def settles(out, n, alpha):
    """A look that settles: what the runner does then is tested here, the stop rule above (in-process loads are
    not independent runs, so a real look's verdict on them is the machine's, not the test's)."""
    return True, SETTLED


@pytest.fixture(scope="module")
def stopped(tiny_snapshot, tmp_path_factory):
    """A sequential benchmark of the PR's pair, in this process, whose first look settles."""
    out = tmp_path_factory.mktemp("seq") / "res"
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=FIRST_LOOK + 2, workers="in-process")
    run_benchmark(spec, out, progress=False, look=settles)
    return spec, out


def test_a_sequential_benchmark_stops_at_the_look_that_settles(stopped):
    spec, out = stopped
    record = benchmark(read_metadata(out), "load")
    assert record["status"] == "complete"
    assert record["sequential"]["stopped_at"] == FIRST_LOOK and record["sequential"]["looks"] == [FIRST_LOOK, 7]
    assert len(record["plan"]) == 2 * (FIRST_LOOK + 1) < len(spec.plan())  # a warm-up and five runs a side
    check = check_results(out)
    assert not check.problems and not check.missing_runs  # the plan is the runs made: nothing is missing
    assert check.frame["run_id"].nunique() == 2 * (FIRST_LOOK + 1)
    assert design_alpha(Suite.read(out)) == LOOK_ALPHAS[0]


def test_the_bar_counts_to_the_first_look_from_its_first_line(tiny_snapshot, tmp_path, monkeypatch):
    """The bar's total is the runs the first look needs from the start (it once said 0/22, then 3/12)."""
    import omni_loader.progress as progress

    made, real = [], progress.progress_bar
    monkeypatch.setattr(progress, "progress_bar", lambda **kw: made.append(kw["total"]) or real(**kw))
    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=1, runs=FIRST_LOOK + 2, workers="in-process")
    run_benchmark(spec, tmp_path / "r", progress=False, look=settles)
    assert made == [2 * (FIRST_LOOK + 1)] and made[0] < len(spec.plan())


def test_its_report_reads_the_verdicts_at_the_looks_share(stopped):
    text = render_report(stopped[1])
    assert f"it stopped after {FIRST_LOOK} a side: {SETTLED}" in text
    # (a saving may print as "3.95%": only the interval's own words are looked for)
    assert "99% CI of Δ median" in text and "95% CI" not in text and "95% percentile" not in text
    assert "p < 0.05" not in text
    assert "a 99% percentile bootstrap interval" in text and "the rank test agrees (p < 0.01)" in text
    assert "The benchmark took " in text


def test_its_written_report_reads_the_verdicts_at_the_looks_share_too(stopped, tmp_path):
    """write_report reads the design's error rate as render_report does: the file is the text rendered."""
    import shutil

    from omni_loader.reporting.report import write_report

    copy = shutil.copytree(stopped[1], tmp_path / "copy")
    assert write_report(copy).read_text() == render_report(copy) and "99% CI of Δ median" in render_report(copy)


def test_a_design_sentence_without_the_looks_seen_still_reads(stopped):
    """A record that kept no look's reason (hand-edited, or cut) says 'settled' or gives no reason: no KeyError."""
    meta = Suite.read(stopped[1])
    seq = meta.benchmark("load")["sequential"]
    seq["seen"] = []
    assert design_sentence(meta).endswith(f"; it stopped after {FIRST_LOOK} a side: settled")
    seq["stopped_at"] = None
    assert f"; not settled after {FIRST_LOOK}, so all {FIRST_LOOK + 2} ran, and every verdict" in design_sentence(meta)


def test_a_sequential_record_without_looks_reads_as_fixed(stopped):
    """A record whose ``sequential`` is not a design (damaged, or of a fixed design) is read at the kit's 0.05."""
    for damaged in ("sequential", {"looks": []}, {}):
        meta = read_metadata(stopped[1])
        meta["benchmarks"]["load"]["sequential"] = damaged  # benchmark() hands out a copy of the record
        assert (design_alpha(Suite(meta)), design_sentence(Suite(meta))) == (0.05, "")


def test_resuming_a_stopped_benchmark_runs_nothing(stopped):
    spec, out = stopped
    before = (out / "runs.csv").read_bytes()
    run_benchmark(spec, out, resume=True, progress=False, look=settles)
    assert (out / "runs.csv").read_bytes() == before


def test_a_look_that_does_not_settle_runs_the_whole_plan(tiny_snapshot, tmp_path):
    seen = []

    def never(out, n, alpha):
        seen.append((n, alpha))
        return False, "not yet"

    spec = BenchmarkSpec(checkpoint=str(tiny_snapshot), warmup=0, runs=FIRST_LOOK + 1, workers="in-process")
    run_benchmark(spec, tmp_path / "r", progress=False, look=never)
    record = benchmark(read_metadata(tmp_path / "r"), "load")
    assert seen == [(FIRST_LOOK, LOOK_ALPHAS[0])]
    assert len(record["plan"]) == len(spec.plan()) and record["sequential"]["stopped_at"] is None
    assert record["sequential"]["seen"] == [{"n": FIRST_LOOK, "settled": False, "why": "not yet"}]
    assert design_alpha(Suite.read(tmp_path / "r")) == LOOK_ALPHAS[1]
    assert design_sentence(Suite.read(tmp_path / "r")) == (
        f"sequential: verdicts read after {FIRST_LOOK} runs a side at α=0.01, else after {FIRST_LOOK + 1} at α=0.04 "
        f"(together at most 0.05: alpha spending); not settled after {FIRST_LOOK} (not yet), so all {FIRST_LOOK + 1} ran, "
        "and every verdict here is read at α=0.04 (96% intervals)")


def test_a_look_reads_the_warmups_and_each_arms_first_runs(stopped, monkeypatch):
    import omni_loader.reporting.sequential as sequential

    read = []
    monkeypatch.setattr(sequential, "settled", lambda frame, meta, alpha: read.append((frame, meta, alpha)) or (True, ""))
    look_at(stopped[1], 3, 0.01)
    assert read[0][1].raw == read_metadata(stopped[1]) and read[0][2] == 0.01  # the record and the look's share
    runs = read[0][0].drop_duplicates("run_id")
    assert sorted(runs[~runs["warmup"]].groupby("variant").size().tolist()) == [3, 3]
    assert runs["warmup"].sum() == 2


def test_typing_runs_asks_for_the_fixed_design(tiny_snapshot):
    from omni_loader.cli import parse_args
    from omni_loader.cli.reproduce import new_spec
    from omni_loader.token2wav.checkpoint import open_snapshot

    snapshot = open_snapshot(tiny_snapshot)
    base = ["reproduce", "--checkpoint", str(tiny_snapshot)]
    assert new_spec(parse_args(base), snapshot).looks == (FIRST_LOOK, 10)
    assert new_spec(parse_args([*base, "--runs", "10"]), snapshot).design == "fixed"
    assert new_spec(parse_args([*base, "--runs", "10", "--design", "sequential"]), snapshot).looks == (FIRST_LOOK, 10)


def test_a_benchmark_recorded_before_the_design_reads_back_fixed(stopped):
    meta = read_metadata(stopped[1])
    record = benchmark(meta, "load")
    del record["spec"]["design"]
    assert BenchmarkSpec.from_metadata(meta).design == "fixed"


def test_the_notebook_face_reads_the_verdicts_at_the_reports_share(stopped):
    """01's tables and legend say what report.md says: a benchmark that stopped at the first look is read at 0.01."""
    from omni_loader.notebook.sections import results

    shown = results(stopped[1]).tables()
    columns = [c for item in shown if hasattr(item, "data") for c in item.data.columns]
    legends = [item for item in shown if isinstance(item, str) and "*verdict*" in item]
    assert "99% CI of the saving (ms)" in columns and not any("95%" in str(c) for c in columns)
    assert legends and all("99% bootstrap interval" in t and "p < 0.01" in t for t in legends)


def test_compare_reads_a_stopped_benchmark_as_its_report_does(stopped):
    from omni_loader.compare.side_by_side import read_entry

    entry = read_entry(stopped[1])
    assert {c.alpha for c in entry.comparisons} == {LOOK_ALPHAS[0]}
