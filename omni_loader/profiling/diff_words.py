"""The sentences of a differential profile that stand on their own: what a number of runs can claim at best
(:func:`reach_words`), a function that appeared or is gone (:func:`presence_words`), why the entry's sampled time
is not the sampled load (:func:`entry_sentence`) and a full disk said as one (:func:`disk_blamed`).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import OmniLoaderError
from ..formatting import duration, number, short_duration, with_minus
from ..reporting.measurements import label
from .diff_stats import APPEARED, FDR, MIN_SAMPLES, runs_needed, smallest_p, smallest_q
from .settings import DEFAULT_RATE

DIGEST = "tensor_digest"  # the loader's digest of the loaded tensors, after the timed load (token2wav.loader)
WHOLE_LOAD = "total"  # the phase a run's load is: said in words (label), never as its id
ESTIMATED_TESTS = 120  # tests a diff runs, before its runs have said: diffs of the tiny model ran 93 to 137
TINY = 1e-6  # below it a probability is said as a bound: people read no scientific notation, nor 40 zeros


def small(p: float) -> str:
    """A probability as the sentences write it: two significant digits, ``below 0.000001`` under :data:`TINY`."""
    return f"below {number(TINY, 1)}" if 0 < p < TINY else number(p, 2)


def equals(p: float) -> str:
    """``= 0.0013``, or ``< 0.000001``: a probability after its name."""
    return f"< {number(TINY, 1)}" if 0 < p < TINY else f"= {number(p, 2)}"


def reach_words(n_a: int, n_b: int, tests: int, how: str, fdr: float = FDR) -> str:
    """What ``n_a`` and ``n_b`` sampled loads can claim over ``tests`` tests (``how``: how that number is known), in
    words: the smallest p and q, and the runs a variant that one function's claim needs."""
    p, q, need = smallest_p(n_a, n_b), smallest_q(n_a, n_b, tests), runs_needed(tests, fdr)
    loads = f"{n_a} sampled loads a variant" if n_a == n_b else f"{n_a} and {n_b} sampled loads"
    head = (f"With {loads}, a rank test's smallest p is {small(p)} (every run of one variant beyond every run "
            f"of the other), so over {tests} tests ({how}) the smallest q one function can reach is {small(q)} "
            "(Benjamini-Hochberg: its p times the tests when it moves alone; k functions moving together reach a "
            f"k-th of it): ")
    if q <= fdr:
        verdict = f"under the {fdr:.0%} false discovery rate, so a large enough change can be claimed faster or slower"
    else:
        verdict = (f"above the {fdr:.0%} false discovery rate, so no function can be claimed faster or slower by its "
                   f"rank test alone; {need} sampled loads a variant would let one through (`--runs {need}`)")
    return (head + verdict + f". A function sampled in every run of one variant (at least {MIN_SAMPLES} samples "
            "each) and in none of the other's is said to have appeared or to be gone whatever its rank test says, from a "
            "test on its sample counts.")


def estimated_tests(diff_json: str | os.PathLike[str]) -> tuple[int, str]:
    """How many tests a diff will run, and how that is known: the last diff's (``diff_json``), else an estimate."""
    try:
        tests = json.loads(Path(diff_json).read_text()).get("tests")
    except (OSError, ValueError, AttributeError):
        tests = None
    if isinstance(tests, int) and tests > 0:
        return tests, "as many as the last diff written there ran; the number is known only after the runs"
    return ESTIMATED_TESTS, ("an estimate: diffs of the tiny model ran 93 to 137; the number is known only after "
                             "the runs")


def signed(seconds: float, unit: str) -> str:
    """A time that may be negative: ``−124 ms`` (a minus sign; a no-break space keeps number and unit together)."""
    return with_minus(duration(seconds, unit, 0)).replace(" ", "\u00a0")


def sample_totals(folds: pd.DataFrame, variants: tuple[str, str]) -> dict[str, tuple[int, int]]:
    """Per variant: its sampled runs with samples under the entry, and those samples (each run's largest count)."""
    per_run = folds.groupby(["variant", "run_id"])["samples"].max()
    return {v: (int(len(per_run[v])), int(per_run[v].sum())) if v in per_run.index.get_level_values(0) else (0, 0)
            for v in variants}


def presence_words(r: pd.Series, a: str, b: str, totals: dict[str, tuple[int, int]], sampled: int) -> str:
    """``; it appeared in B: …`` with the evidence and the sample-count test's error rate, or ""."""
    if r.get("presence") not in (APPEARED, "gone"):
        return ""
    there, never = (b, a) if r["presence"] == APPEARED else (a, b)
    count = r["b_samples"] if r["presence"] == APPEARED else r["a_samples"]
    verb = f"it appeared in {there}" if r["presence"] == APPEARED else f"it is gone from {never}"
    return (f"; {verb}: sampled in all {totals[there][0]} runs of {there} (at least {int(r['least_samples'])} "
            f"samples each, {int(count):,} in all) and in none of {never}'s {totals[never][0]} (0 of their "
            f"{totals[never][1]:,} samples); were a sample of either variant as likely to catch it, the chance of "
            f"that is p {equals(r['presence_p'])} (a binomial test on the pooled sample counts, their "
            f"dispersion {r['dispersion']:.1f}), q {equals(r['presence_q'])} with Bonferroni over the "
            f"{sampled} functions sampled")


def entry_sentence(self: Any) -> str | None:
    """Why ``load_token2wav``'s sampled time is not the sampled median load beside it: the call also does work
    outside its timed ``total`` phase (above all :data:`DIGEST`), and py-spy counts each sample as one period.
    Means per run, which add up as medians would not; ``None`` when a variant has no sampled run with the call."""
    from .flamegraph import ENTRY

    r = self.measured()
    r = r[r["sampled"]]
    per_run = self.folds.pivot_table(index="run_id", columns="function", values="inclusive_s", aggfunc="sum",
                                     fill_value=0.0).reindex(columns=[ENTRY, DIGEST], fill_value=0.0)
    row = self.functions[self.functions["function"] == ENTRY]
    figures = {}
    for v in (self.a, self.b):
        runs = r[r["variant"] == v].set_index("run_id")
        runs = runs[runs.index.isin(per_run.index[per_run[ENTRY] > 0])]
        if runs.empty or row.empty:
            return None
        extra = per_run.loc[runs.index, ENTRY] - runs["load_s"]
        digest = per_run.loc[runs.index, DIGEST]
        figures[v] = (float(extra.mean()), float(digest.mean()), float((extra - digest).mean()),
                      float(r.loc[r["variant"] == v, "load_s"].median()))
    (ea, da, ra, la), (eb, db, rb, lb) = figures[self.a], figures[self.b]
    unit, rate, whole = "ms", float(self.settings.get("rate", DEFAULT_RATE)), f"“{label(WHOLE_LOAD)}”"
    split = (f": {signed(da, unit)} and {signed(db, unit)} of it the tensor digest (`{DIGEST}`, which the call "
             f"computes after that phase), {signed(ra, unit)} and {signed(rb, unit)}"
             if (per_run[DIGEST] > 0).any() else ", all of it")
    return (f"Why `{ENTRY}`'s sampled time ({signed(row['a_median_s'].iloc[0], unit)} → "
            f"{signed(row['b_median_s'].iloc[0], unit)}, medians) is not the sampled median loads "
            f"({signed(la, unit)} → {signed(lb, unit)}): the first is the whole call, the second the call's timed "
            f"phase {whole}, which leaves out the call's work outside it. On average per sampled run (a mean, "
            f"which the two medians' gap need not equal), the call's sampled time less the run's load was "
            f"{signed(ea, unit)} ({self.a}) and {signed(eb, unit)} "
            f"({self.b}){split} the call's other steps outside that phase and sampling noise (py-spy counts every "
            f"sample as {short_duration(1 / rate)}, one period at {number(rate)} Hz).")


@contextmanager
def disk_blamed(directory: Path) -> Iterator[None]:
    """A full disk said as one, naming the folder, whichever write hit it (py-spy's or the diff's own files)."""
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        raise OmniLoaderError(f"no space left on the disk of {directory}{where}: the diff's runs write py-spy's "
                              "samples and their folds there; free some space, or choose another --out") from None
