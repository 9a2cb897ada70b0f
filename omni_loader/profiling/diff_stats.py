"""The statistics of a differential profile (``profile --diff``): each sampled run's samples folded into
per-function times, and per function A against B.

:func:`fold_samples` folds one run's py-spy samples under ``load_token2wav`` (imports and the one-time
model-code import left out, as :mod:`~omni_loader.profiling.flamegraph` draws them) into per-function
inclusive and self seconds. :func:`compare_functions` takes every run's fold and, per function, gives the
medians, the difference of medians (B - A) with a 95% bootstrap interval, a two-sided Mann-Whitney test,
and Benjamini-Hochberg across the functions tested (:data:`FDR`). A function is claimed *faster* or
*slower* when its q-value is at most :data:`FDR` and its interval excludes zero; otherwise *no
difference claimed*. A function is tested when it was sampled in at least half the runs of either arm
(:data:`PRESENCE`).

The A/A floor, where there is one: ``reproduce --aa`` gives each phase a noise floor from two arms that
load the same variant (:class:`~omni_loader.reporting.stats.NoiseFloor`: the larger of the A/A difference
of medians and the half-width of its bootstrap interval); :func:`function_floors` gives each function the
same, from A/A arms sampled beside the A/B (``profile --diff --aa``). A function tested in the A/A has a
floor (``aa_floor_s``, and ``self_aa_floor_s`` for its own time) and is claimed only when its difference of
medians is beyond it; one too rarely sampled in the A/A to test has none, and its claim rests on the test
and the interval alone. :func:`assign_roles` says of each claim whether it moved in its own code or is a caller
of such a change. Nothing here runs a load or writes a file (:mod:`~omni_loader.profiling.diff` does).
"""

from __future__ import annotations

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
FUNCTION_COLUMNS = ("function", "file", "a_median_s", "b_median_s", "delta_s", "ci_low", "ci_high", "p", "q", "aa_floor_s",
                    "verdict", "role", "a_self_median_s", "b_self_median_s", "self_delta_s", "self_ci_low",
                    "self_ci_high", "self_p", "self_q", "self_aa_floor_s", "self_verdict", "a_present", "b_present",
                    "tested", "self_tested", "within_aa_floor", "self_within_aa_floor")
FLOOR_COLUMNS = ("function", "file", "aa_floor_s", "self_aa_floor_s")
MEASURES = (("inclusive_s", ""), ("self_s", "self_"))  # each fold column and the prefix of its columns here


# --------------------------------------------------------------------------- folding samples


def fold_samples(speedscope: str | os.PathLike[str]) -> pd.DataFrame:
    """One run's samples under ``load_token2wav`` as per-function times: ``function``, ``file`` (short),
    ``inclusive_s`` (the samples with the function anywhere on the stack, once per sample however deep
    it recurses), ``self_s`` (the samples with it at the top) and ``samples``."""
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
    """The run ids of each arm, and per measure (:data:`MEASURES`) a table of seconds: one row per function,
    one column per run of those arms (0 where a run never sampled the function)."""
    folds = folds[folds["variant"].isin(arms)]
    runs = {v: sorted(folds.loc[folds["variant"] == v, "run_id"].unique()) for v in arms}
    wide = {col: folds.pivot_table(index=["function", "file"], columns="run_id", values=col, aggfunc="sum",
                                   fill_value=0.0) for col, _ in MEASURES}
    return runs, wide


def function_floors(folds: pd.DataFrame, arms: tuple[str, str], presence: float = PRESENCE) -> pd.DataFrame:
    """Each function's A/A floor from the runs of ``arms`` (two arms that load the same variant):
    :data:`FLOOR_COLUMNS`, in seconds, by the rule of ``reproduce --aa``'s phase floors
    (:attr:`~omni_loader.reporting.stats.NoiseFloor.resolvable_seconds`), NaN for a measure sampled in under
    ``presence`` of both arms' runs (no floor)."""
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
    """Per function, ``a`` against ``b`` from the runs' folds (``run_id``, ``variant`` and
    :func:`fold_samples`' columns; a run without a function counts 0 s of it): :data:`FUNCTION_COLUMNS`,
    the claims first, by the size of their difference. Inclusive and self time are tested alike (each
    when the function was in at least ``presence`` of one arm's runs, at the top of the stack for self
    time), and Benjamini-Hochberg runs over both families of p-values together. ``floors``
    (:func:`function_floors`): a function's difference within its A/A floor is not claimed
    (``within_aa_floor`` says which ones the floor held back)."""
    runs, wide = per_run(folds, (a, b))
    if not runs[a] or not runs[b]:
        raise OmniLoaderError(f"no sampled run of {a if not runs[a] else b}: nothing to compare")
    rows = []
    for key in wide["inclusive_s"].index:
        row: dict[str, Any] = {"function": key[0], "file": key[1]}
        for col, prefix in MEASURES:
            x = {v: wide[col].loc[key].reindex(runs[v], fill_value=0.0).to_numpy() for v in (a, b)}
            row.update(_tested(x[a], x[b], presence, prefix))
        rows.append(row)
    df = pd.DataFrame(rows)
    q = benjamini_hochberg(np.concatenate([df["p"].to_numpy(), df["self_p"].to_numpy()]))
    df["q"], df["self_q"] = q[: len(df)], q[len(df):]
    none = pd.DataFrame(columns=list(FLOOR_COLUMNS)).astype({"aa_floor_s": float, "self_aa_floor_s": float})
    df = df.merge(none if floors is None else floors[list(FLOOR_COLUMNS)], on=["function", "file"], how="left")
    for _, prefix in MEASURES:
        significant = (df[prefix + "q"] <= fdr) & ((df[prefix + "ci_low"] > 0) | (df[prefix + "ci_high"] < 0))
        floor = df[prefix + "aa_floor_s"]
        df[prefix + "within_aa_floor"] = significant & floor.notna() & (df[prefix + "delta_s"].abs() <= floor)
        claimed = significant & ~df[prefix + "within_aa_floor"]
        df[prefix + "verdict"] = np.where(claimed, np.where(df[prefix + "delta_s"] < 0, FASTER, SLOWER), NO_CLAIM)
    df["role"] = ""
    df["_order"] = np.where(df["verdict"] != NO_CLAIM, 0, np.where(df["self_verdict"] != NO_CLAIM, 1, 2))
    df = df.assign(_size=-df["delta_s"].abs()).sort_values(["_order", "_size", "a_median_s"], kind="stable")
    return df[list(FUNCTION_COLUMNS)].reset_index(drop=True)


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
    """The ``role`` of each claimed function: ``own time`` (its self time is claimed to move too),
    ``caller`` (it calls, on some sampled stack, a function whose own time moved: its inclusive time
    contains that change) or ``unexplained`` (neither: a claim to doubt, or a change spread too thin to
    claim in any one callee)."""
    from .flamegraph import load_stacks

    own = set(zip(*functions.loc[functions["self_verdict"] != NO_CLAIM, ["function", "file"]].T.to_numpy())) \
        if (functions["self_verdict"] != NO_CLAIM).any() else set()
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
