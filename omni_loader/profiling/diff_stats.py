"""The statistics of a differential profile (``profile --diff``): each sampled run's samples folded into
per-function times, and per function A against B.

:func:`fold_samples` folds one run's py-spy samples under ``load_token2wav`` (imports and the one-time
model-code import left out, as :mod:`~omni_loader.profiling.flamegraph` draws them) into per-function
inclusive and self seconds. :func:`compare_functions` takes every run's fold and, per function, gives the
medians, the difference of medians (B - A) with a 95% bootstrap interval, a two-sided Mann-Whitney test,
and Benjamini-Hochberg across the functions tested (:data:`FDR`). A function is claimed *faster* or
*slower* when its q-value is at most :data:`FDR` and its interval excludes zero; otherwise *no
difference claimed*. A function is tested when it was sampled in at least half the runs of either arm
(:data:`PRESENCE`). :func:`assign_roles` says of each claim whether it moved in its own code or is a caller
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
FUNCTION_COLUMNS = ("function", "file", "a_median_s", "b_median_s", "delta_s", "ci_low", "ci_high", "p", "q", "verdict",
                    "role", "a_self_median_s", "b_self_median_s", "self_delta_s", "self_ci_low", "self_ci_high",
                    "self_p", "self_q", "self_verdict", "a_present", "b_present", "tested", "self_tested")


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


def compare_functions(folds: pd.DataFrame, a: str, b: str, fdr: float = FDR, presence: float = PRESENCE) -> pd.DataFrame:
    """Per function, ``a`` against ``b`` from the runs' folds (``run_id``, ``variant`` and
    :func:`fold_samples`' columns; a run without a function counts 0 s of it): :data:`FUNCTION_COLUMNS`,
    the claims first, by the size of their difference. Inclusive and self time are tested alike (each
    when the function was in at least ``presence`` of one arm's runs, at the top of the stack for self
    time), and Benjamini-Hochberg runs over both families of p-values together."""
    runs = {v: sorted(folds.loc[folds["variant"] == v, "run_id"].unique()) for v in (a, b)}
    if not runs[a] or not runs[b]:
        raise OmniLoaderError(f"no sampled run of {a if not runs[a] else b}: nothing to compare")
    wide = {col: folds.pivot_table(index=["function", "file"], columns="run_id", values=col, aggfunc="sum",
                                   fill_value=0.0) for col in ("inclusive_s", "self_s")}
    rows = []
    for key in wide["inclusive_s"].index:
        row: dict[str, Any] = {"function": key[0], "file": key[1]}
        for col, prefix in (("inclusive_s", ""), ("self_s", "self_")):
            x = {v: wide[col].loc[key].reindex(runs[v], fill_value=0.0).to_numpy() for v in (a, b)}
            row.update(_tested(x[a], x[b], presence, prefix))
        rows.append(row)
    df = pd.DataFrame(rows)
    q = benjamini_hochberg(np.concatenate([df["p"].to_numpy(), df["self_p"].to_numpy()]))
    df["q"], df["self_q"] = q[: len(df)], q[len(df):]
    for prefix in ("", "self_"):
        claimed = (df[prefix + "q"] <= fdr) & ((df[prefix + "ci_low"] > 0) | (df[prefix + "ci_high"] < 0))
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
