"""``BenchmarkSpec``: what one load benchmark measures, saved in metadata.json and compared on ``--resume``.

A frozen value, the benchmark's identity: every option typed on a resume is compared with it field by field, so
two halves of one benchmark never measure different things. This module imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError, ResultsError
from ..names import VARIANTS
from ..token2wav.options import NOTED, LoadOptions, option, option_conflicts, option_fields
from ..token2wav.variants import BUILTIN_VARIANTS, variant_text
from .planner import DEFAULT_ORDER, DESIGNS, FIRST_LOOK, ORDERS, PlannedRun, looks, plan_runs
from .suite import METADATA_FILE, Record, Suite

# The A/A benchmark's two arms (rows with source "aa"); both load AA_VARIANT.
AA_ARMS = ("aa-1", "aa-2")
AA_VARIANT = "optimized"
DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1
LOAD_FIELDS = tuple(option_fields(LoadOptions))
# A load in the benchmark's own process cannot be killed and the benchmark go on: the limit would be a promise.
IN_PROCESS_TIMEOUT = ("--worker-timeout needs a worker process to kill: drop it, or drop --in-process (--workers "
                      "forkserver or spawn)")


def same_path(value: Any, old: Any) -> bool:
    """Two checkpoints are the same setting when they resolve to one directory."""
    return Path(value).resolve() == Path(old).resolve() if value and old else value == old


@dataclass(frozen=True)
class BenchmarkSpec:
    """What is measured. ``load`` says how every load is set up, on a resolved device (never ``auto``).

    Each field is an option (:func:`~omni_loader.token2wav.options.option`); the load options are read by their
    flat names too (``spec.layout`` is ``spec.load.layout``), and :meth:`from_flat` builds a spec from them.
    """

    checkpoint: str = option(same=same_path, help="the snapshot directory", compared=False)  # compare checks its digest
    load: LoadOptions = option(default_factory=lambda: LoadOptions(device="cpu"), nested=LoadOptions)
    warmup: int = option(DEFAULT_WARMUP, help=f"warm-up runs per variant (default {DEFAULT_WARMUP})", compared=False)
    runs: int = option(DEFAULT_RUNS, help=f"measured runs per variant (default {DEFAULT_RUNS}; the PR used 5); typed, it "
                                          "asks for the fixed design", compared=False)
    design: str = option(DESIGNS[0], choices=DESIGNS,
                         help=f"sequential (default): stop after {FIRST_LOOK} runs a side when every headline verdict "
                              "is claimed and no control confounds one, else run all --runs, each look at its share of the "
                              "error rate; fixed: always --runs (the PR's design, and what typing --runs asks for)",
                         compared=False)
    order: str = option(DEFAULT_ORDER, choices=ORDERS,
                        help="run order (default blocks: each round a seeded random permutation of the variants, so "
                             "carry-over from the run before is not tied to one variant; alternate: ABAB..., the PR's)",
                        compared=False)
    seed: int = option(0, flag="--order-seed", help="seed for --order blocks and shuffle", compared=False)
    workers: str = option("forkserver", help="process per run: forkserver (default: forked from a server that imported "
                                             "torch and the model code once), spawn (a new interpreter, imports "
                                             "included) or in-process", compared=True)
    worker_timeout: float | None = option(None, help="kill a worker after S seconds", compared=False)
    aa: bool = option(False, help=f"also run an A/A benchmark ({AA_VARIANT} in both arms) for this machine's noise floor",
                      compared=False)
    reference_copy: bool = option(False, help="also time a plain strict load_state_dict of the same tensors after "
                                              "each load (a yardstick)", compared=False)
    # torch intra-op threads per load (see placement.intra_op_threads); None: torch's default (--threads 0)
    threads: int | None = option(1, spell=lambda v: str(v or 0),
                                 help="torch intra-op threads per load (default 1: a busy neighbour core cannot stall "
                                      "a copy's thread barrier; 0: torch's default)", compared=True)
    # the CPUs each load's process may run on (placement.cpu_affinity); empty: any
    cpus: tuple[int, ...] = option((), spell=lambda v: ",".join(map(str, v)) or "any",
                                   help="the CPUs each load's process may run on (default auto: pinned to the last "
                                        "core when it runs on one thread, so that the scheduler does not move it; "
                                        "any: not pinned; or e.g. 1 or 0,2)", compared=False)
    variants: tuple[str, ...] = option(VARIANTS, help=f"the arms, compared with the first (default {','.join(VARIANTS)};"
                                                      f" built-ins: {', '.join(BUILTIN_VARIANTS)}, or names given "
                                                      "with --variant)", compared=NOTED)
    # Variant dicts of the arms that name their own steps
    custom_variants: tuple[dict[str, Any], ...] = option(
        (), flag="--variant", spell=lambda v: ",".join(d["name"] for d in v) or "none",
        shell=lambda v: [w for d in v for w in ("--variant", variant_text(d))],
        help="define a variant with your own step(s): STEP is discovery or parameters, REF is module:function or "
             "file.py:function, imported in each worker (repeatable)", compared=False)

    def __post_init__(self) -> None:
        if isinstance(self.load, Mapping):
            object.__setattr__(self, "load", LoadOptions.from_dict(self.load))
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "cpus", tuple(self.cpus))
        object.__setattr__(self, "custom_variants", tuple(self.custom_variants))
        if self.workers == "in-process" and self.worker_timeout is not None:
            raise OmniLoaderError(IN_PROCESS_TIMEOUT)

    @classmethod
    def from_flat(cls, values: Mapping[str, Any]) -> BenchmarkSpec:
        """A spec from its settings by flat name; flat load options change single fields of a given ``load``."""
        rest = {k: v for k, v in values.items() if k not in LOAD_FIELDS}
        base = rest.pop("load", None) or LoadOptions(device="cpu")
        base = LoadOptions.from_dict(base) if isinstance(base, Mapping) else base
        return cls(**rest, load=base.replace(**{k: values[k] for k in LOAD_FIELDS if k in values}))

    @property
    def looks(self) -> tuple[int, ...]:
        """Runs a side after which the verdicts are read (:func:`~omni_loader.results.planner.looks`)."""
        return looks(self.design, self.runs, self.order, self.aa)

    def plan(self) -> list[PlannedRun]:
        """The A/B runs, then (with ``aa``) the A/A runs, numbered in one sequence."""
        plan = plan_runs(self.warmup, self.runs, self.order, self.seed, variants=self.variants)
        if self.aa:
            plan += plan_runs(self.warmup, self.runs, self.order, self.seed, first_id=len(plan), variants=AA_ARMS,
                              source="aa")
        return plan

    def to_dict(self) -> dict[str, Any]:
        """As saved in metadata.json: the fields, ``load`` nested."""
        return asdict(self)

    def flat(self) -> dict[str, Any]:
        """Every setting by the name its option sets (``layout``, not ``load``): what a resume compares."""
        return Record({"spec": self.to_dict()}).settings

    def value(self, name: str) -> Any:
        """One setting by its flat name (``runs``, ``layout``...)."""
        return getattr(self.load, name) if name in LOAD_FIELDS else getattr(self, name)

    @classmethod
    def from_metadata(cls, suite: Suite | dict[str, Any]) -> BenchmarkSpec:
        """The spec of a results directory's load benchmark (``suite``, or its metadata.json as read); one-line
        error if unusable.

        Reads schema 3 (``load`` nested) and schema 2 (the load options flat in the spec).
        """
        record = Suite.of(suite).benchmark("load") or {}
        saved = record.get("spec")
        if not isinstance(saved, dict) or "checkpoint" not in saved:
            raise ResultsError(f"{METADATA_FILE} holds no benchmark spec: it was not made by reproduce")
        if "in_process" in saved:
            raise ResultsError(f"{METADATA_FILE} was written by an older omni-loader (schema 1): it can be read and "
                               "compared, not continued; start a new benchmark")
        known = {f.name for f in fields(cls)} | set(LOAD_FIELDS)
        unknown = sorted(set(saved) - known)
        if unknown:
            raise ResultsError(f"{METADATA_FILE} has spec fields this omni-loader does not know ({', '.join(unknown)}):"
                               " it was made by a newer version; upgrade omni-loader to continue it")
        saved = {"design": "fixed", **saved}  # a benchmark recorded before the sequential design ran all its runs
        return cls.from_flat({k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})


for _name in LOAD_FIELDS:  # spec.layout reads spec.load.layout: older code and notebooks read the flat names
    setattr(BenchmarkSpec, _name, property(lambda self, name=_name: getattr(self.load, name)))


def spec_conflicts(saved: BenchmarkSpec, given: Mapping[str, Any]) -> list[str]:
    """One phrase per setting of ``given`` that differs from ``saved``: ``--runs 6 (saved: 5)``."""
    return option_conflicts(BenchmarkSpec, saved.flat(), given)
