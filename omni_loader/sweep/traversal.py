"""What module traversal costs: both discovery rules timed on real and synthetic module trees.

The baseline rule rebuilds the state dict once per named buffer, so its cost grows as B·N; the optimized rule
walks the tree a fixed number of times, so its cost grows as N + B. :func:`traversal_sweep` (``omni-loader
traversal``) times (a) one ``state_dict()`` against N, (b) the baseline against B·N and (c) the optimized walk
against N + B on the trees of :mod:`~.trees`, fits them (:mod:`~.fits`) and places the real Token2Wav on the
same axes.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from torch import nn

from .discovery_timing import calibration, experiment_calls, per_call_seconds, round_estimate
from .fits import (CLOCKS, CSV_COLUMNS, EXPERIMENTS, SYNTHETIC, LogLogFit, baseline_over_state_dicts, cost_summary,
                   experiment_x, fit_sweep, linear_costs, place_points, placement_sentence, slope_beside_saved,
                   source_words)
from .traversal_plots import plot_sweep
from .trees import build_tree, token2wav_model, tree_counts

FILES = {"rows": "traversal.csv", "fits_csv": "fits.csv", "fits_json": "fits.json", "plot_png": "traversal.png",
         "plot_svg": "traversal.svg", "plot_cpu_png": "traversal_cpu.png", "plot_cpu_svg": "traversal_cpu.svg"}


@dataclass(frozen=True)
class SweepConfig:
    """What the sweep measures: the full sweep by default; :meth:`quick` fits in seconds.

    Every (N, B) pair of ``n_values`` x ``b_values`` is one tree; ``baseline`` is timed only where B·N <=
    ``max_baseline_bn``; ``token2wav`` ('full', 'tiny' or None) adds the real model, built on the CPU.
    """

    n_values: tuple[int, ...] = (32, 64, 128, 256, 512, 1024, 2048, 4096)
    b_values: tuple[int, ...] = (4, 16, 64, 256)
    repeats: int = 7
    warmup: int = 1
    min_time: float = 0.005
    max_baseline_bn: int = 2**19
    fanout: int = 4
    token2wav: str | None = "full"
    token2wav_layout: str = "vllm-omni"
    seed: int = 0  # order of the trees within each repeat round
    touch: int = 5  # untimed state_dict() calls on a model right before its timed round (cache warm-up)

    def __post_init__(self) -> None:
        if self.repeats < 1:
            raise ValueError(f"repeats must be at least 1, not {self.repeats}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be at least 0, not {self.warmup}")

    @classmethod
    def quick(cls, **overrides: Any) -> SweepConfig:
        base = cls(n_values=(16, 64, 256, 1024), b_values=(4, 16, 64), repeats=3, warmup=1, min_time=0.001,
                   max_baseline_bn=2**16)
        return replace(base, **overrides)

    @classmethod
    def preset(cls, quick: bool = False, *, repeats: int | None = None, warmup: int | None = None,
               **overrides: Any) -> SweepConfig:
        """The quick or full settings with ``overrides``; ``repeats``/``warmup`` None keep the preset's."""
        counts = {k: v for k, v in (("repeats", repeats), ("warmup", warmup)) if v is not None}
        return (cls.quick if quick else cls)(**counts, **overrides)

    def trees(self) -> list[tuple[int, int]]:
        return [(n, b) for n in self.n_values for b in self.b_values]


@dataclass(frozen=True)
class Subject:
    """One model of the sweep, built and warmed up: where its rows come from and how often each call runs."""

    source: str
    model: nn.Module
    counts: tuple[int, int]
    number: dict[str, int]
    round_estimate: float = math.nan  # seconds one timed round should take, from the warm-up (see run_sweep)

    def measure(self, repeat: int, touch: int) -> list[dict[str, Any]]:
        """One timed repeat of each experiment in ``number``: one tidy row each, after ``touch`` untimed
        ``state_dict()`` calls that warm the caches, so large trees are not timed cold and small ones warm."""
        n, b = self.counts
        calls = experiment_calls(self.model)
        for _ in range(touch):
            self.model.state_dict()
        rows = []
        for exp, k in self.number.items():
            wall, cpu = per_call_seconds(calls[exp], k)
            rows.append({"experiment": exp, "source": self.source, "N": n, "B": b, "x": experiment_x(exp, n, b),
                         "repeat": repeat, "seconds": wall, "cpu_seconds": cpu, "number": k})
        return rows


def subjects(config: SweepConfig, bar: Any) -> list[Subject]:
    """Every tree of ``config`` (and the real Token2Wav), built and calibrated; ``bar`` ticks once per model."""
    out: list[Subject] = []
    models = len(config.trees()) + bool(config.token2wav)

    def add(source: str, model: nn.Module, counts: tuple[int, int], experiments: list[str]) -> None:
        number, last = calibration(model, experiments, config.warmup, config.min_time)
        out.append(Subject(source, model, counts, number, round_estimate(number, last, config.touch)))
        bar.set_postfix_str(building_words(len(out), models), refresh=False)
        bar.update(1)

    for n, b in config.trees():
        add(SYNTHETIC, build_tree(n, b, fanout=config.fanout), (n, b),
            [e for e in EXPERIMENTS if e != "baseline" or b * n <= config.max_baseline_bn])
    if config.token2wav:
        model = token2wav_model(config.token2wav, config.token2wav_layout)
        add(f"token2wav-{config.token2wav}", model, tree_counts(model), list(EXPERIMENTS))
    return out


def building_words(built: int, models: int) -> str:
    """The sweep bar's text while it builds: no time left yet (the first builds' pace says nothing of the rest)."""
    return f"{built}/{models} models built and warmed up; time left once the timing starts"


def done_words(repeats: int, models: int) -> str:
    """The sweep bar's last text; it names the warm-up round too, since the count is models × (repeats + 1)."""
    return f"done: a warm-up round and {repeats} repeat{'' if repeats == 1 else 's'} of {models} models"


def run_sweep(config: SweepConfig | None = None, progress: bool = True,
              clock: Callable[[], float] = time.perf_counter):  # -> pandas.DataFrame
    """Measure every tree of ``config`` (and the real Token2Wav); one tidy row per timed repeat.

    Each repeat is one round over all models in a fresh seeded order, so a burst of load lands on different trees
    in different rounds; the bar prices each model's rounds by its own warm-up cost.
    """
    import pandas as pd

    from ..progress import BAR_FORMAT, TICK, Countdown, Redrawer, Step, StepBar, progress_bar

    config = config or SweepConfig()
    models = len(config.trees()) + bool(config.token2wav)
    rows: list[dict[str, Any]] = []
    with progress_bar(total=models * (config.repeats + 1), desc="traversal sweep", unit="model", enabled=progress,
                      bar_format=BAR_FORMAT, postfix=building_words(0, models)) as bar:
        plan = subjects(config, bar)
        rng = random.Random(config.seed)
        queue = [(repeat, i) for repeat in range(config.repeats) for i in rng.sample(range(len(plan)), len(plan))]
        rounds = [Step("round", str(i)) for _, i in queue]
        countdown = Countdown(rounds, clock)
        countdown.scale = {str(i): s.round_estimate for i, s in enumerate(plan)
                           if s.round_estimate > 0 and math.isfinite(s.round_estimate)}
        steps = StepBar(bar, countdown, unknown="time left after the first model is timed")
        with Redrawer(steps, TICK):  # the time left counts down while one model is timed
            for (repeat, i), step in zip(queue, rounds):
                steps.begin(step, f"repeat {repeat + 1}/{config.repeats}")  # the bar ticks as the model before ends
                rows += plan[i].measure(repeat, config.touch)
            steps.finish(done_words(config.repeats, models))
    order = {e: i for i, e in enumerate(EXPERIMENTS)}
    frame = pd.DataFrame(rows, columns=list(CSV_COLUMNS))
    frame = frame.assign(_src=frame.source != SYNTHETIC, _exp=frame.experiment.map(order))
    frame = frame.sort_values(["_src", "N", "B", "repeat", "_exp"], kind="stable")
    return frame.drop(columns=["_src", "_exp"]).reset_index(drop=True)


@dataclass(frozen=True)
class SweepResult:
    """The sweep's rows, fits and where the real model sits, by wall clock and by thread CPU time (``*_cpu``: what
    to trust when other processes compete for the cores); ``files``: what :func:`write_sweep` wrote."""

    rows: Any  # pandas.DataFrame, columns CSV_COLUMNS
    fits: dict[str, LogLogFit]
    placement: Any  # pandas.DataFrame (see fits.place_points)
    config: SweepConfig
    fits_cpu: dict[str, LogLogFit] = field(default_factory=dict)
    placement_cpu: Any = None
    seconds: float = 0.0
    files: dict[str, Path] = field(default_factory=dict)

    def fits_for(self, clock: str) -> dict[str, LogLogFit]:
        """The log-log fits on ``clock`` (``wall`` or ``cpu``), by experiment."""
        return self.fits if clock == "wall" else self.fits_cpu

    def placement_for(self, clock: str) -> Any:
        """Where the real model sits on ``clock``'s fitted lines (a DataFrame, one row per experiment)."""
        return self.placement if clock == "wall" else self.placement_cpu

    def plot(self, clock: str = "wall"):  # -> ShownFigure
        """The sweep's medians against N, B and B·N on ``clock`` with their log-log fits."""
        return plot_sweep(self.rows, self.fits_for(clock), clock)

    def cost_summary(self, clock: str = "cpu") -> str:
        """The optimized rule's cost split into per-module, per-buffer and fixed terms (:func:`~.fits.cost_summary`)."""
        return cost_summary(self.rows, clock)

    def baseline_over_state_dicts(self, clock: str = "cpu"):  # -> DataFrame
        """The baseline beside B state dicts, tree by tree (:func:`~.fits.baseline_over_state_dicts`)."""
        return baseline_over_state_dicts(self.rows, clock)

    def placement_sentence(self, clock: str = "wall") -> str:
        """Where the real model sits on the fitted lines, in words (:func:`~.fits.placement_sentence`)."""
        return placement_sentence(self.placement_for(clock), "wall clock" if clock == "wall" else "CPU time")

    def slope_beside_saved(self, saved: str | Path) -> str:
        """This sweep's baseline slope beside the one saved in ``saved`` (:func:`~.fits.slope_beside_saved`)."""
        return slope_beside_saved(self, saved)

    def fits_frame(self):  # -> DataFrame
        """Every fit on both clocks, one row each: what fits.csv holds."""
        import pandas as pd

        return pd.DataFrame([
            {"clock": clock, "experiment": e, "x": EXPERIMENTS[e][1], **f.to_dict()}
            for clock in CLOCKS for e, f in self.fits_for(clock).items()
        ])

    def summary(self) -> str:
        """A few lines for a terminal: the trees, each fit's slope and R², where the real model sits."""
        from ..formatting import short_duration

        lines = [(f"traversal sweep: {len(self.config.trees())} synthetic trees, {self.config.repeats} repeat{'' if self.config.repeats == 1 else 's'}, "
                  f"{self.seconds:.1f} s")]
        for clock in CLOCKS:
            for exp, fit in self.fits_for(clock).items():
                lines.append(f"  {clock:<4} {exp:<10} vs {EXPERIMENTS[exp][1]:<26} slope {fit.slope:6.3f} "
                             f"± {fit.stderr:.3f}   R² {fit.r2:.4f}   ({fit.n_points} points)")
        for clock in CLOCKS:
            placement = self.placement_for(clock)
            for rec in ([] if placement is None else placement.itertuples(index=False)):
                where = "inside" if rec.inside_fitted_range else "outside"
                # under 110 characters: Lab does not wrap printed lines, and its output area ends near there
                lines.append(f"  {clock:<4} {source_words(rec.source)} {rec.experiment:<10} x={rec.x:>8,}  median "
                             f"{short_duration(rec.median_seconds):>9} = {rec.measured_over_fit:.2f}× the line "
                             f"({where} its x range)")
        return "\n".join(lines)


def fits_record(result: SweepResult) -> dict[str, Any]:
    """What fits.json holds: the settings, the fits and placements on both clocks, the linear costs."""
    from ..results.metadata import environment, now_iso

    record: dict[str, Any] = {
        "created": now_iso(),
        "config": asdict(result.config),
        "seconds": result.seconds,
        "experiments": {e: {"timed": what, "x": x} for e, (what, x) in EXPERIMENTS.items()},
        "columns": {"seconds": "wall clock per call", "cpu_seconds": "thread CPU time per call"},
    }
    for clock, suffix in (("wall", ""), ("cpu", "_cpu")):
        ratio = baseline_over_state_dicts(result.rows, clock)
        placement = result.placement_for(clock)
        record["fits" + suffix] = {e: f.to_dict() for e, f in result.fits_for(clock).items()}
        record["placement" + suffix] = placement.to_dict(orient="records") if placement is not None else []
        record["baseline_over_B_state_dicts_median" + suffix] = (
            float(ratio["baseline_over_B_state_dicts"].median()) if len(ratio) else None)
        try:
            record["optimized_linear_costs" + suffix] = linear_costs(result.rows, "optimized", clock)
        except ValueError:
            record["optimized_linear_costs" + suffix] = None
    record["environment"] = environment("cpu")
    return record


def write_sweep(out_dir: str | Path, result: SweepResult) -> dict[str, Path]:
    """Write traversal.csv, fits.csv, fits.json and the plots (PNG and SVG, wall and CPU) into ``out_dir``."""
    from ..safe_files import ensure_dir, open_file, refuse_links, write_text

    out = ensure_dir(out_dir)  # a linked folder is refused, never written into
    files = {key: out / name for key, name in FILES.items()}
    refuse_links(out, FILES.values())  # every file checked before the first byte is written
    with open_file(files["rows"], "w", newline="") as fh:  # never through a link (omni_loader.safe_files)
        result.rows.to_csv(fh, index=False)
    with open_file(files["fits_csv"], "w", newline="") as fh:
        result.fits_frame().to_csv(fh, index=False)
    write_text(files["fits_json"], json.dumps(fits_record(result), indent=2, default=str))
    for clock, png, svg in (("wall", "plot_png", "plot_svg"), ("cpu", "plot_cpu_png", "plot_cpu_svg")):
        fig = result.plot(clock)
        for key, dpi in ((png, 110), (svg, None)):
            with open_file(files[key], "w", binary=True) as fh:
                fig.savefig(fh, format=files[key].suffix[1:], dpi=dpi, bbox_inches="tight")  # a wide title kept whole
    return files


def sweep(quick: bool = False, out_dir: str | Path | None = None, *, repeats: int | None = None,
          token2wav: str | None = "full") -> SweepResult:
    """The full or ``quick`` traversal sweep, into ``out_dir`` when given (``token2wav`` None: no real model)."""
    return traversal_sweep(SweepConfig.preset(quick, repeats=repeats, token2wav=token2wav), out_dir)


def traversal_sweep(config: SweepConfig | None = None, out_dir: str | Path | None = None,
                    progress: bool = True) -> SweepResult:
    """Run the sweep ``config`` describes, fit it on both clocks, and write it into ``out_dir`` when given."""
    config = config or SweepConfig()
    start = time.perf_counter()
    rows = run_sweep(config, progress=progress)
    fits, fits_cpu = fit_sweep(rows, "wall"), fit_sweep(rows, "cpu")
    result = SweepResult(rows=rows, fits=fits, placement=place_points(rows, fits, "wall"), config=config,
                         fits_cpu=fits_cpu, placement_cpu=place_points(rows, fits_cpu, "cpu"),
                         seconds=time.perf_counter() - start)
    if out_dir is not None:
        result = replace(result, files=write_sweep(out_dir, result))
    return result
