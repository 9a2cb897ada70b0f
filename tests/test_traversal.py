"""The traversal sweep: synthetic trees, call and visit counts, log-log fits, files written, and the CLI."""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import pandas as pd
import pytest

from omni_loader.sweep import fits, traversal, trees
from omni_loader.token2wav.discovery import (compare_variants, count_state_dict_calls, find_persistent_buffers,
                                             non_persistent_buffer_names)
from omni_loader.sweep.discovery_timing import DiscoveryTiming, time_discovery


@pytest.mark.parametrize(("n", "b"), [(2, 2), (5, 3), (16, 4), (7, 40), (100, 17)])
def test_tree_has_exactly_n_modules_and_b_buffers(n: int, b: int) -> None:
    tree = trees.build_tree(n, b)
    assert trees.tree_counts(tree) == (n, b)
    persistent = find_persistent_buffers(tree, "optimized")
    assert "scale" in persistent  # root level: no leading dot
    assert len(persistent) == 2
    (nested,) = [name for name in persistent if name != "scale"]
    assert nested.endswith(".inv_freq")
    assert len(non_persistent_buffer_names(tree)) == b - 2
    assert compare_variants(tree).agree


def test_root_level_non_persistent_buffer_has_no_leading_dot() -> None:
    tree = trees.build_tree(8, 6)
    names = non_persistent_buffer_names(tree)
    assert "filter0" in names  # registered on the root
    assert not any(name.startswith(".") for name in names)
    assert "filter0" not in find_persistent_buffers(tree, "optimized")


def test_tree_rejects_impossible_sizes() -> None:
    with pytest.raises(ValueError):
        trees.build_tree(1, 4)
    with pytest.raises(ValueError):
        trees.build_tree(4, 1)


@pytest.mark.parametrize(("n", "b"), [(10, 2), (64, 8), (33, 50)])
def test_baseline_builds_the_state_dict_once_per_buffer(n: int, b: int) -> None:
    tree = trees.build_tree(n, b)
    with count_state_dict_calls(tree) as calls:
        find_persistent_buffers(tree, "baseline")
    assert calls.calls == b
    with count_state_dict_calls(tree) as calls:
        find_persistent_buffers(tree, "optimized")
    assert calls.calls == 0


def test_fit_on_hand_computed_data() -> None:
    # log10 points (0, 0), (1, 2), (2, 3): mean x 1, mean y 5/3, Sxy = 3, Sxx = 2, Syy = 14/3,
    # so slope 3/2, intercept 5/3 - 3/2 = 1/6, R² = Sxy² / (Sxx Syy) = 9 / (28/3) = 27/28.
    fit = fits.fit_loglog([1, 10, 100], [1, 100, 1000])
    assert fit.slope == pytest.approx(1.5)
    assert fit.intercept == pytest.approx(1 / 6)
    assert fit.r2 == pytest.approx(27 / 28)
    assert fit.n_points == 3
    assert (fit.x_min, fit.x_max) == (pytest.approx(1), pytest.approx(100))
    # the fitted range is the x values themselves, not 10 ** log10(x): a table showed "32.00" for 32
    assert (fits.fit_loglog([32, 128], [1, 2]).x_min, fits.fit_loglog([36, 4352], [1, 2]).x_max) == (32.0, 4352.0)


def test_fit_recovers_an_exact_power_law() -> None:
    xs = [4, 16, 64, 256, 1024]
    fit = fits.fit_loglog(xs, [3e-6 * x**2 for x in xs])
    assert fit.slope == pytest.approx(2.0)
    assert fit.intercept == pytest.approx(math.log10(3e-6))
    assert fit.r2 == pytest.approx(1.0)
    assert fit.predict(100) == pytest.approx(3e-2)


def test_fit_needs_two_distinct_x() -> None:
    with pytest.raises(ValueError):
        fits.fit_loglog([5, 5], [1, 2])


def test_fit_sweep_and_placement_on_constructed_rows() -> None:
    """Rows with a known law: the fits find it on both clocks, a point twice above the line is placed at 2,
    and baseline = B x state_dict exactly, so that ratio is 1."""
    rows = []
    for n in (16, 64, 256):
        for b in (4, 16):
            for exp, slope in (("state_dict", 1.0), ("baseline", 1.0), ("optimized", 1.0)):
                x = fits.experiment_x(exp, n, b)
                for repeat, wobble in enumerate((0.9, 1.0, 1.3)):  # median is the 1.0 one
                    t = 2e-7 * x**slope * wobble
                    rows.append({"experiment": exp, "source": "synthetic", "N": n, "B": b, "x": x, "repeat": repeat,
                                 "seconds": t, "cpu_seconds": t / 2, "number": 1})
    rows.append({"experiment": "baseline", "source": "token2wav-x", "N": 100, "B": 10, "x": 1000, "repeat": 0,
                 "seconds": 2e-7 * 1000 * 2, "cpu_seconds": 1e-7 * 1000 * 2, "number": 1})
    frame = pd.DataFrame(rows, columns=list(fits.CSV_COLUMNS))
    for clock, factor in (("wall", 1.0), ("cpu", 0.5)):
        found = fits.fit_sweep(frame, clock)
        assert set(found) == set(fits.EXPERIMENTS)
        for fit in found.values():
            assert fit.slope == pytest.approx(1.0)
            assert fit.r2 == pytest.approx(1.0)
        assert found["baseline"].predict(1000) == pytest.approx(2e-4 * factor)
        placed = fits.place_points(frame, found, clock)
        assert len(placed) == 1
        assert placed.measured_over_fit.iloc[0] == pytest.approx(2.0)
    ratio = fits.baseline_over_state_dicts(frame)
    assert len(ratio) == 6
    assert ratio.baseline_over_B_state_dicts.to_numpy() == pytest.approx([1.0] * 6)


def synthetic_rows(cost) -> pd.DataFrame:
    """Sweep rows of a 4 x 3 grid whose medians follow ``cost(experiment, N, B)`` exactly (repeats wobble around it)."""
    rows = []
    for n in (16, 64, 256, 1024):
        for b in (4, 16, 64):
            for exp in fits.EXPERIMENTS:
                for repeat, wobble in enumerate((1.0, 0.8, 1.5)):
                    t = cost(exp, n, b) * wobble
                    rows.append({"experiment": exp, "source": "synthetic", "N": n, "B": b,
                                 "x": fits.experiment_x(exp, n, b), "repeat": repeat, "seconds": t,
                                 "cpu_seconds": t, "number": 1})
    return pd.DataFrame(rows, columns=list(fits.CSV_COLUMNS))


def test_fitted_slopes_are_the_exponents_of_the_constructed_laws() -> None:
    """Each experiment against its own x: a quadratic law gives slope 2, a square root 0.5, a linear one 1."""
    exponent = {"state_dict": 2.0, "baseline": 1.0, "optimized": 0.5}
    rows = synthetic_rows(lambda exp, n, b: 1e-6 * fits.experiment_x(exp, n, b) ** exponent[exp])
    for clock in fits.CLOCKS:
        found = fits.fit_sweep(rows, clock)
        assert {e: f.slope for e, f in found.items()} == pytest.approx(exponent)
        assert all(f.r2 == pytest.approx(1.0) and f.n_points == 12 for f in found.values())


def test_sweep_figure_text_is_readable_and_no_legend_covers_a_point() -> None:
    """03's figures showed their legends ("fit: slope 1.027, R² 0.9984") and tick labels at about 8 px, and panel (a)'s
    legend sat on its points: every text is at least 10 pt (about 14 px at the 100 dpi Lab draws it), and each panel's
    y axis leaves the legend headroom above every point and min-max bar. The legends of (a) and (b) stuck out past
    their panels' right edges ("token2wav-full (N=1,092, B=219): 1,147 ms"): each legend lies inside its panel."""
    import numpy as np
    from matplotlib.text import Text

    from omni_loader.sweep.traversal_plots import plot_sweep

    rows = synthetic_rows(lambda exp, n, b: 1e-6 * fits.experiment_x(exp, n, b))
    real = [{"experiment": exp, "source": "token2wav-full", "N": 1092, "B": 219, "x": fits.experiment_x(exp, 1092, 219),
             "repeat": 0, "seconds": 4.8e-6 * fits.experiment_x(exp, 1092, 219), "cpu_seconds": 1e-3, "number": 1}
            for exp in fits.EXPERIMENTS]
    fig = plot_sweep(pd.concat([rows, pd.DataFrame(real)], ignore_index=True), clock="wall")
    fig.canvas.draw()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
    assert texts and min(t.get_fontsize() for t in texts) >= 10, sorted({t.get_fontsize() for t in texts})
    assert any(t.get_text().startswith("full-size Token2Wav: ") for t in texts)  # the star named in words, not its key
    panels = [ax for ax in fig.axes if ax.axison]
    assert len(panels) == 3
    for ax in panels:
        box = ax.get_legend().get_window_extent()
        points = np.vstack([ax.transData.transform(np.column_stack(line.get_data()).astype(float)) for line in ax.get_lines()]
                           + [ax.transData.transform(seg) for c in ax.collections for seg in c.get_segments()])
        inside = (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1) & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
        assert not inside.any(), (ax.get_title(), points[inside])
        frame = ax.get_window_extent()  # and the legend inside its panel's frame (it stuck out past the right edge)
        assert frame.x0 - 1 <= box.x0 and box.x1 <= frame.x1 + 1, (ax.get_title(), box, frame)
        assert frame.y0 - 1 <= box.y0 and box.y1 <= frame.y1 + 1, (ax.get_title(), box, frame)


def test_linear_costs_recover_per_module_per_buffer_and_fixed_costs() -> None:
    rows = synthetic_rows(lambda exp, n, b: 3e-7 * n + 1e-7 * b + 2e-6)
    costs = fits.linear_costs(rows, "optimized", "cpu")
    assert costs == pytest.approx({"per_module_seconds": 3e-7, "per_buffer_seconds": 1e-7, "fixed_seconds": 2e-6})
    line = fits.cost_summary(rows, "cpu")
    assert re.search(r"optimized ≈ 300 ns per module \+ 100(\.0)? ns per buffer \+ 2(\.00)? µs fixed$", line), line


def test_sweep_config_presets_and_checks() -> None:
    assert traversal.SweepConfig.preset(True) == traversal.SweepConfig.quick()
    assert traversal.SweepConfig.preset(False, repeats=None, warmup=None) == traversal.SweepConfig()
    config = traversal.SweepConfig.preset(True, repeats=2, warmup=0, token2wav=None)
    assert (config.repeats, config.warmup, config.token2wav, config.n_values) == (
        2, 0, None, traversal.SweepConfig.quick().n_values)
    with pytest.raises(ValueError, match="repeats"):
        traversal.SweepConfig.quick(repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        traversal.SweepConfig(warmup=-1)


def test_time_discovery_still_times_both_variants() -> None:
    tree = trees.build_tree(20, 6)
    timing = time_discovery(tree, repeats=3, warmup=0)
    assert timing.state_dict_calls == {"baseline": 6, "optimized": 0}
    assert all(len(v) == 3 for v in timing.samples.values())
    assert timing.agree and "agree on 2 persistent buffers" in timing.summary
    for variant, samples in timing.samples.items():
        assert timing.median(variant) == sorted(samples)[1]


def test_ratio_is_baseline_median_over_optimized_median() -> None:
    timing = DiscoveryTiming(samples={"baseline": [3.0, 1.0, 2.0], "optimized": [0.5, 1.0, 0.25]},
                             state_dict_calls={}, agreement=compare_variants(trees.build_tree(4, 2)))
    assert timing.ratio() == 4.0  # median 2 / median 0.5


@pytest.fixture
def visits(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Per-module work counted on every TreeNode: ``named_modules`` calls (one per module a walk visits,
    since the walk recurses through them) and ``_save_to_state_dict`` calls (one per module a
    ``state_dict()`` build visits)."""
    counter: Counter = Counter()
    walk, save = trees.TreeNode.named_modules, trees.TreeNode._save_to_state_dict

    def counting_walk(self, *args, **kwargs):
        counter["walk"] += 1
        return walk(self, *args, **kwargs)

    def counting_save(self, *args, **kwargs):
        counter["save"] += 1
        return save(self, *args, **kwargs)

    monkeypatch.setattr(trees.TreeNode, "named_modules", counting_walk)
    monkeypatch.setattr(trees.TreeNode, "_save_to_state_dict", counting_save)
    return counter


@pytest.mark.parametrize(("n", "b"), [(10, 2), (64, 8), (33, 50), (150, 150)])
def test_baseline_visits_b_times_n_modules_optimized_two_walks(visits: Counter, n: int, b: int) -> None:
    """Why one rule grows as B·N and the other as N + B, counted instead of timed: the baseline builds the
    whole state dict once per buffer (B·N module saves) beside one named_buffers() walk (N visits);
    the optimized rule saves nothing and walks the tree twice (named_modules(), named_buffers())."""
    tree = trees.build_tree(n, b)
    visits.clear()
    find_persistent_buffers(tree, "baseline")
    assert dict(visits) == {"save": b * n, "walk": n}
    visits.clear()
    find_persistent_buffers(tree, "optimized")
    assert dict(visits) == {"walk": 2 * n}


def _check_outputs(out, config) -> pd.DataFrame:
    for name in traversal.FILES.values():
        assert (out / name).is_file(), name
    for stem in ("traversal", "traversal_cpu"):
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<svg" in (out / f"{stem}.svg").read_text()[:2000]
    rows = pd.read_csv(out / "traversal.csv")
    assert list(rows.columns) == list(fits.CSV_COLUMNS)
    assert (rows.seconds > 0).all() and (rows.cpu_seconds >= 0).all()
    for rec in rows.itertuples(index=False):
        assert rec.x == fits.experiment_x(rec.experiment, rec.N, rec.B)
    synth = rows[rows.source == "synthetic"]
    assert set(zip(synth.N, synth.B)) == set(config.trees())
    table = pd.read_csv(out / "fits.csv")
    assert set(zip(table.clock, table.experiment)) == {(c, e) for c in fits.CLOCKS for e in fits.EXPERIMENTS}
    assert table.r2.between(0, 1).all()
    record = json.loads((out / "fits.json").read_text())
    assert set(record["fits"]) == set(record["fits_cpu"]) == set(fits.EXPERIMENTS)
    assert record["config"]["repeats"] == config.repeats
    return rows


@pytest.mark.slow  # over a few seconds (the fast lane's budget is 90 s)
def test_sweep_on_tiny_settings_writes_csv_fits_and_plots(tmp_path) -> None:
    config = traversal.SweepConfig.quick(repeats=2, warmup=0, min_time=0.0, n_values=(8, 16, 32), b_values=(2, 4),
                                         token2wav="tiny")
    result = traversal.traversal_sweep(config, tmp_path, progress=False)
    rows = _check_outputs(tmp_path, result.config)
    # every experiment on every tree, 2 repeats each, plus the tiny Token2Wav
    assert len(rows) == (6 + 1) * 3 * 2
    t2w = rows[rows.source == "token2wav-tiny"]
    assert set(t2w.experiment) == set(fits.EXPERIMENTS)
    assert len(result.placement) == 3
    assert "slope" in result.summary()


def test_sweep_skips_baseline_above_the_cap(tmp_path) -> None:
    config = traversal.SweepConfig.quick(repeats=1, warmup=0, min_time=0.0, n_values=(8, 64), b_values=(4,),
                                         max_baseline_bn=100, token2wav=None)
    result = traversal.traversal_sweep(config, progress=False)
    baseline = result.rows[result.rows.experiment == "baseline"]
    assert list(baseline.N) == [8]
    assert "baseline" not in result.fits  # one point only: no line
    assert result.placement.empty
    assert "2 synthetic trees, 1 repeat, " in result.summary()  # not "1 repeats"


@pytest.mark.slow
def test_cli_quick_writes_the_files(tmp_path, capsys) -> None:
    from omni_loader.cli import main

    out = tmp_path / "traversal"
    assert main(["traversal", "--quick", "--out", str(out)]) == 0
    _check_outputs(out, traversal.SweepConfig.quick())
    printed = capsys.readouterr().out
    assert "slope" in printed and "full-size Token2Wav" in printed and "token2wav-full" not in printed


def test_05s_slope_is_set_beside_03s_saved_sweep_from_both_fits(tmp_path) -> None:
    """05 once said in prose that its quick sweep's slope "differs from 03's full sweep by a few hundredths" (a run
    had 1.000 against 1.084): the sentence is computed from both fits, the saved one read from 03's fits.json, and
    says so when none is saved; 05's prose carries no such claim, its cell calls the kit for it."""
    import nbformat

    from test_notebooks import NOTEBOOK_DIR

    def fit(slope, stderr, n, x_min, x_max):
        return fits.LogLogFit(slope=slope, intercept=-5.0, r2=0.99, stderr=stderr, n_points=n, x_min=x_min, x_max=x_max)

    here = traversal.SweepResult(rows=None, fits={"baseline": fit(1.0, 0.03, 12, 64, 65_536)}, placement=None,
                                 config=traversal.SweepConfig.quick())
    saved = tmp_path / "traversal"
    saved.mkdir()
    (saved / "fits.json").write_text(json.dumps({"created": "2026-12-03T13:10:26+00:00", "config": {"repeats": 7},
                                                 "fits": {"baseline": fit(1.084, 0.04, 31, 128, 524_288).to_dict()}}))
    sentence = fits.slope_beside_saved(here, saved)
    assert sentence.startswith("The B·N line of this sweep: slope 1.000 ± 0.030, R² 0.9900 (12 points, B·N 64\u00a0…\u00a0"
                               "65,536, 3 repeats). ")
    assert (f"The sweep saved in {saved} (2026-12-03T13:10:26+00:00) fits 1.084 ± 0.040 (31 points, B·N 128\u00a0…\u00a0"
            "524,288, 7 repeats): the slopes differ by 0.084, 1.7 standard errors of their difference (within what the "
            "two fits' own uncertainty explains), and this sweep's fitted range ends 8.0× lower.") in sentence
    wide = traversal.SweepResult(rows=None, fits={"baseline": fit(1.2, 0.03, 12, 64, 65_536)}, placement=None,
                                 config=traversal.SweepConfig.quick())
    assert "2.3 standard errors of their difference (more than what the two fits' own uncertainty explains)" in \
        fits.slope_beside_saved(wide, saved)  # 0.116 / 0.05 = 2.32
    assert f"{0.084 / math.hypot(0.03, 0.04):.1f}" == "1.7"
    none = fits.slope_beside_saved(here, tmp_path / "nothing")
    assert none.endswith(f"No sweep is saved in {tmp_path / 'nothing'} to set it beside (notebook 03 writes its full "
                         "sweep there), so it is compared with none.")
    itself = traversal.SweepResult(rows=None, fits=here.fits, placement=None, config=here.config,
                                   files={"fits_json": saved / "fits.json"})
    assert fits.slope_beside_saved(itself, saved).endswith(f"It is the sweep saved in {saved}.")

    notebook = nbformat.read(NOTEBOOK_DIR / "05_beyond_the_pr.ipynb", as_version=4)
    prose = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    assert not re.search(r"slope[^.]*(differs|hundredths)", prose), "05's prose claims how far the slopes are apart"
    assert any("sweep.slope_beside_saved(" in c.source for c in notebook.cells if c.cell_type == "code")


def test_the_sweep_bar_prices_each_model_left_by_its_own_cost_on_a_fake_clock(monkeypatch) -> None:
    """03's bar said "00:43 left" at 00:17 where 79 s were left: the first timed models of a round (in a random
    order) were small trees, and every model left was priced at their mean, the real Token2Wav's second-long rounds
    too. Each model is priced by its own warm-up cost (scaled by how far the warm-up prices of the models timed so
    far were off), so on a fake clock where every round takes 1.5x its warm-up price, every time left shown is the
    true one, from the first timed model on."""
    from omni_loader import progress

    config = traversal.SweepConfig.quick(repeats=3, n_values=tuple(range(10, 21)), b_values=(4,), token2wav=None)
    estimate = {(n, 4): 30.0 if n == 20 else 1.0 for n in config.n_values}  # ten small trees and one big model
    now = [0.0]

    def fake_subjects(config, bar):
        plan = [traversal.Subject("synthetic", None, counts, {}, estimate[counts]) for counts in config.trees()]
        for _ in plan:
            bar.update(1)
        return plan

    def fake_round(subject, repeat, touch):
        now[0] += 1.5 * estimate[subject.counts]  # the timed round: 1.5x what its warm-up said
        return []

    from stand_ins import PostfixBar

    made: list[PostfixBar] = []
    monkeypatch.setattr(progress, "progress_bar", lambda *a, **k: made.append(PostfixBar(*a, **k)) or made[-1])
    monkeypatch.setattr(traversal, "subjects", fake_subjects)
    monkeypatch.setattr(traversal.Subject, "measure", fake_round)
    traversal.run_sweep(config, progress=True, clock=lambda: now[0])
    (bar,) = made
    timing = bar.ticks[len(config.trees()):-1]  # the ticks of the timed rounds, but the last ("done")
    total = 1.5 * config.repeats * sum(estimate.values())
    order = config.trees()  # the rounds' order, replayed from the sweep's seed
    rng, spent, shown = traversal.random.Random(config.seed), 0.0, []
    for _ in range(config.repeats):
        for i in rng.sample(range(len(order)), len(order)):
            spent += 1.5 * estimate[order[i]]
            shown.append(total - spent)
    shown.pop()
    assert len(timing) == len(shown)
    for words, left in zip(timing, shown):
        minutes, seconds = re.match(r"(\d\d):(\d\d) left", words).groups()
        assert abs(int(minutes) * 60 + int(seconds) - left) <= 1, (words, left)
    # without any warm-up price, each model left is priced at the median round so far
    rounds = progress.Countdown([progress.Step("round", "0"), progress.Step("round", "1")] * 2, clock=lambda: now[0])
    assert rounds.left() is None
    rounds.begin(progress.Step("round", "0"))
    now[0] += 4.0
    rounds.end()
    assert rounds.left() == 3 * 4.0


def test_where_the_real_model_sits_is_one_computed_line_and_03_writes_it_one_way() -> None:
    """03's section 4 wrote one quantity three ways ("B·N ≈ 239,000", "x = 239,148 (about 240,000)", "N ≈ 1,092") in
    typed prose, and headed its ratio "measured ÷ fit" beside columns "median" and "predicted": the numbers come from
    one computed line under the table, exact, and the ratio is headed with the columns' own words."""
    import nbformat

    from test_notebooks import NOTEBOOK_DIR

    placement = pd.DataFrame([
        {"experiment": "baseline", "source": "token2wav-full", "N": 1092, "B": 219, "x": 239_148,
         "median_seconds": 1.0046, "predicted_seconds": 0.775, "measured_over_fit": 1.30, "inside_fitted_range": True},
        {"experiment": "optimized", "source": "token2wav-full", "N": 1092, "B": 219, "x": 1_311,
         "median_seconds": 2.1e-3, "predicted_seconds": 2e-3, "measured_over_fit": 1.05, "inside_fitted_range": True}])
    assert fits.placement_sentence(placement) == (
        "Full-size Token2Wav: N = 1,092 modules, B = 219 buffers. The baseline sits on the B·N line at x = 239,148, the "
        "optimized rule on the N + B line at x = 1,311: 182× apart on the x axis, at 4.20 µs and 1.60 µs per unit of "
        "x (wall clock).")
    assert "No real model" in fits.placement_sentence(placement.iloc[0:0])
    nb = nbformat.read(NOTEBOOK_DIR / "03_module_traversal_costs.ipynb", as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not re.search(r"239,|240,000|1,311|≈ 1,092", prose) and "measured ÷ fit" not in prose + code
    assert 'measured_over_fit="median ÷ predicted"' in code and "result.placement_sentence(" in code


def test_the_sweep_bars_count_and_its_last_words_agree() -> None:
    """03's bar read "264/264 ... done: 7 repeats of 33 models": it counts a warm-up round (each model built and
    warmed up) and then each repeat, and its last words name the warm-up round too."""
    from omni_loader.sweep.traversal import done_words

    words = done_words(7, 33)
    assert words == "done: a warm-up round and 7 repeats of 33 models"
    rounds = re.fullmatch(r"done: a warm-up round and (\d+) repeats? of (\d+) models", words)
    assert (1 + int(rounds[1])) * int(rounds[2]) == 264  # the bar's count: models × (repeats + 1)
    assert done_words(1, 2) == "done: a warm-up round and 1 repeat of 2 models"


def test_the_sweep_bars_time_left_counts_down_between_two_models_on_a_fake_clock() -> None:
    """03's bar read "00:44 left" at 00:15 and "00:43 left" at 00:24: the sweep updates its bar once per model and
    its text stood still while a model was timed. Redrawn (as the kit's Redrawer does each second), the time left is
    the one priced as the model started less the time since; once the model runs past its price, the estimate rises
    (it never sits at the models after it, nor at 00:00, while a model is still being timed)."""
    from omni_loader.progress import Countdown, Step, StepBar

    now, shown = [100.0], []

    class Bar:
        disable = False

        def set_postfix_str(self, text: str, refresh: bool = True) -> None:
            shown.append(text)

        def update(self, n: int = 1) -> None:
            pass

    steps = StepBar(Bar(), Countdown([Step("round", "a"), Step("round", "b")] * 2, clock=lambda: now[0]),
                    unknown="time left after the first model is timed")
    assert not steps.disable
    steps.begin(Step("round", "a"), "repeat 1/2")
    steps.refresh()
    assert shown[-1] == "time left after the first model is timed, repeat 1/2"
    now[0] += 10.0
    steps.begin(Step("round", "b"), "repeat 1/2")  # three models left at 10 s each
    assert shown[-1] == "00:30 left, repeat 1/2"
    for seconds, left in [(1, "00:29"), (5, "00:25"), (9, "00:21"), (20, "00:32")]:
        # overdue at 10 s; at 20 s: a tenth of its 20 s for itself, model a at 10 s, model b again at its 20 s so far
        now[0] = 110.0 + seconds
        steps.refresh()
        assert shown[-1] == f"{left} left, repeat 1/2", seconds
    steps.finish("done")
    assert shown[-1] == "done"


def test_the_sweeps_time_axes_read_1_s_at_a_second() -> None:
    """03's panel (b) read "1 ms, 10 ms, 100 ms, 1,000 ms, 10 s, 100 s" up its y axis: a decade of a time axis is
    labelled in the unit that keeps its number from 1 to 999 (1 s, not 1,000 ms)."""
    from omni_loader.reporting.figures import tick_labels
    from omni_loader.sweep.traversal_plots import plot_sweep

    rows = synthetic_rows(lambda exp, n, b: 2e-6 * fits.experiment_x(exp, n, b) ** 1.5)  # the baseline: 1 ms … 100 s
    labels = tick_labels(plot_sweep(rows, clock="wall"))
    assert "1 s" in labels and "10 s" in labels and "100 ms" in labels, labels
    assert not [t for t in labels if re.fullmatch(r"[\d,]+ ms", t) and float(t[:-3].replace(",", "")) >= 1000], labels
