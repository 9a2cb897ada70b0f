"""A differential profile: which functions a change made faster or slower, over fresh-process runs.

One profiled load per variant shows *what* a load does, not whether a function's difference is the
change or the machine. :func:`profile_diff` runs the plan ``reproduce`` runs (randomized blocks of
fresh processes forked from the kit's fork server, :func:`~omni_loader.results.planner.plan_runs`),
and samples every measured load with py-spy, attached to the forked process before it is let go
(``--idle``: wall-clock samples, as the load phases are timed; the imports were done by the fork
server and are not sampled). Each run's samples are folded into per-function times and compared,
function by function, with a rank test, a bootstrap interval and Benjamini-Hochberg
(:mod:`~omni_loader.profiling.diff_stats` holds the statistics and says how a claim is made);
:class:`ProfileDiff` holds the result and says it (``diff.md``). With ``aa`` (``--aa``), as ``reproduce --aa``,
two more arms of each block load :data:`~omni_loader.bench.spec.AA_VARIANT`, sampled alike: their
difference is each function's A/A floor, and a difference within it is not claimed.

Each block also holds one unsampled load per variant (the kit's ordinary forked run), so the
report states what py-spy's sampling costs a load, from the same runs. Written under ``DIR/diff/``:
``functions.csv``, ``diff.md``, ``flame-diff.svg`` (:mod:`~omni_loader.profiling.diff_flame`), ``runs.csv`` (every
run's load total), ``run_functions.csv`` (every run's fold) and each sampled run's speedscope file (``speedscope/``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import OmniLoaderError
from ..formatting import duration, markdown_table, number, span, time_unit
from ..names import VARIANTS
from ..token2wav.options import LoadOptions
from .pyspy import PySpyUnavailable, find_py_spy
from .sampled import sampled_load
from .settings import DEFAULT_RATE, MAX_RATE, MIN_RATE, RATE_LIMITS
from .time_left import BAR_FORMAT, TICK, TIMED, Countdown, Step, StepBar
from ..bench.spec import AA_ARMS, AA_VARIANT
from .diff_stats import (APPEARED, FASTER, FDR, FUNCTION_COLUMNS, MIN_SAMPLES, NO_CLAIM, PRESENCE, SLOWER,
                         assign_roles, compare_functions, fold_samples, function_floors)
from .diff_words import (disk_blamed, entry_sentence, presence_words, reach_words,
                         sample_totals, signed)
from ..results.lock import writer_lock
from ..safe_files import ensure_dir, write_text

DIFF_DIR = "diff"
FUNCTIONS_CSV = "functions.csv"
DIFF_MD = "diff.md"
DIFF_JSON = "diff.json"
FLAME_DIFF_SVG = "flame-diff.svg"
RUNS_CSV = "runs.csv"
RUN_FUNCTIONS_CSV = "run_functions.csv"
SPEEDSCOPE_DIR = "speedscope"
DEFAULT_RUNS = 15  # sampled loads per variant: enough for a rank test to survive ~300 tests at 5% FDR
ROLE_WORDS = {"caller": "a caller: its time moved in the functions it calls",
              "unexplained": "no callee's own time is claimed to move with it"}
UNSAMPLED = ":unsampled"  # the plan's label of a variant's unsampled load (the overhead's yardstick)
NO_SLOWER = ": no slower sampled, its cost within the loads' spread"  # not a profiler that sped a load up (Lab pass)
SAMPLED = "sampled"  # the kind of step of a load sampled by py-spy, on the bar's time left


# --------------------------------------------------------------------------- the result


@dataclass
class ProfileDiff:
    """A differential profile of ``a`` against ``b``: :attr:`functions` (one row per function, the
    claims first), :attr:`runs` (every run's load total, sampled or not) and :attr:`folds` (every
    sampled run's per-function times); :meth:`markdown` and :meth:`flamegraph` say and draw it."""

    a: str
    b: str
    functions: pd.DataFrame
    runs: pd.DataFrame
    folds: pd.DataFrame
    directory: Path
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def claimed(self) -> pd.DataFrame:
        return self.functions[self.functions["verdict"] != NO_CLAIM]

    def overhead(self) -> dict[str, dict[str, float]]:
        """Per variant: the median load total unsampled and under py-spy, and their ratio."""
        r = self.runs[(~self.runs["warmup"]) & (self.runs["status"] == "ok")]
        out = {}
        for v in (self.a, self.b):
            plain = r[(r["variant"] == v) & ~r["sampled"]]["load_s"]
            spied = r[(r["variant"] == v) & r["sampled"]]["load_s"]
            if len(plain) and len(spied):
                out[v] = {"unsampled_s": float(plain.median()), "sampled_s": float(spied.median()),
                          "ratio": float(spied.median() / plain.median()), "runs": int(len(spied))}
        return out

    def entry_sentence(self) -> str | None:
        """Why ``load_token2wav``'s time from the samples is not the sampled median load beside it
        (:func:`~omni_loader.profiling.diff_words.entry_sentence`)."""
        return entry_sentence(self)

    def sample_totals(self) -> dict[str, tuple[int, int]]:
        """Per variant: its sampled runs and their samples under the entry (:func:`~.diff_words.sample_totals`)."""
        return sample_totals(self.folds, (self.a, self.b))

    def sentences(self) -> list[str]:
        """One sentence per claimed function, from the table's numbers."""
        out = []
        for _, r in self.claimed.iterrows():
            unit = time_unit(max(r["a_median_s"], r["b_median_s"]))
            own = (f"; its own time {duration(r['a_self_median_s'], unit, 0)} → {duration(r['b_self_median_s'], unit, 0)}"
                   if r["role"] == "own time" else "; " + ROLE_WORDS.get(r["role"], r["role"]))
            out.append(f"`{r['function']}` ({r['file']}): {duration(r['a_median_s'], unit, 0)} → "
                       f"{duration(r['b_median_s'], unit, 0)}, {r['verdict']} by {duration(abs(r['delta_s']), unit, 0)} "
                       f"(95% interval of B − A {span(signed(r['ci_low'], unit), signed(r['ci_high'], unit))}, "
                       f"q = {number(r['q'], 2)}{self._beyond(r, unit)}){self._calls(r['function'])}"
                       f"{self._presence(r)}{own}.")
        return out

    def _presence(self, r: pd.Series) -> str:
        return presence_words(r, self.a, self.b, self.sample_totals(), len(self.functions))

    def doubt_sentence(self) -> str | None:
        """What else explains B slower: chance or the machine (02's Lab run claimed ``_load_stacked_shard`` slower)."""
        claimed = self.claimed
        slower = claimed[claimed["verdict"] == SLOWER]
        if slower.empty:
            return None
        fdr = self.settings.get("fdr", FDR)
        names = ", ".join(f"`{x}`" for x in slower["function"].head(5))
        held = ("each was held to its own A/A floor" if self.settings.get("aa") else
                "an A/A in the same blocks (`--aa`) would hold each to its own noise floor")
        return (f"{self.b} slower in {len(slower)} function{'s' * (len(slower) != 1)} ({names}): unless {self.b} adds "
                f"work there, what else explains it is chance (a {fdr:.0%} false discovery rate lets about 1 false claim in "
                f"{round(1 / fdr)} through; this diff made {len(claimed)}) or the machine changing between blocks; {held}.")

    @staticmethod
    def _beyond(r: pd.Series, unit: str) -> str:
        return "" if pd.isna(r.get("aa_floor_s")) else f", beyond its A/A floor of {duration(r['aa_floor_s'], unit, 0)}"

    def floor_sentence(self) -> str:
        """Which A/A floor the claims were held to, or that there was none."""
        f = self.functions
        if not self.settings.get("aa"):
            return ("No A/A floor: no A/A arms ran beside this diff (`--aa` adds them), so a claim rests on its "
                    "q-value and interval alone.")
        r = self.runs
        n = [int(((r["variant"] == arm) & r["sampled"] & ~r["warmup"] & (r["status"] == "ok")).sum()) for arm in AA_ARMS]
        has = int((f["tested"] & f["aa_floor_s"].notna()).sum())
        held = f[f["within_aa_floor"] | f["self_within_aa_floor"]]
        return (f"A/A floor: {self.settings.get('aa_variant', AA_VARIANT)} in two more arms of the same blocks "
                f"({n[0]} and {n[1]} sampled loads); a function's floor is the larger of its A/A difference of medians "
                f"and the half-width of that difference's 95% interval (`reproduce --aa`'s noise floor, per "
                f"function), and a difference within it is not claimed. {has} of the {int(f['tested'].sum())} tested "
                f"functions have one (the others were sampled in under {PRESENCE:.0%} of both A/A arms' runs: no "
                f"floor); {len(held)} difference{'' if len(held) == 1 else 's'} that the test and the interval would claim "
                f"{'was' if len(held) == 1 else 'were'} within it"
                + (f" ({', '.join(f'`{x}`' for x in held['function'].head(5))})" if len(held) else "") + ".")

    def _calls(self, function: str) -> str:
        if function.split(".")[-1] != "state_dict" or "state_dict_calls" not in self.runs:
            return ""
        r = self.runs[(~self.runs["warmup"]) & (self.runs["status"] == "ok")]
        n = {v: r[r["variant"] == v]["state_dict_calls"].median() for v in (self.a, self.b)}
        if any(pd.isna(x) for x in n.values()) or n[self.a] == n[self.b]:
            return ""
        gone = n[self.a] - n[self.b]
        return f", {abs(gone):,.0f} calls per load {'removed' if gone > 0 else 'added'}"

    def markdown(self, with_table: bool = True) -> str:
        """``diff.md``: the claims, one sentence each, then how many were tested and moved, and py-spy's cost,
        and (``with_table``) the table of the claimed functions (a notebook shows ``kit.profiling.diff_table``)."""
        f = self.functions
        tested, claimed = int(f["tested"].sum()), self.claimed
        n = {v: int(((self.runs["variant"] == v) & self.runs["sampled"] & ~self.runs["warmup"]
                     & (self.runs["status"] == "ok")).sum()) for v in (self.a, self.b)}
        lines = [f"# Differential profile: {self.a} (A) against {self.b} (B)", ""]
        lines += [f"- {s}" for s in self.sentences()] or ["- No function is claimed to move."]
        faster, slower = (int((claimed["verdict"] == v).sum()) for v in (FASTER, SLOWER))
        present = int(claimed["presence"].isin([APPEARED, "gone"]).sum()) if "presence" in claimed else 0
        tests_run = tested + int(f["self_tested"].sum())
        roles = claimed["role"].value_counts()
        self_only = f[(f["verdict"] == NO_CLAIM) & (f["self_verdict"] != NO_CLAIM)]
        lines += ["", f"{tested} of {len(f)} functions sampled under `load_token2wav` were tested (sampled in at least "
                      f"{PRESENCE:.0%} of one variant's runs; {n[self.a]} sampled loads of {self.a}, {n[self.b]} of "
                      f"{self.b}); {len(claimed)} moved ({faster} faster, {slower} slower) at a "
                      f"{self.settings.get('fdr', FDR):.0%} false discovery rate (Benjamini-Hochberg over the "
                      f"Mann-Whitney p-values of inclusive and self time, and a 95% bootstrap interval of the "
                      f"difference of medians that excludes zero); the rest: {NO_CLAIM}. Of the {len(claimed)}: "
                      f"{roles.get('own time', 0)} moved in their own code, {roles.get('caller', 0)} are callers "
                      f"whose inclusive time contains such a change, {roles.get('unexplained', 0)} unexplained"
                      + (f"; {len(self_only)} more moved in their own time only "
                         f"({', '.join(f'`{x}`' for x in self_only['function'].head(5))})" if len(self_only) else "")
                      + f". Appeared or gone: {present} of the claims, each sampled in every run of one variant (at "
                      f"least {MIN_SAMPLES} samples each) and in none of the other's, claimed from a binomial test on "
                      f"their sample counts, a family of its own held to {self.settings.get('fdr', FDR):.0%} by "
                      f"Bonferroni over the {len(f)} functions sampled (a {self.settings.get('fdr', FDR):.0%} chance "
                      "of any false one; the test takes samples for independent draws: a function that some "
                      "processes run and others do not, whatever the variant, splits so by chance at most once in "
                      f"{round(0.5 / 0.5 ** (n[self.a] + n[self.b])):,} such functions at these runs)."]
        for v, o in self.overhead().items():
            lines.append(f"- py-spy's cost on {v}: median load {duration(o['unsampled_s'])} unsampled, "
                         f"{duration(o['sampled_s'])} sampled at {self.settings.get('rate', DEFAULT_RATE)} Hz "
                         f"({o['ratio']:.2f}×{NO_SLOWER if o['ratio'] < 1 else ''}).")
        if self.overhead() and (entry := self.entry_sentence()) is not None:
            lines.append(f"- {entry}")
        if (doubt := self.doubt_sentence()) is not None:
            lines.append(f"- {doubt}")
        lines += ["", reach_words(n[self.a], n[self.b], tests_run, f"{tested} functions' inclusive time and "
                                  f"{int(f['self_tested'].sum())} self times", self.settings.get("fdr", FDR)),
                  "", self.floor_sentence()]
        if not with_table:
            return "\n".join(lines)
        shown = self.shown()
        unit = time_unit([x for x in shown[["a_median_s", "b_median_s"]].to_numpy().ravel() if x > 0] or [0.0])
        floor = bool(self.settings.get("aa"))
        table = markdown_table([[f"`{r['function']}`", r["file"], *(duration(r[c], unit, 1) for c in
                                 ("a_median_s", "b_median_s", "delta_s", "ci_low", "ci_high")), number(r["q"], 2),
                                 *(["—" if pd.isna(r["aa_floor_s"]) else duration(r["aa_floor_s"], unit, 1)] if floor
                                   else []), r["verdict"], r["role"]] for _, r in shown.iterrows()],
                               ["function", "file", "A median", "B median", "B − A", "95% low", "95% high", "q",
                                *(["A/A floor"] if floor else []), "verdict", "role"], right=range(2, 8 + floor))
        lines += ["", "Claimed functions:" if len(claimed) else "The largest tested differences (none claimed):", "",
                  table, ""]
        return "\n".join(lines)

    def shown(self):  # -> DataFrame
        """The rows of ``diff.md``'s table: the claimed functions, or the largest tested differences if none is."""
        return self.claimed if len(self.claimed) else self.functions[self.functions["tested"]].head(10)

    def flamegraph(self, link_from: str | os.PathLike[str] | None = None) -> Any:
        """The differential flamegraph, for inline display (:class:`~omni_loader.profiling.diff_flame.DiffFlameView`)."""
        from .diff_flame import DiffFlameView

        return DiffFlameView(self, link_from=link_from, files=(FUNCTIONS_CSV, DIFF_MD))

    def write(self) -> dict[str, Path]:
        """Write ``functions.csv``, ``diff.md`` and ``flame-diff.svg`` into :attr:`directory`."""
        from .diff_flame import write_svg

        d = self.directory
        write_text(d / DIFF_JSON, json.dumps({"a": self.a, "b": self.b, **self.settings}, indent=2) + "\n")
        write_text(d / FUNCTIONS_CSV, self.functions.to_csv(index=False))
        write_text(d / DIFF_MD, self.markdown())
        return {"functions": d / FUNCTIONS_CSV, "diff": d / DIFF_MD, "flamegraph": write_svg(self, d / FLAME_DIFF_SVG),
                "runs": d / RUNS_CSV, "run_functions": d / RUN_FUNCTIONS_CSV}


def read_profile_diff(out_dir: str | os.PathLike[str]) -> ProfileDiff:
    """A differential profile written before (``out_dir`` or ``out_dir/diff``), read back whole."""
    d = Path(out_dir)
    d = d if (d / DIFF_JSON).is_file() else d / DIFF_DIR
    try:
        meta = json.loads((d / DIFF_JSON).read_text())
        runs = pd.read_csv(d / RUNS_CSV, keep_default_na=False, na_values=[""])
        folds = pd.read_csv(d / RUN_FUNCTIONS_CSV, keep_default_na=False, na_values=[""])
        functions = pd.read_csv(d / FUNCTIONS_CSV, keep_default_na=False, na_values=[""])
    except (OSError, ValueError) as exc:
        raise OmniLoaderError(f"{d}: not a differential profile ({exc})") from None
    for frame in (folds, functions):
        frame["file"] = frame["file"].fillna("").astype(str)
    for column in FUNCTION_COLUMNS:  # a diff written before the A/A floor or the presence test: none
        if column not in functions:
            functions[column] = False if column.endswith("within_aa_floor") else np.nan
    functions["presence"] = functions["presence"].fillna("").astype(str)
    a, b = meta.pop("a"), meta.pop("b")
    return ProfileDiff(a, b, functions, runs, folds, d, meta)


# --------------------------------------------------------------------------- running it


def profile_diff(snapshot: Any, variants: tuple[str, str] | list[str] = VARIANTS, runs: int = DEFAULT_RUNS,
                 out_dir: str | os.PathLike[str] = "results/profile-diff", *, options: LoadOptions | None = None,
                 custom_variants: tuple[Any, ...] | list[Any] = (), warmup: int = 1, rate: int = DEFAULT_RATE,
                 seed: int = 0, py_spy: str | None = None, worker_timeout: float | None = None, fdr: float = FDR,
                 aa: bool = False, progress: bool = True) -> ProfileDiff:
    """Run the differential profile of ``variants`` (A, B; the same name twice is an A/A diff) on
    ``snapshot`` into ``out_dir/diff/`` and return it (see the module doc). ``runs``: sampled loads per
    variant (and as many unsampled ones, for py-spy's cost); ``custom_variants``: ``--variant`` values
    (:func:`~omni_loader.token2wav.variants.parse_variant`) the names may refer to; ``aa``: also sample an A/A
    of :data:`~omni_loader.bench.spec.AA_VARIANT` in each block, each function's floor."""
    from ..bench.runner import benchmark_spec, check_variants
    from ..bench.worker import WorkerFailed, run_isolated, start_forkserver
    from ..progress import progress_bar
    from ..results.planner import plan_runs
    from ..token2wav.variants import BUILTIN_VARIANTS, Variant

    a, b = two_variants(variants)
    custom = list(custom_variants)
    if a == b:  # an A/A diff: the same variant under a second name, so the plan can tell the arms apart
        base = {v.name: v for v in custom}.get(a) or BUILTIN_VARIANTS.get(a)
        if base is None:
            raise OmniLoaderError(f"--variants: unknown variant {a!r}")
        b = f"{a}-again"
        custom.append(Variant(b, discovery=base.discovery, parameters=base.parameters, needs_gpu=base.needs_gpu))
    if aa and {a, b} & set(AA_ARMS):
        raise OmniLoaderError(f"--aa: {', '.join(AA_ARMS)} name the A/A arms; name your variants otherwise")
    if not MIN_RATE <= rate <= MAX_RATE:
        raise OmniLoaderError(f"--rate {rate}: must be a whole number {RATE_LIMITS}")
    if runs < 2:
        raise OmniLoaderError(f"--runs must be at least 2 for a differential profile (a rank test needs two runs "
                              f"per variant), not {runs}")
    exe, why = find_py_spy(py_spy)
    if exe is None:
        raise PySpyUnavailable(why)
    spec = benchmark_spec(snapshot, options, variants=(a, b), custom_variants=custom, warmup=warmup, runs=runs,
                          order="blocks", seed=seed, workers="forkserver", worker_timeout=worker_timeout)
    check_variants(spec.variants, custom, spec.load.device, worker_timeout)
    directory = Path(out_dir) / DIFF_DIR
    with writer_lock(directory), disk_blamed(directory):  # one writer: a second diff into it is refused
        ensure_dir(directory / SPEEDSCOPE_DIR)
        log = directory / "py-spy.log"
        write_text(log, "")
        labels = (a, b, a + UNSAMPLED, b + UNSAMPLED, *(AA_ARMS if aa else ()))
        plan = plan_runs(warmup, runs, "blocks", seed, variants=labels)
        steps = [Step(TIMED if run.variant.endswith(UNSAMPLED) or run.warmup else SAMPLED,
                      run.variant.removesuffix(UNSAMPLED)) for run in plan]  # each run's kind, which the time left reads
        countdown = Countdown(steps)
        bar = StepBar(progress_bar(total=len(plan), desc="profile --diff", unit="run", enabled=progress,
                                   bar_format=BAR_FORMAT, postfix=f"{countdown.clock_words()}, starting the worker server"),
                      countdown, tick=TICK)
        bar.text = "starting the worker server"
        rows, folds = [], []
        try:
            start_forkserver()
            for run, step in zip(plan, steps):
                variant, sampled = step.variant, step.kind == SAMPLED
                request = spec.request(dataclasses.replace(run, variant=AA_VARIANT if variant in AA_ARMS else variant))
                label = (f"run {run.run_id + 1}/{len(plan)} {variant}{', sampled' if sampled else ''}"
                         f"{' (warm-up)' if run.warmup else ''}")
                bar.begin(step, label)
                row = {"run_id": run.run_id, "variant": variant, "sampled": sampled, "warmup": run.warmup,
                       "status": "ok", "error": "", "load_s": np.nan, "state_dict_calls": np.nan}
                try:
                    if sampled:
                        path = directory / SPEEDSCOPE_DIR / f"run-{run.run_id:04d}-{variant}.json"
                        result = sampled_load(request, path, exe, rate, spec.worker_timeout, log)
                        fold = fold_samples(path)
                        folds.append(fold.assign(run_id=run.run_id, variant=variant))
                        row["speedscope"] = str(path.relative_to(directory))
                    else:
                        result = run_isolated(request, "forkserver", spec.worker_timeout)
                    row.update(load_s=result["phases"]["total"], state_dict_calls=result.get("state_dict_calls"))
                except (WorkerFailed, OmniLoaderError) as exc:
                    row.update(status="failed", error=str(exc).splitlines()[0])
                rows.append(row)
                bar.end(f"{label}: {row['load_s']:.2f} s" if row["status"] == "ok" else f"{label}: failed")
            bar.say(f"all {len(plan)} runs done: comparing the functions")  # 02's bar froze 22 s on its last run here
            runs_frame = pd.DataFrame(rows)
            write_text(directory / RUNS_CSV, runs_frame.to_csv(index=False))
            if not folds:
                errors = runs_frame.loc[runs_frame["status"] != "ok", "error"]
                raise OmniLoaderError("no sampled load succeeded" + (f": {errors.iloc[0]}" if len(errors) else ""))
            fold_frame = pd.concat(folds, ignore_index=True)[["run_id", "variant", "function", "file", "inclusive_s",
                                                              "self_s", "samples"]]
            write_text(directory / RUN_FUNCTIONS_CSV, fold_frame.to_csv(index=False))
            sampled = runs_frame[runs_frame["sampled"] & (runs_frame["status"] == "ok") & runs_frame["variant"].isin([a, b])]
            floors = function_floors(fold_frame, AA_ARMS) if aa else None
            functions = assign_roles(compare_functions(fold_frame, a, b, fdr, floors=floors),
                                     [directory / f for f in sampled["speedscope"]])
            diff = ProfileDiff(a, b, functions, runs_frame, fold_frame, directory,
                               {"rate": rate, "fdr": fdr, "runs": runs, "warmup": warmup, "seed": seed, "aa": aa,
                                "tests": int(functions["tested"].sum() + functions["self_tested"].sum()),
                                **({"aa_variant": AA_VARIANT} if aa else {})})
            diff.write()
            bar.say(f"done: {int(functions['tested'].sum())} functions tested, {len(diff.claimed)} moved")
        finally:
            bar.close()
        return diff


def two_variants(variants: Any) -> tuple[str, str]:
    """``("A", "B")`` from a pair, a list or ``"A,B"``; one line for anything but two names."""
    names = [variants] if isinstance(variants, str) else list(variants)
    names = [n.strip() for part in names for n in str(part).split(",") if n.strip()]
    if len(names) != 2:
        raise OmniLoaderError(f"--diff compares two variants (A,B), not {','.join(names) or 'none'}")
    return names[0], names[1]
