"""What a finding costs: a tree of N modules walked once per item, M times, at the per-visit cost measured here.

A module visit costs microseconds on one machine and a fraction of that on another, so N and M come from a real
tree (``--like``) or are given, and the per-visit cost from a saved traversal sweep, a cache or a quick sweep.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError
from ..formatting import count, short_duration
from ..lint.findings import Finding, Price, findings_markdown, ordered
from ..lint.limits import check_count, check_visit_cost
from ..lint.sources import SourceError, read_bounded
from ..names import cache_dir as kit_cache_dir

COST_FILE = "visit-cost.json"
TOKEN2WAV = "token2wav"


@dataclass(frozen=True)
class TreeSize:
    """N modules, walked M times (``items``: what the loop goes over)."""

    name: str
    modules: int
    items: int
    items_label: str = "items"

    def describe(self) -> str:
        return f"{self.name}: N = {count(self.modules)} modules, M = {count(self.items)} {self.items_label}"


@dataclass(frozen=True)
class VisitCost:
    """Seconds one module visit costs inside ``state_dict()`` on this machine, and where that figure comes from."""

    seconds: float
    basis: str


def tree_like(name: str) -> TreeSize:
    """Token2Wav's counts (meta device) or a transformers architecture's (built on the meta device)."""
    if name == TOKEN2WAV:
        from ..token2wav.model import inventory

        inv = inventory("vllm-omni", "full")
        return TreeSize(TOKEN2WAV, inv.modules, inv.named_buffers, "named buffers")
    from .audit import architectures, build_on_meta
    from .trees import tree_counts

    if name not in architectures():
        raise OmniLoaderError(f"--like {name!r} is neither {TOKEN2WAV} nor a transformers model type "
                              "(see `omni-loader audit --list`)")
    try:
        model = build_on_meta(name)
    except Exception as exc:  # noqa: BLE001 - a model transformers cannot build is the user's choice to change
        raise OmniLoaderError(f"--like {name}: transformers could not build it on the meta device: "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    modules, buffers = tree_counts(model)
    if buffers:
        return TreeSize(name, modules, buffers, "named buffers")
    return TreeSize(name, modules, sum(1 for _ in model.named_parameters()), "named parameters")


def tree_size(modules: int | None = None, items: int | None = None, like: str | None = None) -> TreeSize | None:
    """The tree to price against: ``like``'s counts, with ``modules``/``items`` overriding; None without either."""
    if like is None and modules is None and items is None:
        return None
    base = tree_like(like) if like else None
    if base is None and (modules is None or items is None):
        raise OmniLoaderError("give both --modules N and --items M (or --like token2wav) to price the findings")
    for option, value in (("--modules", modules), ("--items", items)):
        if value is not None:
            check_count(option, value)
    if base is None:
        return TreeSize("given", int(modules), int(items))  # type: ignore[arg-type]
    return replace(base, modules=modules or base.modules, items=items or base.items)


def cost_from_rows(rows, basis: str) -> VisitCost:  # rows: the traversal sweep's tidy DataFrame
    from .fits import linear_costs

    per_module = linear_costs(rows, "state_dict", "wall")["per_module_seconds"]
    if not per_module > 0:
        raise OmniLoaderError(f"{basis}: the sweep's rows give no positive per-module cost of state_dict()")
    return VisitCost(per_module, basis)


def measure_cost() -> VisitCost:
    """A quick traversal sweep of small synthetic trees (seconds), fitted for state_dict()'s per-module cost."""
    from .traversal import SweepConfig, run_sweep

    start = time.perf_counter()
    config = SweepConfig.quick(token2wav=None, b_values=(4, 16), repeats=3)
    rows = run_sweep(config, progress=False)
    cost = cost_from_rows(rows, "quick traversal sweep")
    return replace(cost, basis=f"{cost.basis} ({time.perf_counter() - start:.1f} s)")


def visit_cost(results: str | Path | None = None, cache_dir: str | Path | None = None,
               measure: bool = True) -> VisitCost:
    """The per-visit cost: from ``results`` (a saved sweep), else the cache, else a quick sweep (then cached)."""
    import pandas as pd

    if results is not None:
        path = Path(results)
        csv = path / "traversal.csv" if path.is_dir() else path
        if not csv.is_file():
            raise OmniLoaderError(f"--results {results}: no traversal.csv there (run `omni-loader traversal --out DIR`)")
        return cost_from_rows(pd.read_csv(csv), f"fitted from {csv}")
    cache = Path(kit_cache_dir() if cache_dir is None else cache_dir) / COST_FILE
    machine = {"node": platform.node(), "machine": platform.machine(), "processor": platform.processor(),
               "python": platform.python_version(), "torch": importlib.metadata.version("torch")}
    try:
        saved = json.loads(read_bounded(cache, 1 << 16))  # a regular file, a small one: never a FIFO's wait
        if saved.get("machine") == machine:
            return VisitCost(check_visit_cost(saved["seconds_per_visit"]), f"{saved['basis']}, cached in {cache}")
    except (OmniLoaderError, OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # none, or not one this machine wrote: measured again
    if not measure:
        raise OmniLoaderError(f"no per-visit cost cached in {cache}; give --visit-cost SECONDS or --results DIR")
    cost = measure_cost()
    from ..safe_files import refuse_link, replaced

    try:  # by a rename, never through a link; any other failure only costs the next run a sweep
        cache.parent.mkdir(parents=True, exist_ok=True)
        refuse_link(cache, "the audit's per-visit cost cache is written only in place; remove the link")
        with replaced(cache) as tmp:
            tmp.write_text(json.dumps({"machine": machine, "seconds_per_visit": cost.seconds, "basis": cost.basis,
                                       "measured": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1))
    except OSError:
        pass
    return cost


def price_findings(findings: Sequence[Finding], size: TreeSize, cost: VisitCost) -> list[Finding]:
    """``findings`` with a :class:`Price` each: ``size.items`` walks of ``size.modules`` modules at ``cost``."""
    basis = f"{size.describe()}; {short_duration(cost.seconds)} per module visit, {cost.basis}"
    return [replace(f, price=Price(size.modules, size.items, cost.seconds, basis)) for f in findings]


class Findings(tuple):
    """A source audit's findings (a tuple of :class:`Finding`, in order) and what a notebook shows of them."""

    def markdown(self, relative_to: str | Path | None = None) -> str:
        """One row per finding (:func:`findings_markdown`)."""
        return findings_markdown(self, relative_to)

    def price_beside(self, sweep: Any) -> str:  # sweep: a traversal SweepResult
        """Why a finding's price (per module visit, for any walk) is neither the sweep's B·N power law nor its measured
        real model, in one computed line; empty when no finding is priced."""
        from ..formatting import count, times
        from .fits import source_words

        priced = [f.price for f in self if f.price is not None]
        if not priced:
            return ""
        price = priced[0]
        try:
            same = math.isclose(cost_from_rows(sweep.rows, "sweep").seconds, price.seconds_per_visit, rel_tol=1e-9)
        except (OmniLoaderError, ValueError, KeyError):
            same = False
        where = ("state_dict()'s cost per module, fitted on this sweep's synthetic trees" if same
                 else f"the per-visit cost {price.basis.rsplit('; ', 1)[-1]}")
        lines = [f"The finding's ≈ {short_duration(price.seconds_total)} is {count(price.visits)} module visits × "
                 f"{short_duration(price.seconds_per_visit)} ({where}): a price per visit, linear in the visits, "
                 "so it holds for any walk of any tree, run or not."]
        fit = sweep.fits.get("baseline")
        if fit is not None:
            past = (f", extended {times(price.visits / fit.x_max)} past the {count(fit.x_max)} its fit ends at"
                    if price.visits > fit.x_max else "")
            lines.append(f"The sweep's B·N line predicts {short_duration(float(fit.predict(price.visits)))} at the "
                         f"same B·N: a power law of slope {fit.slope:.2f}{past}.")
        placement = sweep.placement
        if placement is not None and len(placement):
            real = placement[(placement["experiment"] == "baseline") & (placement["x"] == price.visits)]
            for r in real.itertuples(index=False):
                measured = float(r.median_seconds)
                lines.append(f"Measured, {source_words(r.source)} took {short_duration(measured)}, "
                             f"{times(measured / price.seconds_total)} the finding's price: "
                             f"{short_duration(measured / price.visits)} per visit, its modules "
                             f"{'dearer' if measured > price.seconds_total else 'cheaper'} to visit than empty "
                             "synthetic ones. For that model the measurement is the figure to trust; the finding's "
                             "price is the estimate for code that has not run.")
        return " ".join(lines)


def audit_sources(paths: Sequence[str | Path] | str | Path, *, modules: int | None = None,
                  items: int | None = None, like: str | None = None, seconds_per_visit: float | None = None,
                  results: str | Path | None = None, exclude: Sequence[str] = ()) -> Findings:
    """The findings of the Python files under ``paths``, priced when a tree is given (``modules`` and
    ``items``, or ``like='token2wav'`` or a transformers model type); ``seconds_per_visit`` fixes the
    per-module-visit cost, else it comes from ``results`` (a saved sweep), the cache or a quick sweep."""
    if seconds_per_visit is not None:
        check_visit_cost(seconds_per_visit)
    size = tree_size(modules, items, like)
    from ..lint.source_audit import scan_sources

    audit = scan_sources([paths] if isinstance(paths, (str, Path)) else paths, exclude)
    if audit.failures:
        raise SourceError("; ".join(audit.failures))
    found = list(audit.findings)
    if size is None or not found:
        return Findings(found)
    cost = VisitCost(seconds_per_visit, "given") if seconds_per_visit else visit_cost(results)
    return Findings(ordered(price_findings(found, size, cost)))
