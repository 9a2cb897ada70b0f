"""``ProfileSpec``: what ``omni-loader profile`` and ``profile --diff`` are told, one option per field, which the
parser, the diff's saved record and ``--resume``'s check walk (:data:`PROFILE`/:data:`DIFF` fields: one mode only).
Imports neither torch nor pandas: the command line's parser is built from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..results.spec import BenchmarkSpec, same_path
from ..names import VARIANTS
from ..token2wav.options import LoadOptions, option, option_fields
from ..token2wav.variants import Variant
from .settings import (DEFAULT_RATE, DEFAULT_TOP, MAX_AUTO_REPEAT, MIN_RATE, MAX_RATE, PY_SPY_ENV, SAMPLES_WANTED,
                       SETTING_NAMES, TOOLS, VARIANT_CHOICES, ProfileSettings)

PROFILE, DIFF = "profile", "diff"  # the mode an option is only for (a field's "only")
DEFAULT_RUNS = 15  # sampled loads per variant: enough for a rank test to survive ~300 tests at 5% FDR


def only(mode: str, f: Any) -> Any:
    """The option field ``f``, taken by ``mode`` alone (the other mode refuses it when typed)."""
    return field(default=f.default, default_factory=f.default_factory, metadata={**f.metadata, "only": mode})


def spelled_variants(values: Any) -> str:
    """``--variant``'s values as a command line spells them: a name, or a definition ``NAME=STEP:REF,...``."""
    from ..token2wav.variants import variant_text

    return ",".join(v if isinstance(v, str) else variant_text(v if isinstance(v, Mapping) else v.to_dict())
                    for v in values) or "none"


@dataclass(frozen=True)
class ProfileSpec:
    """The profile's settings: :meth:`settings` those of the one-load-per-tool profile, the rest (the fields
    marked :data:`DIFF`, the load, the rate, py-spy, the warm-ups, ``--variant``'s definitions) the diff's."""

    variant: tuple[Any, ...] = option((), spell=spelled_variants, help=(
        f"variant(s) to profile: {', '.join(VARIANT_CHOICES)} (default both); with --diff, NAME=STEP:REF[,STEP:REF] "
        "defines a variant of your own for --variants, as in reproduce"))
    tool: tuple[str, ...] | None = only(PROFILE, option(None, choices=(*TOOLS, "all"),
                                                        help="profiler to run; repeat for several (default all)"))
    checkpoint: str = option("", same=same_path, help="the snapshot directory")
    load: LoadOptions = option(default_factory=LoadOptions, nested=LoadOptions)
    top: int = only(PROFILE, option(DEFAULT_TOP, help=f"rows in the tables (default {DEFAULT_TOP})"))
    rate: int = option(DEFAULT_RATE, help=f"py-spy samples per second, {MIN_RATE} to {MAX_RATE:,} (default "
                                          f"{DEFAULT_RATE})")
    native: bool = only(PROFILE, option(False, help="py-spy: also record native (C/C++) frames"))
    repeat: int | None = only(PROFILE, option(None, help=f"py-spy: loads per worker process (default: enough for "
                                                         f"~{SAMPLES_WANTED} samples, at most {MAX_AUTO_REPEAT})"))
    py_spy: str | None = option(None, help=f"py-spy executable (default ${PY_SPY_ENV}, this Python's bin directory, "
                                           "then PATH)")
    py_spy_svg: bool = only(PROFILE, option(False, help="record flame.svg with a second py-spy run in its own "
                                                        "interactive format (default: draw it from the speedscope "
                                                        "samples of the one recording)"))
    warmup: int = option(1, help="unprofiled loads before profiling, and warm-ups of the reference runs (default 1)")
    reference_runs: int = only(PROFILE, option(3, help="unprofiled runs per variant, each in a fresh process, that "
                                                       "the phase shares come from: the median run's (default 3)"))
    diff: bool = option(False, help="which functions B made faster or slower than A: randomized blocks of "
                                    "fresh-process loads, each sampled by py-spy, per-function medians, intervals and "
                                    "rank tests with Benjamini-Hochberg at 5%%; writes DIR/diff/functions.csv, "
                                    "diff.md, flame-diff.svg")
    variants: tuple[str, ...] = only(DIFF, option(VARIANTS, help="the two variants (default baseline,optimized; the "
                                                                 "same name twice: an A/A diff)"))
    runs: int = only(DIFF, option(DEFAULT_RUNS, help=f"sampled loads per variant (default {DEFAULT_RUNS}), and as "
                                                     "many unsampled ones for py-spy's cost"))
    order_seed: int = only(DIFF, option(0, help="seed of the randomized blocks (default 0)"))
    worker_timeout: float | None = only(DIFF, option(None, help="kill a load after S seconds"))
    # --aa as reproduce declares it (BenchmarkSpec's field): its flag and its words, said of functions here
    aa: bool = only(DIFF, option(False, help=option_fields(BenchmarkSpec)["aa"].metadata["help"] + (
        ", per function: two more arms in each block, sampled alike; a function's difference within its A/A floor is "
        "not claimed (functions.csv aa_floor_s)")))

    def settings(self) -> ProfileSettings:
        """The one-load-per-tool profile's :class:`ProfileSettings`."""
        return ProfileSettings(**{name: getattr(self, name) for name in SETTING_NAMES})

    def record(self) -> dict[str, Any]:
        """The diff's settings by flat name, as saved (``--variant``'s definitions as dicts): what a resume compares."""
        flat = {**asdict(self), **self.load.to_dict()}
        flat["variant"] = [v if isinstance(v, str) else v.to_dict() for v in self.variant]
        return {name: flat[name] for name, f in option_fields(self).items() if f.metadata.get("only") != PROFILE}

    @classmethod
    def from_record(cls, saved: Mapping[str, Any]) -> ProfileSpec:
        """The spec a saved :meth:`record` was made from."""
        values = {k: v for k, v in saved.items() if k in option_fields(cls)}
        load = LoadOptions.from_dict(values)
        spec = cls(**{k: v for k, v in values.items() if k not in option_fields(LoadOptions)}, load=load)
        return replace(spec, variant=tuple(v if isinstance(v, str) else Variant(**v) for v in spec.variant),
                       variants=tuple(spec.variants))
