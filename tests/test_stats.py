"""Statistics on samples with hand-computed answers, and the PR's phrasing."""

from __future__ import annotations

from dataclasses import replace

import math

import pandas as pd
import pytest
import scipy.stats  # noqa: F401  (imported here, not per test: make mutation forks its workers after collection)

from omni_loader.reporting.stats import (NoiseFloor, Summary, bootstrap_median_difference, compare, equivalence,
                                         mann_whitney, memory_verdict, phrase_change, ranges_overlap, smallest_p,
                                         summary_table)


def test_summary_quartiles_by_hand():
    s = Summary("baseline", "p", (5.0, 1.0, 4.0, 2.0, 3.0))
    assert (s.n, s.median, s.q1, s.q3, s.iqr, s.min, s.max) == (5, 3.0, 2.0, 4.0, 2.0, 1.0, 5.0)
    even = Summary("baseline", "p", (1.0, 2.0, 3.0, 10.0))
    assert even.median == 2.5  # mean of the two middle values
    assert even.q1 == 1.75 and even.q3 == 4.75  # linear interpolation: 1 + 0.75*(2-1), 3 + 0.25*(10-3)


@pytest.mark.parametrize(
    ("base", "opt", "unit", "text"),
    [
        (0.456946, 0.001564, "s", "455.382 ms faster, 99.66%"),
        (1.099526, 0.620436, "s", "479.090 ms faster, 43.57%"),
        (105.738, 104.322, "s", "1.416 s faster, 1.34%"),
        (0.5, 0.6, "s", "100.000 ms slower, 20.00%"),
        (219, 0, "calls", "Removed 219 calls"),
        (219, 219, "calls", "unchanged"),
        (10, 4, "calls", "6 fewer calls"),
    ],
)
def test_pr_phrasing(base, opt, unit, text):
    assert phrase_change(base, opt, unit) == text


def test_ranges_overlap():
    assert ranges_overlap([1, 3], [2, 4])
    assert ranges_overlap([1, 2], [2, 3])  # touching counts as overlap
    assert not ranges_overlap([1, 2], [2.5, 3])
    assert not ranges_overlap([], [1.0]) and not ranges_overlap([1.0], [])  # each side needs a sample
    assert ranges_overlap((1.0,), (1.0,))


def test_mann_whitney_exact_small_sample():
    # Complete separation of 5 vs 5: exact two-sided p = 2 / C(10, 5) = 2/252.
    p = mann_whitney((1.0, 2.0, 3.0, 4.0, 5.0), (6.0, 7.0, 8.0, 9.0, 10.0))
    assert p == pytest.approx(2 / 252)
    assert mann_whitney((1.0,), (2.0, 3.0)) is None


def test_bootstrap_interval_brackets_the_difference():
    a = (10.0, 10.5, 11.0, 10.2, 10.8)
    b = (1.0, 1.2, 0.9, 1.1, 1.05)
    low, high = bootstrap_median_difference(a, b)
    assert low <= 1.05 - 10.5 <= high
    assert high < 0
    assert bootstrap_median_difference((1.0,), b) is None


def test_comparison_verdicts_and_spread_warning():
    fast = Summary("optimized", "buffer_discovery", (0.00100, 0.00101, 0.00102, 0.00101, 0.00103))
    slow = Summary("baseline", "buffer_discovery", (0.4, 0.41, 0.45, 0.42, 0.43))
    c = compare(slow, fast)
    assert c.significant and c.verdict() == "faster (95% CI of Δ median excludes 0, Mann-Whitney p=0.0119)"
    assert c.pr_rule() == "ranges separate"
    assert c.ratio == pytest.approx(0.42 / 0.00101)
    noisy = Summary("baseline", "total", (1.0, 2.0, 3.0, 4.0, 5.0))
    other = Summary("optimized", "total", (1.5, 2.5, 3.5, 4.5, 5.5))
    c2 = compare(noisy, other)
    assert c2.ranges_overlap and c2.pr_rule() == "ranges overlap: no claim"
    assert c2.verdict() == f"no difference claimed (95% CI of Δ median includes 0 or Mann-Whitney p={c2.p_value:.3g})"
    assert any("spread is high" in n for n in c2.notes)
    assert not any("spread" in n for n in c.notes)


def _frame(rows):
    return pd.DataFrame(rows)


def test_summary_table_and_equivalence_use_measured_ok_rows_only():
    rows = []
    for run_id, variant, warm, secs, status, digest in [
        (0, "baseline", True, 9.0, "ok", "d"),
        (1, "baseline", False, 1.0, "ok", "d"),
        (2, "baseline", False, 3.0, "ok", "d"),
        (3, "optimized", False, 0.5, "ok", "d"),
        (4, "optimized", False, math.nan, "failed", ""),
    ]:
        rows.append(dict(run_id=run_id, variant=variant, warmup=warm, phase="total", seconds=secs, status=status,
                         digest=digest, source="load", weights_loaded=187, persistent_buffers=1))
    frame = _frame(rows)
    table = summary_table(frame).set_index("variant")
    assert table.loc["baseline", "median"] == 2.0 and table.loc["baseline", "n"] == 2
    assert table.loc["optimized", "n"] == 1
    eq = equivalence(frame)
    assert eq["equivalent"] and eq["runs"] == 4
    frame.loc[2, "digest"] = "other"
    assert not equivalence(frame)["equivalent"]


def test_memory_verdict_either_rule_is_enough():
    """'unchanged' when the medians are within 2% OR the ranges overlap: each rule alone suffices."""
    low = Summary("baseline", "rss", (99.9, 100.0, 100.1))
    # Ranges apart (100.1 < 101.0) but medians 1.1% apart: unchanged by the tolerance alone.
    close = Summary("optimized", "rss", (101.0, 101.1, 101.2))
    assert not ranges_overlap(low.samples, close.samples)
    assert memory_verdict(low, close) == "unchanged (within noise)"
    # Medians 10% apart but the ranges overlap: unchanged by the overlap rule alone.
    wide = Summary("baseline", "rss", (90.0, 100.0, 130.0))
    shifted = Summary("optimized", "rss", (95.0, 110.0, 120.0))
    assert ranges_overlap(wide.samples, shifted.samples)
    assert memory_verdict(wide, shifted) == "unchanged (within noise)"
    # Neither: the change is stated with its size, relative to the baseline median.
    far = Summary("optimized", "rss", (110.0, 110.5, 111.0))
    assert memory_verdict(low, far) == "changed by 10.5%"
    assert memory_verdict(far, low) == f"changed by {100 * 10.5 / 110.5:.1f}%"
    assert memory_verdict(low, Summary("optimized", "rss", ())) == "not measured"
    assert memory_verdict(Summary("baseline", "rss", ()), far) == "not measured"


def _digest_frame(digests, weights=None):
    return _frame([dict(run_id=i, variant=v, warmup=False, phase="total", seconds=1.0, status="ok", digest=d,
                        source="load", weights_loaded=(weights or {}).get(v, 187), persistent_buffers=1)
                   for i, (v, d) in enumerate(digests)])


def test_equivalence_refuses_empty_digests():
    """Runs that hashed nothing (e.g. a meta-device load) prove nothing: never 'equivalent'."""
    empty = equivalence(_digest_frame([("baseline", ""), ("optimized", ""), ("baseline", ""), ("optimized", "")]))
    assert empty["equivalent"] is False
    assert empty["statement"].startswith("NOT equivalent")
    half = equivalence(_digest_frame([("baseline", "abc"), ("optimized", "")]))
    assert half["equivalent"] is False
    only_one_variant = equivalence(_digest_frame([("baseline", "abc"), ("baseline", "abc")]))
    assert only_one_variant["equivalent"] is False
    same = equivalence(_digest_frame([("baseline", "ab" * 32), ("optimized", "ab" * 32)]))
    assert same["equivalent"] is True and same["runs"] == 2
    assert same["statement"].startswith(f"equivalent: all 2 runs of both variants loaded identical tensors "
                                        f"(sha256 {'ab' * 8}…")  # a bare hex digest: an older SHA-256 one
    assert same["digests"] == {"baseline": ["ab" * 32], "optimized": ["ab" * 32]}
    # the same tensors, but one variant loaded fewer weights: another load, not an equivalent one
    fewer = equivalence(_digest_frame([("baseline", "ab" * 32), ("optimized", "ab" * 32)], {"optimized": 186}))
    assert fewer["equivalent"] is False and "weights loaded differ" in fewer["statement"]


def test_summary_row_and_table_name_every_statistic():
    s = Summary("baseline", "total", (4.0, 1.0, 3.0, 2.0, 5.0))
    assert s.as_row() == {"variant": "baseline", "phase": "total", "n": 5, "median": 3.0, "q1": 2.0, "q3": 4.0,
                          "iqr": 2.0, "min": 1.0, "max": 5.0}
    rows = [dict(run_id=i, variant=v, warmup=False, phase=p, seconds=x, status="ok", source=src)
            for i, (v, p, x, src) in enumerate([("baseline", "total", 1.0, "load"), ("baseline", "total", 3.0, "load"),
                                                ("optimized", "total", 0.5, "load"),
                                                ("baseline", "total", 40.0, "server")])]
    table = summary_table(_frame(rows))
    assert list(table.columns) == ["source", "variant", "phase", "n", "median", "q1", "q3", "iqr", "min", "max"]
    assert table.to_dict("records") == [
        {"source": "load", "variant": "baseline", "phase": "total", "n": 2, "median": 2.0, "q1": 1.5, "q3": 2.5,
         "iqr": 1.0, "min": 1.0, "max": 3.0},
        {"source": "load", "variant": "optimized", "phase": "total", "n": 1, "median": 0.5, "q1": 0.5, "q3": 0.5,
         "iqr": 0.0, "min": 0.5, "max": 0.5},
        {"source": "server", "variant": "baseline", "phase": "total", "n": 1, "median": 40.0, "q1": 40.0,
         "q3": 40.0, "iqr": 0.0, "min": 40.0, "max": 40.0},  # a server figure is kept apart from the loader's
    ]
    empty = summary_table(_frame([dict(run_id=0, variant="baseline", warmup=True, phase="total", seconds=1.0,
                                       status="ok", source="load")]))
    assert empty.empty and list(empty.columns) == list(table.columns)
    # randomized blocks that measure optimized first: the variants still read in the plan's order (its warm-ups), as
    # every other table lists them (01's summary listed optimized first in the fifth Lab pass)
    blocks = [dict(run_id=i, variant=v, warmup=i < 2, phase="total", seconds=1.0, status="ok", source="load")
              for i, v in enumerate(["baseline", "optimized", "optimized", "baseline", "baseline", "optimized"])]
    assert list(summary_table(_frame(blocks))["variant"]) == ["baseline", "optimized"]


def test_comparison_change_is_phrased_in_its_unit_and_row_unit():
    slow = Summary("baseline", "startup_to_health", (105.738,))
    fast = Summary("optimized", "startup_to_health", (104.322,))
    assert compare(slow, fast).change() == "1.416 s faster, 1.34%"
    assert compare(slow, fast).change("ms") == "1,416.000 ms faster, 1.34%"
    small = compare(Summary("baseline", "x", (1.0,)), Summary("optimized", "x", (0.5,)))
    assert small.change() == "500.000 ms faster, 50.00%" and small.change("s") == "0.500 s faster, 50.00%"
    calls = compare(Summary("baseline", "state_dict_calls", (51.0,)), Summary("optimized", "state_dict_calls", (0.0,)),
                    unit="calls")
    assert calls.change() == "Removed 51 calls" and calls.change("s") == "Removed 51 calls"
    assert calls.p_value is None and calls.verdict() == "deterministic count"
    mem = compare(Summary("baseline", "rss", (2.0**30,)), Summary("optimized", "rss", (2.0**30 + 2**20,)), unit="bytes")
    assert mem.change() == "+1.0 MiB"


def test_run_summary_takes_one_value_per_measured_run_and_skips_blanks():
    from omni_loader.reporting.stats import run_summary

    rows = []
    for run_id, variant, warm, calls, peak in [(0, "baseline", True, 99, 5), (1, "baseline", False, 51, 7),
                                              (2, "optimized", False, 0, 6), (3, "baseline", False, 51, "")]:
        for phase in ("construct", "total"):  # per-run columns repeat on every phase row of the run
            rows.append(dict(run_id=run_id, variant=variant, warmup=warm, phase=phase, seconds=1.0, status="ok",
                             source="load", state_dict_calls=calls, device_peak_bytes=peak))
    rows.append(dict(run_id=4, variant="baseline", warmup=False, phase="total", seconds=1.0, status="ok",
                     source="load", state_dict_calls=7, device_peak_bytes=float("nan")))
    frame = _frame(rows)
    calls = run_summary(frame, "baseline", "state_dict_calls")
    assert calls == Summary("baseline", "state_dict_calls", (51.0, 51.0, 7.0))
    assert run_summary(frame, "optimized", "state_dict_calls").samples == (0.0,)
    assert run_summary(frame, "baseline", "device_peak_bytes").samples == (7.0,)  # '' and nan are not measured


def test_time_unit_switches_to_seconds_at_ten():
    from omni_loader.formatting import format_seconds, time_unit

    assert [time_unit(x) for x in (1.0, 9.999, 10.0, 10.5, -12.0, math.nan, math.inf)] == [
        "ms", "ms", "s", "s", "s", "ms", "ms"]
    assert format_seconds(10.0) == "10.000 s" and format_seconds(9.9994) == "9999.400 ms"
    assert format_seconds(None) == "n/a" and format_seconds(math.inf) == "n/a" and format_seconds(math.nan) == "n/a"
    assert format_seconds(1.099526) == "1099.526 ms" and format_seconds(1.416, time_unit(105.738)) == "1.416 s"
    assert format_seconds(2.0, "s") == "2.000 s" and format_seconds(2.0, "ms") == "2000.000 ms"


def test_summary_edge_cases():
    empty = Summary("baseline", "p", ())
    assert empty.n == 0 and all(math.isnan(x) for x in (empty.median, empty.q1, empty.q3, empty.min, empty.max))
    assert not empty.high_spread
    one = Summary("baseline", "p", (2.0,))
    assert (one.median, one.iqr, one.relative_iqr, one.high_spread) == (2.0, 0.0, 0.0, False)
    zero = Summary("baseline", "p", (0.0, 0.0, 1.0))
    assert zero.median == 0.0 and math.isnan(zero.relative_iqr) and not zero.high_spread
    # spread exactly at the 10% limit is not 'high'; above it is
    at = Summary("baseline", "p", (0.95, 1.0, 1.05))
    assert at.relative_iqr == pytest.approx(0.05) and not at.high_spread
    wide = Summary("baseline", "p", (0.8, 1.0, 1.2))
    assert wide.relative_iqr == pytest.approx(0.2) and wide.high_spread
    assert Summary("baseline", "p", (0.8, 1.2)).high_spread  # two samples are enough to judge


def test_comparison_figures_and_every_verdict():
    base = Summary("baseline", "total", (2.0, 2.1, 2.2))
    opt = Summary("optimized", "total", (1.0, 1.1, 1.2))
    c = compare(base, opt)
    assert c.difference == pytest.approx(-1.0) and c.percent == pytest.approx(100 / 2.1)
    assert c.ratio == pytest.approx(2.1 / 1.1) and not c.ranges_overlap
    assert c.p_value == pytest.approx(0.1) and not c.significant  # 3 + 3 fully separated: p = 2/20
    assert c.verdict() == "no difference claimed: 3+3 runs cannot reach p < 0.05 (their smallest p is 0.1; 4 runs a side can)"
    assert c.pr_rule() == "ranges separate"
    low, high = c.ci_low, c.ci_high
    assert low <= -1.0 <= high
    assert compare(Summary("baseline", "t", (1.0,)), opt).verdict() == "too few runs for a test"
    assert compare(base, Summary("optimized", "t", (1.0,))).verdict() == "too few runs for a test"
    zero = compare(Summary("baseline", "t", (0.0, 0.0)), Summary("optimized", "t", (0.0, 0.0)))
    assert math.isnan(zero.percent) and zero.ratio == math.inf
    varies = compare(Summary("baseline", "c", (3.0, 4.0)), Summary("optimized", "c", (0.0, 0.0)), unit="calls")
    assert varies.verdict() == "count varies between runs" and varies.ci_low is None and varies.notes == []
    noisy = compare(Summary("baseline", "t", (1.0, 2.0, 3.0)), Summary("optimized", "t", (1.0, 2.0, 3.0)))
    assert noisy.notes == ["baseline spread is high: IQR is 50% of the median",
                           "optimized spread is high: IQR is 50% of the median"]
    assert noisy.p_value == 1.0 and noisy.ranges_overlap


def test_phrasing_of_counts_bytes_and_slower_loads():
    assert phrase_change(4, 10, "calls") == "6 more calls"
    assert phrase_change(2**30, 2**30 + 3 * 2**20, "bytes") == "+3.0 MiB"
    assert phrase_change(2**30, 2**30 - 2**19, "bytes") == "-0.5 MiB"
    assert phrase_change(100, 100, "bytes") == "unchanged" and phrase_change(1.5, 1.5) == "unchanged"
    assert phrase_change(0.0, 0.5) == "500.000 ms slower, nan%"
    assert phrase_change(12.0, 11.0) == "1.000 s faster, 8.33%"  # the row's unit comes from the baseline
    assert phrase_change(219, 1, "calls") == "218 fewer calls" and phrase_change(0, 1, "calls") == "1 more call"
    assert phrase_change(12.0, 11.0, row_unit="ms") == "1,000.000 ms faster, 8.33%"


def test_mann_whitney_of_identical_values_and_bootstrap_seed():
    assert mann_whitney((1.0, 1.0), (1.0, 1.0)) == 1.0
    assert mann_whitney((1.0, 2.0), (1.0,)) is None
    a, b = (1.0, 1.2, 1.1, 1.3), (2.0, 2.2, 2.1, 2.4)
    assert bootstrap_median_difference(a, b) == bootstrap_median_difference(a, b, seed=0)
    assert bootstrap_median_difference(a, (1.0,)) is None
    narrow = bootstrap_median_difference(a, b, confidence=0.5)
    wide = bootstrap_median_difference(a, b, confidence=0.99)
    assert wide[0] <= narrow[0] <= narrow[1] <= wide[1]


def test_phase_summary_keeps_sources_apart_and_orders_by_run():
    from omni_loader.reporting.stats import measured, phase_summary

    rows = [dict(run_id=i, variant="baseline", warmup=w, phase="weight_loading", seconds=x, status=st, source=src)
            for i, (w, x, st, src) in enumerate([(False, 3.0, "ok", "load"), (False, 1.0, "ok", "load"),
                                                  (True, 9.0, "ok", "load"), (False, 7.0, "failed", "load"),
                                                  (False, 5.0, "ok", "server")])]
    frame = _frame(rows).iloc[::-1]  # rows in any order: samples come in run order
    assert phase_summary(frame, "baseline", "weight_loading").samples == (3.0, 1.0)
    assert phase_summary(frame, "baseline", "weight_loading", "server").samples == (5.0,)
    assert phase_summary(frame, "optimized", "weight_loading").samples == ()
    assert sorted(measured(frame)["run_id"]) == [0, 1, 4]


def _aa_frame(arm1, arm2, source="aa"):
    return _frame([dict(run_id=i, variant=arm, warmup=False, phase="total", seconds=s, status="ok", source=source)
                   for i, (arm, s) in enumerate([*(("aa-1", s) for s in arm1), *(("aa-2", s) for s in arm2)])])


def test_noise_floor_is_the_aa_difference_or_its_interval_whichever_is_wider():
    from types import SimpleNamespace

    from omni_loader.reporting.stats import noise_floor

    arm1, arm2 = [1.00, 1.02, 0.98, 1.01, 0.99], [1.10, 1.12, 1.08, 1.11, 1.09]
    floor = noise_floor(_aa_frame(arm1, arm2), "total")
    assert floor.phase == "total"
    assert sorted(floor.arm1.samples) == sorted(arm1) and sorted(floor.arm2.samples) == sorted(arm2)
    assert floor.ci_low < floor.ci_high
    # the arms' medians are 0.10 s apart, wider than half the bootstrap interval: the floor is that difference
    assert floor.resolvable_seconds == pytest.approx(max(0.10, (floor.ci_high - floor.ci_low) / 2))
    assert floor.resolvable_seconds >= 0.10 - 1e-9
    assert floor.median == pytest.approx(1.05)
    assert floor.resolvable_fraction == pytest.approx(floor.resolvable_seconds / 1.05)
    # an A/B change resolves only when it is larger than the floor, relative to the median
    edge = 100 * floor.resolvable_fraction
    assert floor.resolves(SimpleNamespace(percent=edge + 1)) is True
    assert floor.resolves(SimpleNamespace(percent=edge - 1)) is False
    # no floor without two runs in each arm, nor from A/B rows
    assert noise_floor(_aa_frame(arm1, arm2[:1]), "total") is None
    assert noise_floor(_aa_frame(arm1[:1], arm2), "total") is None
    assert noise_floor(_aa_frame(arm1, arm2, source="load"), "total") is None
    assert noise_floor(_aa_frame(arm1, arm2), "construct") is None


def test_a_test_needs_only_two_runs_in_each_arm():
    two, three = Summary("baseline", "t", (2.0, 2.2)), Summary("optimized", "t", (1.0, 1.1, 1.2))
    # 2 + 3 fully separated: exact two-sided p = 2 / C(5, 2) = 0.2
    assert compare(two, three).verdict() == "no difference claimed: 2+3 runs cannot reach p < 0.05 (their smallest p is 0.2; 4 runs a side can)"
    slow, fast = Summary("baseline", "t", (2.0, 2.1, 2.2)), Summary("optimized", "t", (1.0, 1.1))
    assert compare(slow, fast).verdict() == "no difference claimed: 3+2 runs cannot reach p < 0.05 (their smallest p is 0.2; 4 runs a side can)"
    assert compare(slow, fast).p_value == pytest.approx(0.2)


def test_mann_whitney_is_scipys_two_sided_p_unless_every_value_is_the_same():
    from scipy.stats import mannwhitneyu

    # two distinct values in all: a real test (scipy's tie-corrected p), not the all-equal shortcut
    two_values = mann_whitney((1.0, 1.0), (2.0, 2.0))
    assert two_values == float(mannwhitneyu((1.0, 1.0), (2.0, 2.0), alternative="two-sided").pvalue)
    assert 0 < two_values < 1
    a, b = (1.0, 2.5, 3.0, 4.5), (2.0, 3.5, 5.0, 6.0, 7.0)
    assert mann_whitney(a, b) == float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert mann_whitney(a, b) == mann_whitney(b, a)  # two-sided: the order of the arms does not matter


# Two samples of 8 whose bootstrap interval moves with the seed and the number of resamples.
BOOT_A = (1.0, 1.03, 0.973, 0.911, 0.955, 0.901, 1.006, 1.134)
BOOT_B = (0.651, 0.638, 0.749, 0.736, 0.711, 0.607, 0.697, 0.77)


def _scipy_percentile_interval(a, b, confidence=0.95, resamples=2000, seed=0):
    """The interval computed independently: scipy's percentile bootstrap of median(b) - median(a)."""
    import numpy as np

    res = scipy.stats.bootstrap((np.asarray(a), np.asarray(b)),
                                lambda x, y, axis=-1: np.median(y, axis=axis) - np.median(x, axis=axis),
                                confidence_level=confidence, n_resamples=resamples, method="percentile",
                                rng=np.random.default_rng(seed), vectorized=True)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def test_bootstrap_interval_is_scipys_percentile_interval_with_the_given_settings():
    import statistics

    default = bootstrap_median_difference(BOOT_A, BOOT_B)
    assert default == _scipy_percentile_interval(BOOT_A, BOOT_B)
    low, high = default
    assert low < statistics.median(BOOT_B) - statistics.median(BOOT_A) < high < 0
    # the defaults are 95%, 2000 resamples and seed 0: each setting moves this interval
    assert default != _scipy_percentile_interval(BOOT_A, BOOT_B, resamples=2001)
    assert default != _scipy_percentile_interval(BOOT_A, BOOT_B, seed=1)
    assert default != _scipy_percentile_interval(BOOT_A, BOOT_B, confidence=0.9)
    for kwargs in (dict(confidence=0.5), dict(resamples=500), dict(seed=1), dict(confidence=0.8, seed=3)):
        got = bootstrap_median_difference(BOOT_A, BOOT_B, **kwargs)
        assert got == _scipy_percentile_interval(BOOT_A, BOOT_B, **kwargs) and got != default, kwargs
    narrow = bootstrap_median_difference(BOOT_A, BOOT_B, confidence=0.5)
    assert low < narrow[0] <= narrow[1] < high
    # two points per arm are enough for an interval
    assert bootstrap_median_difference((1.0, 2.0), (3.0, 4.0)) == _scipy_percentile_interval((1.0, 2.0), (3.0, 4.0))
    assert bootstrap_median_difference((1.0, 2.0), (3.0, 4.0)) == (1.0, 3.0)  # the extreme resamples: 3-2, 4-1
    assert bootstrap_median_difference((1.0, 2.0), (5.0,)) is None


def test_spread_warning_quotes_the_iqr_as_a_rounded_percent():
    skewed = Summary("baseline", "t", (1.0, 2.0, 4.0))  # IQR 3.0 - 1.5 = 1.5 over a median of 2: 75%
    c = compare(skewed, Summary("optimized", "t", (1.0, 1.0, 1.0)))
    assert c.notes == ["baseline spread is high: IQR is 75% of the median"]


def test_noise_floor_from_two_runs_per_arm():
    from omni_loader.reporting.stats import noise_floor

    floor = noise_floor(_aa_frame([1.0, 1.2], [1.1, 1.5]), "total")
    assert (floor.arm1.samples, floor.arm2.samples) == ((1.0, 1.2), (1.1, 1.5))
    assert (floor.ci_low, floor.ci_high) == bootstrap_median_difference((1.0, 1.2), (1.1, 1.5))
    assert noise_floor(_aa_frame([1.0], [1.1, 1.5]), "total") is None
    assert noise_floor(_aa_frame([1.0, 1.2], [1.1]), "total") is None


def test_noise_floor_resolves_only_a_strictly_larger_change():
    from omni_loader.reporting.stats import Comparison, NoiseFloor

    same = (1.9, 2.1)  # both arms median 2.0: the floor is the interval's half-width, 0.25 s of 2 s = 12.5%
    floor = NoiseFloor("total", Summary("aa-1", "total", same), Summary("aa-2", "total", same), -0.25, 0.25)
    assert floor.resolvable_seconds == 0.25 and floor.resolvable_fraction == 0.125

    def change(optimized):
        return Comparison("total", Summary("baseline", "total", (1.0,)), Summary("optimized", "total", (optimized,)))

    assert change(0.875).percent == 12.5 and not floor.resolves(change(0.875))  # exactly the floor: not resolved
    assert floor.resolves(change(0.874)) and floor.resolves(change(1.126))
    assert not floor.resolves(change(0.876)) and not floor.resolves(change(1.124))


XXH = "xxh3-128:0123456789abcdef0123456789abcdef"


def _runs_frame(runs):
    """(variant, digest, weights_loaded, persistent_buffers[, source, status]) per run."""
    rows = []
    for i, run in enumerate(runs):
        variant, digest, weights, buffers, source, status = (*run, *("load", "ok")[len(run) - 4:])
        rows.append(dict(run_id=i, variant=variant, warmup=False, phase="total", seconds=1.0, status=status,
                         digest=digest, source=source, weights_loaded=weights, persistent_buffers=buffers))
    return _frame(rows)


def test_equivalence_statement_counts_the_aa_runs_and_names_the_fixed_counts():
    frame = _runs_frame([("baseline", XXH, 187, 1), ("optimized", XXH, 187, 1), ("aa-1", XXH, 187, 1, "aa"),
                         ("aa-2", XXH, 187, 1, "aa"), ("baseline", "other", 99, 9, "server"),
                         ("optimized", "other", 99, 9, "load", "failed")])
    eq = equivalence(frame)
    arms = ("baseline", "optimized", "aa-1", "aa-2")
    assert eq == {"equivalent": True, "runs": 4, "digests": {v: [XXH] for v in arms},
                  "statement": "equivalent: all 4 runs of both variants and the A/A arms loaded identical tensors "
                               "(xxh3-128 0123456789abcdef…; 187 weights loaded, 1 persistent buffer)"}


def test_equivalence_statement_names_every_variant_beyond_two():
    arms = ["baseline", "optimized", "assign"]
    runs = [(v, XXH, 10, 2) for v in arms]
    assert equivalence(_runs_frame(runs), arms)["statement"] == (
        "equivalent: all 3 runs of all 3 variants (baseline, optimized, assign) loaded identical tensors "
        "(xxh3-128 0123456789abcdef…; 10 weights loaded, 2 persistent buffers)")
    with_aa = equivalence(_runs_frame([*runs, ("aa-1", XXH, 10, 2, "aa")]), arms)
    assert with_aa["statement"].startswith("equivalent: all 4 runs of all 3 variants (baseline, optimized, assign) "
                                           "and the A/A arms loaded")


def test_equivalence_statement_lists_each_arms_digests():
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    eq = equivalence(_runs_frame([("baseline", a, 187, 1), ("optimized", c, 187, 1), ("optimized", b, 187, 1),
                                  ("baseline", a, 187, 1)]))
    assert eq["digests"] == {"baseline": [a], "optimized": [b, c]} and eq["equivalent"] is False
    assert eq["statement"] == ("NOT equivalent: digests differ between runs or variants: "
                               "baseline sha256 aaaaaaaaaaaaaaaa…; "
                               "optimized sha256 bbbbbbbbbbbbbbbb…, sha256 cccccccccccccccc…")


def test_equivalence_statement_for_an_arm_without_a_successful_run_or_without_digests():
    failed = equivalence(_runs_frame([("baseline", XXH, 187, 1), ("optimized", "", 0, 0, "load", "failed")]))
    assert failed["digests"] == {"baseline": [XXH], "optimized": []}
    assert failed["statement"] == ("NOT equivalent: digests differ between runs or variants: "
                                   "baseline xxh3-128 0123456789abcdef…; optimized no successful run")
    blank = equivalence(_runs_frame([("baseline", "", 187, 1), ("optimized", "", 187, 1)]))
    assert blank["statement"] == ("NOT equivalent: digests differ between runs or variants: "
                                  "baseline (no digest); optimized (no digest)")


def test_equivalence_statement_lists_the_counts_that_differ():
    eq = equivalence(_runs_frame([("baseline", XXH, 187, 1), ("optimized", XXH, 187, 2), ("optimized", XXH, 186, 2),
                                  ("baseline", XXH, 187, 1)]))
    assert eq["equivalent"] is False
    assert eq["statement"] == ("NOT equivalent: weights loaded differ: baseline 187, optimized 186/187; "
                               "persistent buffers differ: baseline 1, optimized 2")
    # a count left blank in the rows is quoted as 'none'
    blank = equivalence(_runs_frame([("baseline", XXH, "187", 1), ("optimized", XXH, "", 1)]))
    assert blank["statement"] == "NOT equivalent: weights loaded differ: baseline 187, optimized none"


def test_memory_verdict_at_the_tolerance_and_from_a_zero_baseline():
    base = Summary("baseline", "rss", (100.0, 100.0))
    assert memory_verdict(base, Summary("optimized", "rss", (102.0, 102.0))) == "unchanged (within noise)"  # 2% exactly
    assert memory_verdict(base, Summary("optimized", "rss", (102.5, 102.5))) == "changed by 2.5%"
    assert memory_verdict(base, Summary("optimized", "rss", (101.0,)), tolerance=0.005) == "changed by 1.0%"
    # a zero baseline median is no division by zero; overlapping ranges are unchanged
    assert memory_verdict(Summary("baseline", "b", (0.0, 0.0, 8.0)), Summary("optimized", "b", (4.0, 6.0))) == (
        "unchanged (within noise)")
    # ... and separate ranges from a zero median are a change, without a percentage of nothing
    assert memory_verdict(Summary("baseline", "b", (0.0, 0.0, 1.0)), Summary("optimized", "b", (2.0, 3.0))) == (
        "changed (from a median of 0)")


def test_one_outlier_flips_the_prs_rule_but_not_the_kits_verdict():
    """Ten runs a side, 20% apart; one slow optimized run makes the ranges overlap (the PR's rule then
    claims nothing), while the interval of Δ median and the rank test still call the difference."""
    base = Summary("baseline", "weight_loading", tuple(1.0 + 0.01 * i for i in range(10)))
    clean = Summary("optimized", "weight_loading", tuple(0.8 + 0.01 * i for i in range(10)))
    outlier = Summary("optimized", "weight_loading", (*clean.samples[:9], 1.5))
    before, after = compare(base, clean), compare(base, outlier)
    assert before.pr_rule() == "ranges separate" and after.pr_rule() == "ranges overlap: no claim"
    assert before.differs() and after.differs()
    assert after.verdict().startswith("faster (95% CI of Δ median excludes 0")
    # Equal arms: no claim, whatever the PR's rule says.
    same = compare(base, Summary("optimized", "weight_loading", base.samples))
    assert not same.differs() and same.verdict().startswith("no difference claimed")
    # Slower is said so.
    assert compare(clean, base).verdict().startswith("slower (")


def test_the_kits_verdict_needs_the_interval_and_the_rank_test_and_the_floor():
    base = Summary("baseline", "t", tuple(1.0 + 0.01 * i for i in range(10)))
    opt = Summary("optimized", "t", tuple(0.9 + 0.01 * i for i in range(10)))
    c = compare(base, opt)
    assert c.interval_excludes_zero and c.significant and c.differs()
    assert not replace(c, p_value=0.2).differs()  # the rank test disagrees
    assert not replace(c, ci_low=-0.2, ci_high=0.01).differs()  # the interval straddles 0
    assert not replace(c, ci_low=None, ci_high=None).differs()
    arm = tuple(1.0 + 0.01 * i for i in range(10))
    wide = NoiseFloor("t", Summary("aa-1", "t", arm), Summary("aa-2", "t", arm), -0.3, 0.3)  # ±30%
    narrow = NoiseFloor("t", Summary("aa-1", "t", arm), Summary("aa-2", "t", arm), -0.01, 0.01)
    assert not c.differs(wide) and c.verdict(wide) == "within the A/A noise floor: no difference claimed"
    assert c.differs(narrow) and c.verdict(narrow).endswith("; beyond the A/A noise floor)")
    assert smallest_p(3, 3) == pytest.approx(0.1) and smallest_p(5, 5) == pytest.approx(2 / 252)
    assert smallest_p(0, 4) == 1.0 and smallest_p(3, 0) == 1.0 and smallest_p(1, 1) == 1.0


def test_ratio_interval_is_the_bootstrap_interval_of_the_ratio_where_logs_exist():
    """baseline/optimized's interval comes from the difference of median log-times: it holds the ratio of the
    medians; a sample of 0 s (no logarithm), a count, or a side of one run has none."""
    from omni_loader.reporting.stats import ratio_interval

    base = Summary("baseline", "t", (0.40, 0.42, 0.41, 0.45, 0.43))
    opt = Summary("optimized", "t", (0.10, 0.11, 0.105, 0.12, 0.1))
    low, high = ratio_interval(compare(base, opt))
    assert low < base.median / opt.median < high and 3 < low < high < 5
    assert ratio_interval(compare(base, replace(opt, samples=(0.1, 0.0, 0.11)))) is None  # a 0 s run
    assert ratio_interval(compare(base, replace(opt, samples=(0.1,)))) is None  # one run: no bootstrap
    assert ratio_interval(compare(base, opt, unit="calls")) is None


def test_the_prs_rule_needs_two_runs_a_side_and_no_more():
    """pr_rule reads min–max ranges, which two runs a side already have; a side of one run is too few."""
    two, far = Summary("baseline", "t", (1.0, 1.1)), Summary("optimized", "t", (0.1, 0.2))
    assert compare(two, far).pr_rule() == "ranges separate"
    assert compare(two, replace(far, samples=(0.1, 1.05))).pr_rule() == "ranges overlap: no claim"
    one = Summary("baseline", "t", (1.0,))
    assert compare(one, Summary("optimized", "t", (0.1, 0.2, 0.3))).pr_rule() == "too few runs"
    assert compare(Summary("baseline", "t", (1.0, 1.1, 1.2)), replace(far, samples=(0.1,))).pr_rule() == "too few runs"


def test_a_verdict_says_when_the_runs_cannot_reach_the_error_rate_even_at_the_boundary():
    """3 + 3 runs completely apart give p = 0.1 exactly: at α = 0.1 that is not p < α, and the verdict says the
    runs cannot reach it; the interval is the (1 − α) one."""
    base = Summary("baseline", "t", (1.0, 1.1, 1.2))
    opt = Summary("optimized", "t", (0.1, 0.2, 0.3))
    c = compare(base, opt, alpha=0.1)
    assert c.verdict() == "no difference claimed: 3+3 runs cannot reach p < 0.1 (their smallest p is 0.1; 4 runs a side can)"
    wide = compare(Summary("baseline", "t", (1.0, 1.4, 1.1, 1.9, 1.2)),
                   Summary("optimized", "t", (0.1, 0.9, 0.2, 0.5, 0.3)), alpha=0.01)
    assert (wide.ci_low, wide.ci_high) == bootstrap_median_difference(wide.baseline.samples, wide.optimized.samples,
                                                                      confidence=0.99)
    assert (wide.ci_low, wide.ci_high) != bootstrap_median_difference(wide.baseline.samples, wide.optimized.samples)
