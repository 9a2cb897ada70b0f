"""Statistics on samples with hand-computed answers, and the PR's phrasing."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from omni_loader.stats import (
    Summary,
    bootstrap_median_difference,
    compare,
    equivalence,
    mann_whitney,
    memory_verdict,
    phrase_change,
    ranges_overlap,
    summary_table,
)


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
    assert c.significant and c.verdict().startswith("significant")
    assert c.ratio == pytest.approx(0.42 / 0.00101)
    noisy = Summary("baseline", "total", (1.0, 2.0, 3.0, 4.0, 5.0))
    other = Summary("optimized", "total", (1.5, 2.5, 3.5, 4.5, 5.5))
    c2 = compare(noisy, other)
    assert c2.ranges_overlap and c2.verdict() == "ranges overlap: no stable difference claimed"
    assert any("spread is high" in n for n in c2.notes)
    assert not any("spread" in n for n in c.notes)


def test_memory_verdict():
    a = Summary("baseline", "rss", (100.0, 101.0, 100.5))
    b = Summary("optimized", "rss", (100.2, 100.9, 101.1))
    assert memory_verdict(a, b).startswith("unchanged")
    c = Summary("optimized", "rss", (150.0, 151.0, 152.0))
    assert memory_verdict(a, c).startswith("changed by")


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
                         digest=digest, source="load"))
    frame = _frame(rows)
    table = summary_table(frame).set_index("variant")
    assert table.loc["baseline", "median"] == 2.0 and table.loc["baseline", "n"] == 2
    assert table.loc["optimized", "n"] == 1
    eq = equivalence(frame)
    assert eq["equivalent"] and eq["runs"] == 4
    frame.loc[2, "digest"] = "other"
    assert not equivalence(frame)["equivalent"]


def test_format_seconds_keeps_the_row_unit():
    from omni_loader.stats import format_seconds, time_unit

    assert format_seconds(1.099526) == "1099.526 ms"
    assert format_seconds(105.738) == "105.738 s"
    assert format_seconds(1.416, time_unit(105.738)) == "1.416 s"
    assert format_seconds(math.nan) == "n/a"


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


def _digest_frame(digests):
    return _frame([dict(run_id=i, variant=v, warmup=False, phase="total", seconds=1.0, status="ok", digest=d,
                        source="load") for i, (v, d) in enumerate(digests)])


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
    assert same["statement"] == f"equivalent: all 2 runs of both variants loaded identical tensors (SHA-256 {'ab' * 8}…)"
    assert same["digests"] == {"baseline": ["ab" * 32], "optimized": ["ab" * 32]}
