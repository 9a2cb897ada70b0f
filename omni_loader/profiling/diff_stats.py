"""The statistics of ``profile --diff``: each sampled run's samples folded into per-function times, and per
function A against B (:func:`compare_functions`): medians, the difference of medians with a 95% bootstrap interval,
a two-sided Mann-Whitney test and Benjamini-Hochberg; a function is claimed *faster* or *slower* when its q-value
is at most :data:`FDR` and its interval excludes zero (and its difference exceeds its A/A floor, with ``--aa``).
:func:`presence_test` judges a function sampled in every run of one arm and none of the other from its sample
counts, beyond the rank test's smallest p (:func:`smallest_p`). Nothing here runs a load or writes a file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import OmniLoaderError
from .sources import short_path

FDR = 0.05
PRESENCE = 0.5  # a function is tested when sampled in at least this share of one arm's runs
FASTER, SLOWER, NO_CLAIM = "faster", "slower", "no difference claimed"
APPEARED, GONE = "appeared", "gone"  # in every run of B and none of A; in every run of A and none of B
MIN_SAMPLES = 5  # samples in each run where a function is, for "appeared"/"gone": over many sampling periods
FUNCTION_COLUMNS = ("function", "file", "a_median_s", "b_median_s", "delta_s", "ci_low", "ci_high", "p", "q", "aa_floor_s",
                    "verdict", "role", "a_self_median_s", "b_self_median_s", "self_delta_s", "self_ci_low",
                    "self_ci_high", "self_p", "self_q", "self_aa_floor_s", "self_verdict", "a_present", "b_present",
                    "tested", "self_tested", "within_aa_floor", "self_within_aa_floor", "presence", "a_samples",
                    "b_samples", "least_samples", "dispersion", "presence_p", "presence_q")
FLOOR_COLUMNS = ("function", "file", "aa_floor_s", "self_aa_floor_s")
MEASURES = (("inclusive_s", ""), ("self_s", "self_"))  # each fold column and the prefix of its columns here


# --------------------------------------------------------------------------- folding samples


def fold_samples(speedscope: str | os.PathLike[str]) -> pd.DataFrame:
    """One run's samples under ``load_token2wav`` as per-function ``inclusive_s`` (on the stack, once per sample),
    ``self_s`` (at the top) and ``samples``."""
    from .flamegraph import load_stacks

    stacks, _ = load_stacks(speedscope)
    inclusive: dict[tuple[str, str], list[float]] = {}
    own: dict[tuple[str, str], float] = {}
    for path, weight in stacks:
        for key in dict.fromkeys(path):
            entry = inclusive.setdefault(key, [0.0, 0])
            entry[0] += weight
            entry[1] += 1
        own[path[-1]] = own.get(path[-1], 0.0) + weight
    rows = [(name, short_path(file) if file else "", t, own.get((name, file), 0.0), int(n))
            for (name, file), (t, n) in inclusive.items()]
    return pd.DataFrame(rows, columns=["function", "file", "inclusive_s", "self_s", "samples"])


# --------------------------------------------------------------------------- statistics


def benjamini_hochberg(p_values: Iterable[float]) -> np.ndarray:
    """Benjamini-Hochberg q-values (``scipy.stats.false_discovery_control``); NaN stays NaN."""
    from scipy.stats import false_discovery_control

    p = np.asarray(list(p_values), dtype=float)
    q = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        q[ok] = false_discovery_control(p[ok], method="bh")
    return q


def per_run(folds: pd.DataFrame, arms: tuple[str, ...]) -> tuple[dict[str, list[Any]], dict[str, pd.DataFrame]]:
    """The run ids of each arm, and per measure (:data:`MEASURES`) a function-by-run table of seconds."""
    folds = folds[folds["variant"].isin(arms)]
    runs = {v: sorted(folds.loc[folds["variant"] == v, "run_id"].unique()) for v in arms}
    wide = {col: folds.pivot_table(index=["function", "file"], columns="run_id", values=col, aggfunc="sum",
                                   fill_value=0.0) for col, _ in MEASURES}
    return runs, wide


def function_floors(folds: pd.DataFrame, arms: tuple[str, str], presence: float = PRESENCE) -> pd.DataFrame:
    """Each function's A/A floor from ``arms`` (two arms loading the same variant): :data:`FLOOR_COLUMNS`, by
    ``reproduce --aa``'s rule, NaN for a measure sampled in under ``presence`` of both arms' runs."""
    from ..reporting.stats import NoiseFloor, Summary, bootstrap_median_difference

    runs, wide = per_run(folds, arms)
    rows = []
    for key in wide["inclusive_s"].index if all(len(r) >= 2 for r in runs.values()) else ():
        row: dict[str, Any] = {"function": key[0], "file": key[1]}
        for col, prefix in MEASURES:
            one, two = (tuple(wide[col].loc[key].reindex(runs[v], fill_value=0.0)) for v in arms)
            ci = bootstrap_median_difference(one, two) if max(np.mean(np.array(x) > 0) for x in (one, two)) >= presence \
                else None
            row[prefix + "aa_floor_s"] = NoiseFloor(key[0], Summary(arms[0], key[0], one), Summary(arms[1], key[0], two),
                                                    *ci).resolvable_seconds if ci else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=list(FLOOR_COLUMNS)).astype({"aa_floor_s": float, "self_aa_floor_s": float})


def compare_functions(folds: pd.DataFrame, a: str, b: str, fdr: float = FDR, presence: float = PRESENCE,
                      floors: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per function, ``a`` against ``b`` from the runs' folds (a run without a function counts 0 s of it):
    :data:`FUNCTION_COLUMNS`, the claims first. Inclusive and self time are tested alike, with one
    Benjamini-Hochberg over both; :func:`presence_test` is a family of its own, held to ``fdr`` by Bonferroni.
    A difference within its A/A floor (``floors``) is not claimed."""
    runs, wide = per_run(folds, (a, b))
    if not runs[a] or not runs[b]:
        raise OmniLoaderError(f"no sampled run of {a if not runs[a] else b}: nothing to compare")
    counts = folds[folds["variant"].isin((a, b))].pivot_table(index=["function", "file"], columns="run_id",
                                                               values="samples", aggfunc="sum", fill_value=0)
    # every kept sample has the entry on its stack: a run's largest count is its samples under the entry
    totals = {v: float(counts.reindex(columns=runs[v], fill_value=0).max(axis=0).sum()) for v in (a, b)}
    rows = []
    for key in wide["inclusive_s"].index:
        row: dict[str, Any] = {"function": key[0], "file": key[1]}
        for col, prefix in MEASURES:
            x = {v: wide[col].loc[key].reindex(runs[v], fill_value=0.0).to_numpy() for v in (a, b)}
            row.update(_tested(x[a], x[b], presence, prefix))
        n = {v: counts.loc[key].reindex(runs[v], fill_value=0).to_numpy() for v in (a, b)}
        row.update(presence_test(n[a], n[b], totals[a], totals[b]))
        rows.append(row)
    df = pd.DataFrame(rows)
    q = benjamini_hochberg(np.concatenate([df["p"].to_numpy(), df["self_p"].to_numpy()]))
    df["q"], df["self_q"] = q[: len(df)], q[len(df):]
    df["presence_q"] = np.minimum(1.0, df["presence_p"] * len(df))  # Bonferroni: every function sampled
    none = pd.DataFrame(columns=list(FLOOR_COLUMNS)).astype({"aa_floor_s": float, "self_aa_floor_s": float})
    df = df.merge(none if floors is None else floors[list(FLOOR_COLUMNS)], on=["function", "file"], how="left")
    for _, prefix in MEASURES:
        significant = (df[prefix + "q"] <= fdr) & ((df[prefix + "ci_low"] > 0) | (df[prefix + "ci_high"] < 0))
        if not prefix:
            significant |= df["presence_q"] <= fdr
        floor = df[prefix + "aa_floor_s"]
        df[prefix + "within_aa_floor"] = significant & floor.notna() & (df[prefix + "delta_s"].abs() <= floor)
        claimed = significant & ~df[prefix + "within_aa_floor"]
        df[prefix + "verdict"] = np.where(claimed, np.where(df[prefix + "delta_s"] < 0, FASTER, SLOWER), NO_CLAIM)
    df["presence"] = np.where(df["verdict"] != NO_CLAIM, df["presence"], "")  # said only of a claim
    df["role"] = ""
    df["_order"] = np.where(df["verdict"] != NO_CLAIM, 0, np.where(df["self_verdict"] != NO_CLAIM, 1, 2))
    df = df.assign(_size=-df["delta_s"].abs()).sort_values(["_order", "_size", "a_median_s"], kind="stable")
    return df[list(FUNCTION_COLUMNS)].reset_index(drop=True)


def presence_test(a: np.ndarray, b: np.ndarray, total_a: float, total_b: float,
                  least: int = MIN_SAMPLES) -> dict[str, Any]:
    """Whether a function *appeared* in B or *is gone* from it, from its per-run sample counts ``a`` and ``b``
    (``total_a``, ``total_b``: each arm's samples under the entry): ``presence``, the pooled counts,
    ``least_samples``, ``dispersion`` and ``presence_p`` (NaN unless it was sampled in every run of one arm, at
    least ``least`` samples each, and never in the other's).

    The null: each sample of either arm is as likely to catch it, so the ``S`` samples that did fall in the absent
    arm binomially, none with chance ``(1 - s) ** S`` for that arm's share ``s`` of all samples (doubled: two-sided).
    Samples come in stretches, so ``S`` is divided by the present arm's dispersion (quasi-Poisson, at least 1)."""
    out: dict[str, Any] = {"presence": "", "a_samples": int(a.sum()), "b_samples": int(b.sum()),
                           "least_samples": np.nan, "dispersion": np.nan, "presence_p": np.nan}
    for where, never, word, share in ((b, a, APPEARED, total_a), (a, b, GONE, total_b)):
        if len(where) < 2 or len(never) < 1 or never.any() or where.min() < least:
            continue
        dispersion = max(1.0, float(np.var(where, ddof=1) / np.mean(where)))
        s = share / (total_a + total_b)
        draws = float(where.sum()) / dispersion
        out.update(presence=word, least_samples=int(where.min()), dispersion=dispersion,
                   presence_p=min(1.0, 2 * math.exp(draws * math.log1p(-s))) if 0 < s < 1 else 1.0)
    return out


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the kit's rank test gives with ``n_a`` and ``n_b`` runs (every run of one arm
    beyond every run of the other, untied or tied); 1 when an arm has under 2 runs."""
    from ..reporting.stats import mann_whitney

    if min(n_a, n_b) < 2:
        return 1.0
    apart = mann_whitney(tuple(map(float, range(n_a))), tuple(float(n_a + i) for i in range(n_b)))
    tied = mann_whitney((0.0,) * n_a, (1.0,) * n_b)
    return float(min(x for x in (apart, tied, 1.0) if x is not None))


def smallest_q(n_a: int, n_b: int, tests: int) -> float:
    """The smallest q Benjamini-Hochberg can give one function alone over ``tests`` p-values."""
    return min(1.0, smallest_p(n_a, n_b) * max(tests, 1))


def runs_needed(tests: int, fdr: float = FDR, most: int = 10_000) -> int:
    """The fewest runs a side with which one function's rank test can reach q <= ``fdr`` over ``tests``."""
    n = 2
    while n < most and smallest_q(n, n, tests) > fdr:
        n += 1
    return n


def _tested(x: np.ndarray, y: np.ndarray, presence: float, prefix: str) -> dict[str, Any]:
    """Medians, difference, interval and p-value of one measure of one function (``prefix`` names it)."""
    from ..reporting.stats import bootstrap_median_difference, mann_whitney

    present = (float(np.mean(x > 0)), float(np.mean(y > 0)))
    tested = max(present) >= presence
    p = mann_whitney(tuple(x), tuple(y)) if tested else None
    ci = bootstrap_median_difference(tuple(x), tuple(y)) if tested else None
    out = {f"a_{prefix}median_s": float(np.median(x)), f"b_{prefix}median_s": float(np.median(y)),
           f"{prefix}delta_s": float(np.median(y) - np.median(x)), f"{prefix}ci_low": ci[0] if ci else np.nan,
           f"{prefix}ci_high": ci[1] if ci else np.nan, f"{prefix}p": np.nan if p is None else p,
           f"{prefix}tested": tested}
    if not prefix:
        out.update(a_present=present[0], b_present=present[1])
    return out


def assign_roles(functions: pd.DataFrame, speedscopes: Iterable[Path]) -> pd.DataFrame:
    """The ``role`` of each claimed function: ``own time`` (its self time moved too), ``caller`` (it calls, on
    some sampled stack, a function whose own time moved) or ``unexplained``."""
    from .flamegraph import load_stacks

    moved = functions.loc[functions["self_verdict"] != NO_CLAIM, ["function", "file"]]
    own = set(moved.itertuples(index=False, name=None))
    callers: set[tuple[str, str]] = set()
    for path in speedscopes if own else ():
        for stack, _ in load_stacks(path)[0]:
            keys = [(n, short_path(f) if f else "") for n, f in stack]
            hits = [i for i, k in enumerate(keys) if k in own]
            callers.update(keys[: max(hits)] if hits else ())
    def role(r: pd.Series) -> str:
        key = (r["function"], r["file"])
        if r["verdict"] == NO_CLAIM and r["self_verdict"] == NO_CLAIM:
            return ""
        return "own time" if key in own else ("caller" if key in callers else "unexplained")

    return functions.assign(role=functions.apply(role, axis=1) if len(functions) else "")
