"""Both variants profiled, and their differential profile, section by section as notebook 02 shows them.

Each section is one method returning the tables that exist (a tool that did not run leaves no file), each under
its variant's heading.
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..profiling.diff import ProfileDiff
from ..profiling.notes import Profiles
from ..profiling.settings import DEFAULT_TOP

Q = "q (BH-adjusted p)"  # the differential table's q-value column: Benjamini-Hochberg's adjusted p-value
MEMORY_WORK = ("'zero_'", "'copy_'")  # the tensor methods that write fresh memory: construction, the parameters' copies
# The frames a flamegraph's phases are read from: the discovery rules' functions, the model's construction.
FLAME_PHASES = {"buffer_discovery": ("_baseline", "_optimized"), "construct": ("build_model",)}


def profile(snapshot: Any, variants: Any = "both", tools: Any = "all", out_dir: str | os.PathLike[str] = "profile", *,
            progress: bool = True, on_skip: Any = None, **overrides: Any) -> Profile:
    """Profile each variant into ``out_dir`` as ``omni-loader profile`` does, and return the run."""
    from ..profiling.run import profile_variants, with_overrides

    options, settings = with_overrides(None, None, overrides)
    return Profile(profile_variants(snapshot, variants, tools, out_dir, options, settings, progress=progress,
                                    on_skip=on_skip), out_dir, snapshot, options, settings.top)


class Profile(Profiles):
    """One profiling run of the variants (:func:`profile`), section by section as notebook 02 shows it."""

    def __init__(self, profiles: dict[str, Any], out: str | os.PathLike[str], snapshot: Any = None,
                 options: Any = None, top: int = DEFAULT_TOP) -> None:
        super().__init__(profiles)
        self.out, self.snapshot, self.options, self.top = Path(out), snapshot, options, top

    def phase_shares(self) -> list[Any]:
        """The unprofiled runs' phase times and shares side by side, and which untouched phase differs most."""
        from ..profiling.tables import phase_share_table

        return [phase_share_table(self), *self.phase_notes()]

    def state_dict_calls(self):  # -> Styler
        """``Module.state_dict``'s calls per variant: cProfile's primitive and total counts and the kit's own."""
        from ..profiling.tables import state_dict_call_table

        return state_dict_call_table(self)

    def top_functions(self, top: int | None = None) -> list[Any]:
        """cProfile's top functions by cumulative time for each variant it profiled (``top`` rows, default the
        profile's own), and a word if they rank oddly."""
        from ..profiling.outputs import TOP_FUNCTIONS_CSV
        from ..profiling.tables import top_function_table

        shown = [x for v in self if (self.out / v / TOP_FUNCTIONS_CSV).exists()
                 for x in (f"### {v}", top_function_table(self.out, v, top or self.top))]
        return shown + ([] if (said := self.profiled_against_unprofiled()) is None else [said])

    def profiled_against_unprofiled(self) -> str | None:
        """Where cProfile ranks the whole loads unlike their unprofiled runs: both, and the loads' memory work."""
        import json

        from ..formatting import duration
        from ..profiling.outputs import LOAD_JSON, read_top_functions

        figures = {}
        for v in self:
            try:
                top = read_top_functions(self.out, v)
                unprofiled = json.loads((self.out / v / LOAD_JSON).read_text())["phases"]["total"]
            except (OSError, ValueError, KeyError):
                return None
            load = top[top["function"].str.endswith("(load_token2wav)")]["cumtime"]
            memory = [top[top["function"].str.contains(m, regex=False)]["tottime"].sum() for m in MEMORY_WORK]
            if load.empty:
                return None
            figures[v] = (float(load.iloc[0]), float(unprofiled), memory)
        if len(figures) != 2:
            return None
        (a, (pa, ua, ma)), (b, (pb, ub, mb)) = figures.items()
        if (pa > pb) == (ua > ub):
            return None
        return (f"Profiled, the {b} load took {duration(pb)} against the {a} load's {duration(pa)}, the other way round "
                f"from their unprofiled runs above ({duration(ub)} against {duration(ua)}). Of the whole loads, "
                f"`zero_` and `copy_` took {duration(mb[0])} + {duration(mb[1])} ({b}) against {duration(ma[0])} + "
                f"{duration(ma[1])} ({a}): writing fresh memory, whose first touch on a virtual machine costs what the "
                "host asks at that moment (the flamegraphs' note below), not the Python code the fix changed.")

    def torch_operators(self, top: int | None = None) -> list[Any]:
        """torch.profiler's operators by self time and phase ranges for each variant it profiled; which was slower."""
        from ..profiling.outputs import TORCH_OPS_CSV, TRACE_JSON
        from ..profiling.tables import phase_range_table, torch_ops_table

        return [*(x for v in self if (self.out / v / TORCH_OPS_CSV).exists()
                  for x in (f"### {v}", torch_ops_table(self.out, v, top or self.top),
                            phase_range_table(self.out / v / TRACE_JSON))), *self.torch_notes()]

    def flamegraphs(self) -> list[Any]:
        """Each variant's interactive flamegraph of the load (or why there is none) and how wide it draws two phases."""
        shown: list[Any] = []
        for variant, p in self.items():
            flame = p.flamegraph()
            shown += [f"### {variant}" + (f", {self.snapshot.model}" if self.snapshot is not None else ""),
                      flame if flame is not None else
                      f"no flamegraph: {p.py_spy.get('skipped', 'py-spy was not run')}"]
        return [*shown, self.flame_note()]

    def flame_note(self) -> str:
        """How wide each flamegraph draws buffer discovery and construction, beside their unprofiled shares."""
        from ..profiling.flamegraph import load_stacks
        from ..reporting.measurements import label

        lines, size = [], None
        for variant, p in self.items():
            try:
                stacks, _ = load_stacks(p.files["speedscope"])
                shares = p.phase_shares().set_index("phase")["share"]
            except Exception:  # noqa: BLE001 - a note, not a table: no file, no sentence
                continue
            total = sum(w for _, w in stacks)
            if not total:
                continue
            parts = []
            for phase, functions in FLAME_PHASES.items():
                drawn = sum(w for path, w in stacks if any(name.split(".")[-1].split(" ")[0] in functions
                                                           for name, _ in path))
                if phase in shares:
                    parts.append(f"{label(phase).lower() if phase == 'construct' else label(phase)} "
                                 f"{100 * drawn / total:.1f}% of the graph's width against {100 * shares[phase]:.1f}% "
                                 "of the table's run")
            if parts:
                lines.append(f"- **{variant}**: " + "; ".join(parts) + ".")
            size = size or _parameter_mib(p.reference)
        if not lines:
            return ""
        return ("How wide each graph draws two phases, beside their share of the median unprofiled run in the phase "
                "table above:\n\n" + "\n".join(lines) + "\n\nThe widths differ because the two count different loads: "
                "a graph is one load, the first in a fresh worker that py-spy stops for every sample, where construction "
                + (f"writes {size:,.1f} MiB of fresh parameters" if size else "writes every parameter afresh")
                + " whose first touches the host prices at that moment; whatever construction gains there, every other "
                "frame loses in width. The table's run is unprofiled and its shares are of its own whole load: read the "
                "graph for *what* fills a load, the table for *how much*.")

    def where_time_goes(self, link_from: str | os.PathLike[str] | None = None) -> str:
        """``profile.md``'s attribution under the notebook's heading, without the tables the cells above show."""
        # The sentence setting discovery beside the whole load stays; its sections go one level under the notebook's.
        import re

        from ..profiling.summary import PHASE_SHARES, STATE_DICT_CALLS, read_summary
        from .showing import nested

        kept, section = [], ""
        for line in read_summary(self.out, link_from).splitlines():
            if line.startswith("# "):  # the title
                continue
            if line.startswith("## "):
                section = line
                if line.startswith((PHASE_SHARES, STATE_DICT_CALLS)):
                    continue
            if section.startswith(STATE_DICT_CALLS) or (section.startswith(PHASE_SHARES) and line.startswith("|")):
                continue
            kept.append(line)
        return nested(re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip() + "\n")

    def diff(self, runs: int, **more: Any) -> Diff:
        """The differential profile of the two variants profiled here: ``runs`` sampled loads each, in ``diff/``."""
        from ..profiling.diff import profile_diff

        return Diff.of(profile_diff(self.snapshot, tuple(self), runs=runs, out_dir=self.out, options=self.options,
                                    **more))


def _parameter_mib(reference: dict[str, Any]) -> float | None:
    """The MiB of parameters construction writes in the profiled model, or None for an unknown one."""
    from ..reporting.plots import MODEL_BY_BUFFERS
    from ..token2wav.model import inventory

    size = MODEL_BY_BUFFERS.get(int(reference.get("state_dict_calls") or 0))
    if size is None or reference.get("variant") != "baseline":
        return None
    return inventory(reference.get("layout") or "vllm-omni", "full" if size == "full-size" else size).parameter_bytes / 2**20


class Diff(ProfileDiff):
    """A differential profile as 02's last section shows it, times no finer than py-spy's sampling."""

    @classmethod
    def of(cls, diff: ProfileDiff) -> Diff:
        """``diff``, to show."""
        return cls(**{f.name: getattr(diff, f.name) for f in fields(diff) if f.init})

    @classmethod
    def read(cls, out_dir: str | os.PathLike[str]) -> Diff:
        """A differential profile written before (``out_dir`` or ``out_dir/diff``), to show."""
        from ..profiling.diff import read_profile_diff

        return cls.of(read_profile_diff(out_dir))

    def section(self) -> list[Any]:
        """Its sentences (``diff.md`` without the table, under the notebook's heading), its table, its flamegraph."""
        from .showing import nested

        return [nested(self.markdown(with_table=False)), self.table(), self.flamegraph()]

    def table(self):  # -> Styler
        """Its functions as a notebook table: medians, B − A and its interval in one unit, q, 01's verdict words."""
        import math

        import numpy as np
        import pandas as pd

        from ..formatting import TIME_SCALE, number, short_duration, table, time_unit
        from ..profiling.diff_stats import NO_CLAIM as NOT_CLAIMED
        from ..profiling.settings import DEFAULT_RATE
        from .ab_tables import NO_CLAIM, TO
        from .showing import unbroken

        shown = self.shown()
        unit = time_unit([x for x in shown[["a_median_s", "b_median_s"]].to_numpy().ravel() if x > 0] or [0.0])
        rate = float(self.settings.get("rate") or DEFAULT_RATE)
        digits = max(0, math.floor(-math.log10(1 / rate * TIME_SCALE[unit])))  # no finer than one sample

        def shown_in_unit(seconds: Any) -> Any:  # a time or a column of them, rounded to what is shown, a -0 made 0
            return np.round(seconds * TIME_SCALE[unit], digits) + 0.0

        def bare(value: float) -> str:  # with a minus sign, as the sentences write one, not a hyphen
            return f"{value:,.{digits}f}".replace("-", "\u2212")

        times = {f"A median ({unit})": "a_median_s", f"B median ({unit})": "b_median_s", f"B − A ({unit})": "delta_s"}
        low, high = shown_in_unit(shown["ci_low"]), shown_in_unit(shown["ci_high"])
        frame = pd.DataFrame({
            "function (file)": [f"{r['function']}\n{r['file']}" for _, r in shown.iterrows()],
            **{name: shown_in_unit(shown[column]) for name, column in times.items()},
            f"95% interval of B − A ({unit})": [bare(a) + TO + bare(b) for a, b in zip(low, high)],
            Q: shown["q"], "verdict": [unbroken(NO_CLAIM if v == NOT_CLAIMED else v) for v in shown["verdict"]],
            "role": shown["role"]})
        caption = (f"Times to the nearest {10.0 ** -digits:g} {unit}: py-spy sampled at {number(rate)} Hz, "
                   f"one sample every {short_duration(1 / rate)}")
        styler = table(frame.reset_index(drop=True), decimals={**{name: digits for name in times}, Q: 4},
                       names=["function (file)"], caption=caption)
        return styler.format(bare, subset=[f"B − A ({unit})"])  # a minus sign, as in the interval beside it
