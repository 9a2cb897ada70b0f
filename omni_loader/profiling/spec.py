"""``ProfileSpec``: what ``omni-loader profile`` and ``profile --diff`` are told, one option per field, which the
parser, the diff's saved record and ``--resume``'s check walk (:data:`PROFILE`/:data:`DIFF` fields: one mode only);
the profilers' settings are :class:`ProfileSettings`' fields, in their place. Imports neither torch nor pandas: the
command line's parser is built from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..results.spec import BenchmarkSpec, same_path
from ..names import VARIANTS
from ..token2wav.options import LoadOptions, option, option_fields
from ..token2wav.variants import Variant
from .settings import DIFF, PROFILE, SETTING_NAMES, TOOLS, VARIANT_CHOICES, ProfileSettings, marked

DEFAULT_RUNS = 15  # sampled loads per variant: enough for a rank test to survive ~300 tests at 5% FDR


def spelled_variants(values: Any) -> str:
    """``--variant``'s values as a command line spells them: a name, or a definition ``NAME=STEP:REF,...``."""
    from ..token2wav.variants import variant_text

    return ",".join(v if isinstance(v, str) else variant_text(v if isinstance(v, Mapping) else v.to_dict())
                    for v in values) or "none"


@dataclass(frozen=True)
class ProfileSpec:
    """The profile's settings: ``settings`` those of the one-load-per-tool profile; the diff's are those not marked
    :data:`PROFILE` (the fields marked :data:`DIFF`, the load, the rate, py-spy, the warm-ups, ``--variant``'s
    definitions)."""

    variant: tuple[Any, ...] = option((), spell=spelled_variants, help=(
        f"variant(s) to profile: {', '.join(VARIANT_CHOICES)} (default both); with --diff, NAME=STEP:REF[,STEP:REF] "
        "defines a variant of your own for --variants, as in reproduce"))
    tool: tuple[str, ...] | None = marked(option(None, choices=(*TOOLS, "all"),
                                                  help="profiler to run; repeat for several (default all)"), only=PROFILE)
    checkpoint: str = option("", same=same_path, help="the snapshot directory")
    load: LoadOptions = option(default_factory=LoadOptions, nested=LoadOptions)
    settings: ProfileSettings = option(default_factory=ProfileSettings, nested=ProfileSettings)
    diff: bool = option(False, help="which functions B made faster or slower than A: randomized blocks of "
                                    "fresh-process loads, each sampled by py-spy, per-function medians, intervals and "
                                    "rank tests with Benjamini-Hochberg at 5%%; writes DIR/diff/functions.csv, "
                                    "diff.md, flame-diff.svg")
    variants: tuple[str, ...] = marked(option(VARIANTS, help="the two variants (default baseline,optimized; the same "
                                                             "name twice: an A/A diff)"), only=DIFF)
    runs: int = marked(option(DEFAULT_RUNS, help=f"sampled loads per variant (default {DEFAULT_RUNS}), and as many "
                                                 "unsampled ones for py-spy's cost"), only=DIFF)
    order_seed: int = marked(option(0, help="seed of the randomized blocks (default 0)"), only=DIFF)
    worker_timeout: float | None = marked(option(None, help="kill a load after S seconds"), only=DIFF)
    # --aa as reproduce declares it (BenchmarkSpec's field): its flag and its words, said of functions here
    aa: bool = marked(option(False, help=option_fields(BenchmarkSpec)["aa"].metadata["help"] + (
        ", per function: two more arms in each block, sampled alike; a function's difference within its A/A floor is "
        "not claimed (functions.csv aa_floor_s)")), only=DIFF)

    def record(self) -> dict[str, Any]:
        """The diff's settings by flat name, as saved (``--variant``'s definitions as dicts): what a resume compares."""
        flat = {**asdict(self), **self.load.to_dict(), **asdict(self.settings)}
        flat["variant"] = [v if isinstance(v, str) else v.to_dict() for v in self.variant]
        return {name: flat[name] for name, f in option_fields(self).items() if f.metadata.get("only") != PROFILE}

    @classmethod
    def from_record(cls, saved: Mapping[str, Any]) -> ProfileSpec:
        """The spec a saved :meth:`record` was made from."""
        values = {k: v for k, v in saved.items() if k in option_fields(cls)}
        spec = cls(**{k: v for k, v in values.items() if k not in option_fields(LoadOptions) and k not in SETTING_NAMES},
                   load=LoadOptions.from_dict(values), settings=ProfileSettings.from_dict(values))
        return replace(spec, variant=tuple(v if isinstance(v, str) else Variant(**v) for v in spec.variant),
                       variants=tuple(spec.variants))
