"""``BenchmarkSpec``: what one load benchmark measures, saved in metadata.json and compared on ``--resume``.

Why a frozen value: the spec is the benchmark's identity. It is written once when the benchmark
starts, read back to continue it (``--resume --out DIR`` needs nothing else), and every option a
user types on a resume is compared with it field by field, so that two halves of one benchmark
can never have measured different things. How each load is set up is one
:class:`~omni_loader.token2wav.options.LoadOptions` (``spec.load``), the value the worker receives.
This module imports no torch.
"""

from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import ResultsError
from ..names import VARIANTS
from ..token2wav.options import LoadOptions
from ..results.planner import DEFAULT_ORDER, PlannedRun, plan_runs
from ..results.suite import METADATA_FILE, benchmark

# The A/A benchmark's two arms (rows with source "aa"); both load AA_VARIANT.
AA_ARMS = ("aa-1", "aa-2")
AA_VARIANT = "optimized"
DEFAULT_RUNS = 10
DEFAULT_WARMUP = 1
LOAD_FIELDS = tuple(f.name for f in fields(LoadOptions))


@dataclass(frozen=True)
class BenchmarkSpec:
    """What is measured. ``load`` says how every load is set up; the device is a resolved one (never
    ``auto``), so that the record names the device used.

    The load options' names are accepted as shorthands and read back the same way:
    ``BenchmarkSpec(ckpt, layout="transformers").layout`` is ``spec.load.layout``.
    """

    checkpoint: str
    load: LoadOptions = field(default_factory=lambda: LoadOptions(device="cpu"))
    warmup: int = DEFAULT_WARMUP
    runs: int = DEFAULT_RUNS
    order: str = DEFAULT_ORDER
    seed: int = 0
    workers: str = "forkserver"
    worker_timeout: float | None = None
    aa: bool = False
    reference_copy: bool = False
    threads: int | None = 1  # torch intra-op threads per load (see placement.intra_op_threads); None: torch's default
    cpus: tuple[int, ...] = ()  # the CPUs each load's process may run on (placement.cpu_affinity); empty: any
    variants: tuple[str, ...] = VARIANTS  # the arms, in order; statistics compare each with the first
    custom_variants: tuple[dict[str, Any], ...] = ()  # Variant dicts of the arms that name their own steps
    layout: InitVar[str | None] = None
    device: InitVar[str | None] = None
    dtype: InitVar[str | None] = None
    construct: InitVar[str | None] = None
    read: InitVar[str | None] = None

    def __post_init__(self, layout: str | None, device: str | None, dtype: str | None, construct: str | None,
                      read: str | None) -> None:
        load = self.load.replace(layout=layout, device=device, dtype=dtype, construct=construct, read=read)
        object.__setattr__(self, "load", load)
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "custom_variants", tuple(self.custom_variants))

    def plan(self) -> list[PlannedRun]:
        """The A/B runs, then (with ``aa``) the A/A runs, numbered in one sequence."""
        plan = plan_runs(self.warmup, self.runs, self.order, self.seed, variants=self.variants)
        if self.aa:
            plan += plan_runs(self.warmup, self.runs, self.order, self.seed, first_id=len(plan), variants=AA_ARMS,
                              source="aa")
        return plan

    def request(self, run: PlannedRun) -> Any:
        """The :class:`~omni_loader.bench.worker.LoadRequest` of one planned run."""
        from .worker import LoadRequest

        custom = {v["name"]: v for v in self.custom_variants}
        variant = AA_VARIANT if run.source == "aa" else custom.get(run.variant, run.variant)
        return LoadRequest(self.checkpoint, variant, self.load, self.reference_copy, threads=self.threads,
                           cpus=self.cpus)

    def to_dict(self) -> dict[str, Any]:
        """As saved in metadata.json: the fields, ``load`` nested."""
        return asdict(self)

    def flat(self) -> dict[str, Any]:
        """Every setting by the name its option sets (``layout``, not ``load``): what a resume compares."""
        data = self.to_dict()
        return {**{k: v for k, v in data.items() if k != "load"}, **data["load"]}

    def value(self, name: str) -> Any:
        """One setting by its flat name (``runs``, ``layout``...)."""
        return getattr(self.load, name) if name in LOAD_FIELDS else getattr(self, name)

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> BenchmarkSpec:
        """The spec of a results directory's load benchmark; one-line error if unusable.

        Reads schema 3 (``load`` nested) and schema 2 (the load options flat in the spec).
        """
        record = benchmark(metadata, "load") or {}
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
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
        if isinstance(values.get("load"), dict):
            values["load"] = LoadOptions.from_dict(values["load"])
        return cls(**values)


for _name in LOAD_FIELDS:  # spec.layout reads spec.load.layout: older code and notebooks read the flat names
    setattr(BenchmarkSpec, _name, property(lambda self, name=_name: getattr(self.load, name)))


# The option that sets each spec setting, to name a conflict the way the user would type it.
# The load options' are --<field>: a new LoadOptions field needs no entry here.
SPEC_OPTIONS = {"checkpoint": "--checkpoint", **{name: f"--{name}" for name in LOAD_FIELDS}, "warmup": "--warmup",
                "runs": "--runs", "order": "--order", "seed": "--order-seed", "workers": "--workers", "worker_timeout": "--worker-timeout", "aa": "--aa",
                "reference_copy": "--reference-copy", "variants": "--variants", "custom_variants": "--variant",
                "threads": "--threads", "cpus": "--cpus"}


def spec_conflicts(saved: BenchmarkSpec, given: dict[str, Any], options: dict[str, str] | None = None) -> list[str]:
    """One phrase per setting of ``given`` (flat name -> value) that differs from ``saved``: ``--runs 6 (saved: 5)``.

    Settings absent from ``given`` are not compared: they are taken from ``saved``.
    """
    names = {**SPEC_OPTIONS, **(options or {})}
    lines = []
    for name, value in given.items():
        old = saved.value(name)
        if same_value(name, value, old):
            continue
        option = names.get(name, name)
        if isinstance(value, bool) or isinstance(old, bool):
            lines.append(f"{option} (saved: off)" if value else f"no {option} (saved: on)")
        else:
            lines.append(f"{option} {_shown(value, name)} (saved: {_shown(old, name)})")
    return lines


def same_value(name: str, value: Any, old: Any) -> bool:
    """Equal as settings: lists and tuples alike, dicts by content, checkpoints by resolved path."""
    def norm(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return tuple(norm(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, norm(x)) for k, x in v.items()))
        return v

    if name == "checkpoint" and value and old:
        return Path(value).resolve() == Path(old).resolve()
    return norm(value) == norm(old)


def _shown(value: Any, name: str = "") -> str:
    if name == "cpus" and not value:
        return "any"  # no pinning, as --cpus spells it
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return ",".join(v.get("name", str(v)) if isinstance(v, dict) else str(v) for v in value) or "none"
    return str(value)
