"""Figures the notebooks print that a reader sets side by side: each computed the one way the kit takes it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from omni_loader.profiling.reference import median_run
from omni_loader.profiling.result import VariantProfile
from omni_loader.profiling.summary import _discovery_change
from omni_loader.token2wav.options import LoadOptions


def _runs(variant: str, discovery: list[float], totals: list[float]) -> list[dict]:
    return [{"variant": variant, "warmup": False, "status": "ok", "run_id": i + (10 if variant == "optimized" else 0), "parent": "",
             "phase": phase, "seconds": seconds}
            for i, (d, t) in enumerate(zip(discovery, totals)) for phase, seconds in (("buffer_discovery", d),
                                                                                      ("total", t))]


def test_discovery_ratio_is_of_the_medians_over_the_runs_as_the_ratio_table_takes_it(tmp_path: Path) -> None:
    """02 once printed 196× in its ratio table (each phase's median over 3 + 3 runs) and 260× under "Where the
    time goes" (the median run's discovery) for the same runs: the sentence now takes the table's medians."""
    frame = pd.DataFrame(_runs("baseline", [1.345, 1.2, 1.4], [3.0, 2.9, 3.1])
                         + _runs("optimized", [0.00685, 0.00517, 0.00758], [1.5, 1.6, 1.4]))
    profiles = {v: VariantProfile(v, tmp_path, reference=median_run(frame, v, LoadOptions(), tmp_path))
                for v in ("baseline", "optimized")}
    assert profiles["optimized"].reference["phases"]["buffer_discovery"] == 0.00685  # the median run: 1.5 s
    assert profiles["optimized"].reference["reference"]["medians"]["buffer_discovery"] == 0.00685
    frame.loc[(frame["run_id"] == 10) & (frame["phase"] == "buffer_discovery"), "seconds"] = 0.00517
    frame.loc[(frame["run_id"] == 11) & (frame["phase"] == "buffer_discovery"), "seconds"] = 0.00685
    profiles["optimized"].reference = median_run(frame, "optimized", LoadOptions(), tmp_path)
    assert profiles["optimized"].reference["phases"]["buffer_discovery"] == 0.00517  # the median run's own
    said = _discovery_change(profiles)[0]
    assert said.startswith("Buffer discovery, each variant's median of its 3 runs (as ratio tables take it): "
                           "1,345.00 ms → 6.85 ms, 196× less time; whole load, the median runs: 3,000.00 ms → "
                           "1,500.00 ms"), said


def test_06s_tables_name_the_model_the_token2wav_stage_loaded(tmp_path: Path, tiny_snapshot: Path,
                                                               monkeypatch) -> None:
    """06 ran the tiny synthetic model, and its "85.256 → 6.798 ms" stood unnamed beside the PR's released model's
    1,100 → 620 ms: the timeline table, the A/B table and the startup row name it (read from the saved command),
    and the A/B's caption is one short bold line over plain notes, not six bold lines."""
    import omni_loader.notebook.stages as stages
    import omni_loader.startup.serve_ab as serve_ab
    from test_timeline import lab_comparisons, model_loaded_log, starts_frame

    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "0-baseline.log").write_text(model_loaded_log())
    monkeypatch.setattr(serve_ab, "stage_phase_comparisons", lambda out, frame=None: lab_comparisons())
    monkeypatch.setattr(stages.Starts, "measured", lambda self: starts_frame([6.53, 6.56, 6.34], [8.07, 5.97, 7.99]))
    monkeypatch.setattr(serve_ab, "saved_serve_ab", lambda out: {"spec": {
        "baseline_cmd": f"python -m omni_loader.cli.serve stage-group --variant baseline --checkpoint '{tiny_snapshot}'"}})
    starts = stages.Starts(tmp_path)
    named = "stage-2 loading the tiny Token2Wav (synthetic weights)"
    assert named in starts.timeline().table().caption
    caption = starts.comparison_table().caption
    head, notes = caption.split("<br>")
    assert head == f"Medians per stage and phase, {named}, and the kit's verdict"
    assert 'font-weight: normal' in notes and "no row" in notes
    assert starts.startup_row().startswith("Starts to `/health` with the tiny Token2Wav (synthetic weights) in the "
                                           "Token2Wav stage; the PR's, with Qwen/Qwen2.5-Omni-3B (released weights).")
    monkeypatch.setattr(serve_ab, "saved_serve_ab", lambda out: {})  # a directory that names no command
    starts = stages.Starts(tmp_path)  # read afresh: a Starts reads its model once
    assert starts.model is None and "loading" not in starts.timeline().table().caption


def test_06s_whole_milliseconds_keep_the_decimal_column(tmp_path: Path) -> None:
    """06's "6,305" (a log's whole ms) stood three places right of the "2,000.398" above it: the decimals it lacks
    are hidden space after it, so the digits align and no decimals are claimed that the log did not give."""
    import re

    import omni_loader.notebook.stages as stages
    from test_timeline import model_loaded_log

    from omni_loader.startup.timeline import parse_text

    html = stages.timeline(parse_text(model_loaded_log())).table().to_html()
    whole = re.search(r'<td [^>]*class="([^"]*)"[^>]*>5,604</td>', html)
    assert whole and "short-ms0" in whole[1].split()
    assert re.search(r'td\.short-ms0::after \{\s*content: "\.000";\s*visibility: hidden;', html)
    assert not re.search(r'class="[^"]*short-ms0[^"]*"[^>]*>63\.406<', html)


def test_05s_line_is_set_beside_03s_at_token2wav_and_says_when_the_machine_ran_in_another_mode(tmp_path: Path) -> None:
    """03 and 05 timed the same baseline rule on the full-size Token2Wav at 1,244 and 642 ms and said nothing of it:
    the host has a fast and a slow mode. 05's line now sets the point beside 03's saved one, and where the pooled
    repeats fall in two clusters with the sweeps in different ones, says it is the machine's mode, not the code."""
    from types import SimpleNamespace

    from omni_loader.sweep.fits import level_beside_saved, two_modes

    def rows(seconds: list[float]) -> pd.DataFrame:
        return pd.DataFrame({"experiment": "baseline", "source": "token2wav-full", "x": 239148, "repeat": range(len(seconds)),
                             "seconds": seconds, "cpu_seconds": seconds})

    def point(median: float, predicted: float) -> dict:
        return {"experiment": "baseline", "source": "token2wav-full", "x": 239148, "median_seconds": median,
                "predicted_seconds": predicted}

    saved = [0.708, 0.859, 1.173, 1.244, 1.25, 1.3, 1.328]
    rows(saved).to_csv(tmp_path / "traversal.csv", index=False)
    record = {"placement": [point(1.244, 1.158)]}

    def result(seconds: list[float], predicted: float) -> SimpleNamespace:
        return SimpleNamespace(rows=rows(seconds), placement_for=lambda clock: pd.DataFrame(
            [point(float(pd.Series(seconds).median()), predicted)]))

    said = level_beside_saved(result([0.64, 0.642, 0.65], 0.626), record, tmp_path)
    assert said.startswith(" At the full-size Token2Wav (B·N = 239,148) this sweep's line predicts 626 ms (its 3 "
                           "repeats' median: 642 ms), the saved one's 1,158 ms (1,244 ms, 7 repeats): 0.54 times as "
                           "high."), said
    assert "this sweep's ran mostly at the fast one (3 of 3 fast), the saved sweep's at the slow one (2 of 7 fast), " \
           "so their levels differ by the machine's speed, not by the code" in said
    same = level_beside_saved(result([1.2, 1.21, 1.3], 1.1), record, tmp_path)
    assert same.endswith(", the same speed.") and "not by the code" not in same
    assert two_modes([0.83, 0.84, 0.86, 0.89, 1.1, 1.34, 2.38]) is None  # no gap of 1.3×; a lone outlier is no mode
    assert level_beside_saved(result([0.64], 0.626), {"placement": []}, tmp_path) == ""  # nothing saved to set it beside
