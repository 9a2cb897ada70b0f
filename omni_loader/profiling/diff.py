"""A differential profile: which functions a change made faster or slower, over fresh-process runs.

:func:`profile_diff` runs ``reproduce``'s plan (randomized blocks of processes forked from the fork server),
samples every measured load with py-spy (``--idle``) and compares each function's times
(:mod:`~omni_loader.profiling.diff_stats`), one unsampled load per variant per block pricing the sampling and,
with ``aa``, two A/A arms giving each function its floor. Written under ``DIR/diff/`` run by run after
``plan.json``, so that ``profile --diff --resume`` continues an interrupted diff.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import OmniLoaderError
from ..formatting import duration, markdown_table, number, span, time_unit
from ..names import VARIANTS
from ..token2wav.options import LoadOptions
from .outputs import PY_SPY_LOG
from .pyspy import PySpyUnavailable, find_py_spy
from .sampled import sampled_load
from .settings import DEFAULT_RATE
from ..progress import BAR_FORMAT, TICK, TIMED, Countdown, Step, StepBar
from ..results.spec import AA_ARMS, AA_VARIANT
from .diff_stats import (APPEARED, FASTER, FDR, FUNCTION_COLUMNS, MIN_SAMPLES, NO_CLAIM, PRESENCE, SLOWER,
                         assign_roles, compare_functions, fold_samples, function_floors)
from .diff_words import (disk_blamed, entry_sentence, presence_words, reach_words,
                         sample_totals, signed)
from ..results.lock import writer_lock
from ..safe_files import ensure_dir, open_file, write_text
from .spec import DEFAULT_RUNS, ProfileSpec

DIFF_DIR = "diff"
FUNCTIONS_CSV = "functions.csv"
DIFF_MD = "diff.md"
DIFF_JSON = "diff.json"
FLAME_DIFF_SVG = "flame-diff.svg"
RUNS_CSV = "runs.csv"
RUN_FUNCTIONS_CSV = "run_functions.csv"
SPEEDSCOPE_DIR = "speedscope"
ROLE_WORDS = {"caller": "a caller: its time moved in the functions it calls",
              "unexplained": "no callee's own time is claimed to move with it"}
UNSAMPLED = ":unsampled"  # the plan's label of a variant's unsampled load (the overhead's yardstick)
NO_SLOWER = ": no slower sampled, its cost within the loads' spread"  # a ratio under 1 is spread, not a profiler that speeds a load
SAMPLED = "sampled"  # the kind of step of a load sampled by py-spy, on the bar's time left


# --------------------------------------------------------------------------- the result


@dataclass
class ProfileDiff:
    """A differential profile of ``a`` against ``b``: per-function rows (claims first), every run's load
    total and every sampled run's fold; :meth:`markdown` and :meth:`flamegraph` say and draw it."""

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

    def measured(self) -> pd.DataFrame:
        """The runs that count: no warm-up, no failed load."""
        from ..reporting.stats import measured

        return measured(self.runs)

    def sampled_loads(self, variant: str) -> int:
        """How many of ``variant``'s measured loads py-spy sampled."""
        r = self.measured()
        return int(((r["variant"] == variant) & r["sampled"]).sum())

    def overhead(self) -> dict[str, dict[str, float]]:
        """Per variant: the median load total unsampled and under py-spy, and their ratio."""
        r = self.measured()
        out = {}
        for v in (self.a, self.b):
            plain = r[(r["variant"] == v) & ~r["sampled"]]["load_s"]
            spied = r[(r["variant"] == v) & r["sampled"]]["load_s"]
            if len(plain) and len(spied):
                out[v] = {"unsampled_s": float(plain.median()), "sampled_s": float(spied.median()),
                          "ratio": float(spied.median() / plain.median()), "runs": int(len(spied))}
        return out

    def entry_sentence(self) -> str | None:
        """Why ``load_token2wav``'s sampled time is not the sampled median load beside it."""
        return entry_sentence(self)

    def sentences(self) -> list[str]:
        """One sentence per claimed function, from the table's numbers."""
        out, totals = [], sample_totals(self.folds, (self.a, self.b))
        for _, r in self.claimed.iterrows():
            unit = time_unit(max(r["a_median_s"], r["b_median_s"]))
            beyond = ("" if pd.isna(r.get("aa_floor_s")) else
                      f", beyond its A/A floor of {duration(r['aa_floor_s'], unit, 0)}")
            own = (f"; its own time {duration(r['a_self_median_s'], unit, 0)} → {duration(r['b_self_median_s'], unit, 0)}"
                   if r["role"] == "own time" else "; " + ROLE_WORDS.get(r["role"], r["role"]))
            out.append(f"`{r['function']}` ({r['file']}): {duration(r['a_median_s'], unit, 0)} → "
                       f"{duration(r['b_median_s'], unit, 0)}, {r['verdict']} by {duration(abs(r['delta_s']), unit, 0)} "
                       f"(95% interval of B − A {span(signed(r['ci_low'], unit), signed(r['ci_high'], unit))}, "
                       f"q = {number(r['q'], 2)}{beyond}){self._calls(r['function'])}"
                       f"{presence_words(r, self.a, self.b, totals, len(self.functions))}{own}.")
        return out

    def doubt_sentence(self) -> str | None:
        """What else explains B slower: chance or the machine."""
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

    def floor_sentence(self) -> str:
        """Which A/A floor the claims were held to, or that there was none."""
        f = self.functions
        if not self.settings.get("aa"):
            return ("No A/A floor: no A/A arms ran beside this diff (`--aa` adds them), so a claim rests on its "
                    "q-value and interval alone.")
        n = [self.sampled_loads(arm) for arm in AA_ARMS]
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
        r = self.measured()
        n = {v: r[r["variant"] == v]["state_dict_calls"].median() for v in (self.a, self.b)}
        if any(pd.isna(x) for x in n.values()) or n[self.a] == n[self.b]:
            return ""
        gone = n[self.a] - n[self.b]
        return f", {abs(gone):,.0f} calls per load {'removed' if gone > 0 else 'added'}"

    def markdown(self, with_table: bool = True) -> str:
        """``diff.md``: a sentence per claim, what was tested, py-spy's cost and (``with_table``) the claims' table."""
        f = self.functions
        tested, claimed = int(f["tested"].sum()), self.claimed
        n = {v: self.sampled_loads(v) for v in (self.a, self.b)}
        lines = [f"# Differential profile: {self.a} (A) against {self.b} (B)", ""]
        lines += [f"- {s}" for s in self.sentences()] or ["- No function is claimed to move."]
        faster, slower = (int((claimed["verdict"] == v).sum()) for v in (FASTER, SLOWER))
        present = int(claimed["presence"].isin([APPEARED, "gone"]).sum())
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
        """The differential flamegraph, for inline display."""
        from .diff_flame import DiffFlameView

        return DiffFlameView(self, link_from=link_from, files=(FUNCTIONS_CSV, DIFF_MD))

    def write(self) -> None:
        """Write ``diff.json``, ``functions.csv``, ``diff.md`` and ``flame-diff.svg`` into :attr:`directory`."""
        from .diff_flame import write_svg

        d = self.directory
        write_text(d / DIFF_JSON, json.dumps({"a": self.a, "b": self.b, **self.settings}, indent=2) + "\n")
        write_text(d / FUNCTIONS_CSV, self.functions.to_csv(index=False))
        write_text(d / DIFF_MD, self.markdown())
        write_svg(self, d / FLAME_DIFF_SVG)


def read_profile_diff(out_dir: str | os.PathLike[str]) -> ProfileDiff:
    """A differential profile written before (``out_dir`` or ``out_dir/diff``), read back whole."""
    d = Path(out_dir)
    d = d if (d / DIFF_JSON).is_file() else d / DIFF_DIR
    try:
        meta = json.loads((d / DIFF_JSON).read_text())
        runs, folds, functions = (pd.read_csv(d / name, keep_default_na=False, na_values=[""])
                                  for name in (RUNS_CSV, RUN_FUNCTIONS_CSV, FUNCTIONS_CSV))
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


def profile_diff(snapshot: Any, spec: ProfileSpec | tuple[str, str] | list[str] = VARIANTS, runs: int = DEFAULT_RUNS,
                 out_dir: str | os.PathLike[str] = "results/profile-diff", *, options: LoadOptions | None = None,
                 resume: bool = False, progress: bool = True) -> ProfileDiff:
    """Run (or, with ``resume``, continue with the saved settings) the differential profile ``spec`` on
    ``snapshot`` into ``out_dir/diff/`` and return it; a notebook may pass the two variants, ``runs`` and
    ``options`` instead of a :class:`~omni_loader.profiling.spec.ProfileSpec`. A new diff into a folder whose
    diff was interrupted is refused: it would throw those runs away."""
    from ..bench.driver import Interrupted, drive
    from ..bench.runner import benchmark_spec, check_variants
    from ..bench.worker import start_forkserver, stop_forkserver
    from ..progress import progress_bar
    from ..results.planner import plan_runs

    if not isinstance(spec, ProfileSpec):
        spec = ProfileSpec(variants=tuple(spec), runs=runs, load=options or LoadOptions(), diff=True)
    a, b, custom = diff_arms(spec)
    exe, why = find_py_spy(spec.settings.py_spy)
    if exe is None:
        raise PySpyUnavailable(why)
    bench = benchmark_spec(snapshot, spec.load, variants=(a, b), custom_variants=custom,
                           warmup=spec.settings.warmup, runs=spec.runs, order="blocks", seed=spec.order_seed,
                           workers="forkserver", worker_timeout=spec.worker_timeout)
    check_variants(bench.variants, custom, bench.load.device, spec.worker_timeout)
    spec = dataclasses.replace(spec, checkpoint=str(snapshot.root), load=bench.load)
    directory = Path(out_dir) / DIFF_DIR
    command = ["omni-loader", "profile", "--diff", "--resume", "--out", str(out_dir)]
    labels = (a, b, a + UNSAMPLED, b + UNSAMPLED, *(AA_ARMS if spec.aa else ()))
    plan = plan_runs(spec.settings.warmup, spec.runs, "blocks", spec.order_seed, variants=labels)
    with writer_lock(directory), disk_blamed(directory):  # one writer: a second diff into it is refused
        done = begun(directory, spec, plan, resume, command)
        ensure_dir(directory / SPEEDSCOPE_DIR)
        steps = {run.run_id: Step(TIMED if run.variant.endswith(UNSAMPLED) or run.warmup else SAMPLED,
                                  run.variant.removesuffix(UNSAMPLED)) for run in plan}  # what the time left reads
        countdown = Countdown(steps[r.run_id] for r in plan if r.run_id not in done)
        first = "starting the worker server"
        bar = StepBar(progress_bar(total=len(plan), initial=len(done), desc="profile --diff", unit="run",
                                   enabled=progress, bar_format=BAR_FORMAT,
                                   postfix=f"{countdown.clock_words()}, {first}"), countdown, tick=TICK)
        bar.text = first
        arm = DiffArm(bench, directory, exe, spec.settings.rate, len(plan))

        def save(run: Any, result: tuple[dict[str, Any], pd.DataFrame | None]) -> None:
            row, fold = result
            if fold is not None:  # the fold first: a run is saved once its row is (a kill between leaves no row)
                append_csv(directory / RUN_FUNCTIONS_CSV, fold[list(FOLD_COLUMNS)])
            append_csv(directory / RUNS_CSV, pd.DataFrame([row], columns=RUN_COLUMNS))

        try:
            if len(done) < len(plan):
                start_forkserver()
            drive(directory, plan, arm, save, done=done, resume=command, bar=bar, step=lambda r: steps[r.run_id],
                  words=arm.words)
            countdown.begin(Step(COMPARING))  # its time is not known: "? left", not a false 00:00
            bar.say(f"all {len(plan)} runs done: comparing the functions")
            diff = compared(directory, a, b, spec)
            countdown.end()
            write_text(directory / PLAN_JSON, json.dumps({**read_plan(directory), "status": "complete"}, indent=2))
            bar.say(f"done: {int(diff.functions['tested'].sum())} functions tested, {len(diff.claimed)} moved")
        except KeyboardInterrupt:  # after the plan was saved: what is saved is continued
            stop_forkserver()  # nothing of the diff is left behind
            raise Interrupted(len(pd.read_csv(directory / RUNS_CSV)) if (directory / RUNS_CSV).is_file() else 0,
                              directory, command) from None
        finally:
            bar.close()
    return diff


COMPARING = "comparison"  # the kind of the bar's last step: the functions compared, after the runs
PLAN_JSON = "plan.json"  # the diff's settings and its plan, written before its first run: what --resume continues
RUN_COLUMNS = ("run_id", "variant", "sampled", "warmup", "status", "error", "load_s", "state_dict_calls", "speedscope")
FOLD_COLUMNS = ("run_id", "variant", "function", "file", "inclusive_s", "self_s", "samples")


def diff_arms(spec: ProfileSpec) -> tuple[str, str, list[Any]]:
    """A, B and the custom variants of ``spec``, checked; the same name twice is an A/A diff, its B renamed."""
    from ..token2wav.variants import BUILTIN_VARIANTS, Variant

    a, b = two_variants(spec.variants)
    custom = [v for v in spec.variant if not isinstance(v, str)]
    if a == b:
        base = {v.name: v for v in custom}.get(a) or BUILTIN_VARIANTS.get(a)
        if base is None:
            raise OmniLoaderError(f"--variants: unknown variant {a!r}")
        b = f"{a}-again"
        custom.append(Variant(b, discovery=base.discovery, parameters=base.parameters, needs_gpu=base.needs_gpu))
    if spec.aa and {a, b} & set(AA_ARMS):
        raise OmniLoaderError(f"--aa: {', '.join(AA_ARMS)} name the A/A arms; name your variants otherwise")
    if spec.runs < 2:
        raise OmniLoaderError(f"--runs must be at least 2 for a differential profile (a rank test needs two runs "
                              f"per variant), not {spec.runs}")
    return a, b, custom


class DiffArm:
    """One run of the diff's plan, forked from the fork server: sampled by py-spy or not; a failed load is a failed row."""

    def __init__(self, bench: Any, directory: Path, exe: str, rate: int, total: int) -> None:
        self.bench, self.directory, self.exe, self.rate, self.total = bench, directory, exe, rate, total

    def __call__(self, run: Any) -> tuple[dict[str, Any], pd.DataFrame | None]:
        from ..bench.worker import LoadRequest, WorkerFailed, run_isolated

        variant, sampled = run.variant.removesuffix(UNSAMPLED), not (run.variant.endswith(UNSAMPLED) or run.warmup)
        request = LoadRequest.of(self.bench, dataclasses.replace(run, variant=AA_VARIANT if variant in AA_ARMS else variant))
        row = {"run_id": run.run_id, "variant": variant, "sampled": sampled, "warmup": run.warmup, "status": "ok",
               "error": "", "load_s": np.nan, "state_dict_calls": np.nan}
        fold = None
        try:
            if sampled:
                path = self.directory / SPEEDSCOPE_DIR / f"run-{run.run_id:04d}-{variant}.json"
                result = sampled_load(request, path, self.exe, self.rate, self.bench.worker_timeout,
                                      self.directory / PY_SPY_LOG)
                fold = fold_samples(path).assign(run_id=run.run_id, variant=variant)
                row["speedscope"] = str(path.relative_to(self.directory))
            else:
                result = run_isolated(request, "forkserver", self.bench.worker_timeout)
            row.update(load_s=result["phases"]["total"], state_dict_calls=result.get("state_dict_calls"))
        except (WorkerFailed, OmniLoaderError) as exc:
            row.update(status="failed", error=str(exc).splitlines()[0])
        return row, fold

    def words(self, run: Any, result: tuple[dict[str, Any], Any] | None) -> str:
        """The run on the bar: before it, its name; after, its load or its failure."""
        variant, sampled = run.variant.removesuffix(UNSAMPLED), not (run.variant.endswith(UNSAMPLED) or run.warmup)
        label = f"run {run.run_id + 1}/{self.total} {variant}{', sampled' if sampled else ''}{' (warm-up)' if run.warmup else ''}"
        if result is None:
            return label
        return f"{label}: {result[0]['load_s']:.2f} s" if result[0]["status"] == "ok" else f"{label}: failed"


def append_csv(path: Path, frame: pd.DataFrame) -> None:
    """Append ``frame``'s rows to the CSV ``path`` (its header first, when new), on the disk before it returns."""
    with open_file(path, "a", newline="") as fh:
        frame.to_csv(fh, header=fh.tell() == 0, index=False)
        fh.flush()
        os.fsync(fh.fileno())


def read_plan(directory: Path) -> dict[str, Any]:
    """``plan.json`` of a diff folder: its settings (``spec``), its plan and its status; {} when there is none."""
    try:
        record = json.loads((directory / PLAN_JSON).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def begun(directory: Path, spec: ProfileSpec, plan: list[Any], resume: bool, command: list[str]) -> frozenset[int]:
    """The runs of ``plan`` already saved in ``directory`` (none for a new diff, whose settings and plan are saved
    now)."""
    from ..token2wav.options import option_conflicts

    saved = read_plan(directory)
    done = saved_runs(directory) if saved else frozenset()
    if resume:
        if not saved:
            raise OmniLoaderError(f"--resume: {directory} holds no differential profile to continue (drop --resume "
                                  "to start one there)")
        conflicts = option_conflicts(ProfileSpec, saved.get("spec") or {}, spec.record())
        if conflicts:
            raise OmniLoaderError(f"--resume: {directory} holds a differential profile made with other settings: "
                                  f"{', '.join(conflicts)}; drop them (the settings come from {PLAN_JSON}) or choose "
                                  "another --out")
        return frozenset(done & {r.run_id for r in plan})
    if saved.get("status") == "running" and done:
        raise OmniLoaderError(f"{directory} holds an interrupted differential profile ({len(done)} of "
                              f"{len(saved.get('plan') or [])} runs saved): continue with: {shlex.join(command)}, or "
                              "choose another --out")
    for name in (RUNS_CSV, RUN_FUNCTIONS_CSV, PY_SPY_LOG):  # a diff written before: this one starts over
        (directory / name).unlink(missing_ok=True)
    write_text(directory / PLAN_JSON, json.dumps({"status": "running", "spec": spec.record(),
                                                 "plan": [r.to_dict() for r in plan]}, indent=2))
    return frozenset()


def saved_runs(directory: Path) -> frozenset[int]:
    """The run ids whose rows ``runs.csv`` holds whole; both files rewritten without what a kill left half done."""
    frames = {}
    for name in (RUNS_CSV, RUN_FUNCTIONS_CSV):
        text = (directory / name).read_text() if (directory / name).is_file() else ""
        whole = text[: text.rfind("\n") + 1]  # a line without its end was torn by a kill
        frames[name] = pd.read_csv(io.StringIO(whole), keep_default_na=False, na_values=[""]) if whole else None
    runs = frames[RUNS_CSV]
    done = frozenset(int(i) for i in runs["run_id"]) if runs is not None else frozenset()
    for name, frame in frames.items():
        path = directory / name
        if frame is None:
            path.unlink(missing_ok=True)
        else:
            write_text(path, frame[frame["run_id"].isin(done)].to_csv(index=False))
    return done


def compared(directory: Path, a: str, b: str, spec: ProfileSpec, fdr: float = FDR) -> ProfileDiff:
    """The diff of the runs saved in ``directory``, written (functions.csv, diff.md, flame-diff.svg, diff.json)."""
    runs_frame = pd.read_csv(directory / RUNS_CSV, keep_default_na=False, na_values=[""])
    runs_frame["error"] = runs_frame["error"].fillna("").astype(str)
    folds_path = directory / RUN_FUNCTIONS_CSV
    if not folds_path.is_file():
        errors = runs_frame.loc[runs_frame["status"] != "ok", "error"]
        raise OmniLoaderError("no sampled load succeeded" + (f": {errors.iloc[0]}" if len(errors) else ""))
    fold_frame = pd.read_csv(folds_path, keep_default_na=False, na_values=[""])
    fold_frame["file"] = fold_frame["file"].fillna("").astype(str)
    sampled = runs_frame[runs_frame["sampled"] & (runs_frame["status"] == "ok") & runs_frame["variant"].isin([a, b])]
    floors = function_floors(fold_frame, AA_ARMS) if spec.aa else None
    functions = assign_roles(compare_functions(fold_frame, a, b, fdr, floors=floors),
                             [directory / f for f in sampled["speedscope"]])
    diff = ProfileDiff(a, b, functions, runs_frame, fold_frame, directory,
                       {"rate": spec.settings.rate, "fdr": fdr, "runs": spec.runs, "warmup": spec.settings.warmup,
                        "seed": spec.order_seed, "aa": spec.aa,
                        "tests": int(functions["tested"].sum() + functions["self_tested"].sum()),
                        **({"aa_variant": AA_VARIANT} if spec.aa else {})})
    diff.write()
    return diff


def two_variants(variants: Any) -> tuple[str, str]:
    """``("A", "B")`` from a pair, a list or ``"A,B"``; one line for anything but two names."""
    names = [variants] if isinstance(variants, str) else list(variants)
    names = [n.strip() for part in names for n in str(part).split(",") if n.strip()]
    if len(names) != 2:
        raise OmniLoaderError(f"--diff compares two variants (A,B), not {','.join(names) or 'none'}")
    return names[0], names[1]
