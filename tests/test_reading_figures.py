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
