"""The kit's vocabulary: variant, phase, layout and file names that every layer shares.

Why a module of its own: rendering a report or a plot from a saved ``runs.csv`` needs these
names but nothing that builds a model, so this module imports no torch (``omni-loader report``
stays a sub-second command, and a test checks ``sys.modules`` for it). Modules that build or load
models import what they use from here; nothing here may import from the rest of the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# The two loader variants of vLLM-Omni PR 7061, in the order the PR's tables list them: every A/B
# compares with the first.
VARIANTS = ("baseline", "optimized")

@dataclass(frozen=True)
class Phase:
    """One timed phase of a load, as the loader nests its ``with clock.phase(...)`` (a test holds the two alike)."""

    name: str
    parent: str | None  # the phase enclosing it; None: timed on its own
    label: str  # the phase in words, as the report's tables and figures name it
    reads_checkpoint: bool = False  # reads the checkpoint's files (shards, spk_dict.pt): a cold page cache slows it
    step: str | None = None  # the variant step timed as this phase: where two variants can differ


# vLLM's ``Loading weights took X seconds`` (its DefaultModelLoader) times the outer Qwen2.5-Omni ``load_weights``
# from its first pull of the weight iterator (the lists are made first) to its return: after "construct", before
# "post_load" (the all-loaded check, post-load processing, eval). The kit times that region as this phase.
OUTER_LOAD_WEIGHTS = "outer_load_weights"
# The phases of one Token2Wav load, in the order they start: the one declaration every list and map of phases is
# derived from (:class:`PhaseTree`). "weight_loading" is upstream's Token2Wav ``load_weights``;
# "model_loaded_size" is vLLM-Omni's ``[Model Loaded] … size=… MB`` walk over the parameters, run inside it between
# the parameters and the buffers; "hub_check" is the outer ``load_weights`` resolving ``spk_dict.pt`` through
# huggingface_hub for a Hub id; "reference_copy" is the yardstick timed after the load, outside "total".
PHASES = (
    Phase("total", None, "Whole Token2Wav load"),
    Phase("construct", "total", "Construction"),
    Phase(OUTER_LOAD_WEIGHTS, "total", "vLLM's 'Loading weights took' region (outer load_weights)"),
    Phase("read_checkpoint", OUTER_LOAD_WEIGHTS, "Read checkpoint into a list", reads_checkpoint=True),
    Phase("hub_check", OUTER_LOAD_WEIGHTS, "Hub check (spk_dict.pt through huggingface_hub)"),
    Phase("speaker_conditioning", OUTER_LOAD_WEIGHTS, "Speaker conditioning (spk_dict.pt, 1st load)",
          reads_checkpoint=True),
    Phase("weight_loading", OUTER_LOAD_WEIGHTS, "Token2Wav weight loading"),
    Phase("buffer_discovery", "weight_loading", "Buffer discovery", step="discovery"),
    Phase("split_buffers", "weight_loading", "Split off persistent buffers"),
    Phase("load_parameters", "weight_loading", "Load parameters", reads_checkpoint=True, step="parameters"),
    Phase("model_loaded_size", "weight_loading", "[Model Loaded] size of the parameters"),
    Phase("load_buffers", "weight_loading", "Load persistent buffers"),
    Phase("load_spk_dict", "weight_loading", "spk_dict.pt (2nd load)", reads_checkpoint=True),
    Phase("post_load", "total", "Post-load check and eval()"),
    Phase("reference_copy", None, "Reference: strict load_state_dict (after the load)"),
)


@dataclass(frozen=True)
class PhaseTree:
    """What the kit derives from a declaration of phases, so that a phase declared once is in every list and map."""

    phases: tuple[Phase, ...]

    def children(self, parent: str | None) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases if p.parent == parent)

    def leaves(self, under: str = "total") -> tuple[str, ...]:
        """The phases without children that ``under`` encloses, in run order."""
        return tuple(leaf for c in self.children(under) for leaf in (self.leaves(c) or (c,)))

    def ended(self, parent: str | None = None) -> tuple[str, ...]:
        """The phases in the order they end (the clock's records): each after the phases it encloses."""
        return tuple(name for c in self.children(parent) for name in (*self.ended(c), c))

    @property
    def enclosing(self) -> dict[str, tuple[str, ...]]:
        """Each phase that encloses others -> the leaves it encloses; innermost first (as they end)."""
        return {p: self.leaves(p) for p in self.ended() if self.children(p)}

    @property
    def labels(self) -> dict[str, str]:
        """Each phase's words: the leaves in run order, then the enclosing phases, then the rest."""
        words = {p.name: p.label for p in self.phases}
        return {p: words[p] for p in dict.fromkeys((*self.leaves(), *self.enclosing, *words))}

    @property
    def reading(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.phases if p.reads_checkpoint)

    @property
    def reading_rows(self) -> tuple[str, ...]:  # the enclosing phases that hold a phase reading the checkpoint
        return tuple(row for row, leaves in self.enclosing.items() if set(leaves) & set(self.reading))

    @property
    def steps(self) -> dict[str, str]:  # a variant's step -> the phase it is timed as
        return {p.step: p.name for p in self.phases if p.step}


PHASE_TREE = PhaseTree(PHASES)
LEAF_PHASES = PHASE_TREE.leaves()  # the load's own steps, timed one after another inside "total"
ENCLOSING = PHASE_TREE.enclosing
WEIGHT_LOADING_CHILDREN = ENCLOSING["weight_loading"]
OUTER_LOAD_WEIGHTS_CHILDREN = ENCLOSING[OUTER_LOAD_WEIGHTS]
PHASE_LABELS = PHASE_TREE.labels
READ_PHASES = PHASE_TREE.reading
STEP_PHASES = PHASE_TREE.steps

# Module trees the kit can build, construction modes (where parameter memory is first written),
# synthetic snapshot sizes, and the stage dtypes by name (loader maps them to torch dtypes).
LAYOUTS = ("vllm-omni", "transformers")
CONSTRUCT_MODES = ("resident", "upstream-cpu", "empty", "init")
# Names a results directory of an older kit may hold, and what they mean now.
LEGACY_CONSTRUCT_MODES = {"upstream": "upstream-cpu"}
SIZES = ("full", "tiny")
# How the checkpoint's shards are read, as vLLM's --safetensors-load-strategy: lazy (memory-mapped, each tensor
# read on first use: the default) or eager (each shard read whole into memory first, for network file systems).
READ_STRATEGIES = ("lazy", "eager")
DTYPE_NAMES = ("float32", "bfloat16", "float16")

# How a load's tensors are fingerprinted to check that variants loaded the same model: every
# parameter's and buffer's name, dtype, shape and bytes. xxh3-128 reads 1.8 GB in about 0.07 s here
# where SHA-256 took 1.05 s per run; results of schema 1 and 2 hold bare SHA-256 hex digests.
DIGEST_ALGORITHM = "xxh3-128"


def digest_algorithm(digest: str) -> str:
    """The algorithm a recorded digest was made with: its ``name:`` prefix, or sha256 for a bare hex digest."""
    name, sep, _ = str(digest).partition(":")
    return name if sep else "sha256"


def short_digest(digest: str, digits: int = 16) -> str:
    """``xxh3-128 1a2b3c4d5e6f7a8b…``: the algorithm and the first hex digits, to quote a digest in a sentence."""
    text = str(digest)
    return f"{digest_algorithm(text)} {text.rpartition(':')[2][:digits]}…" if text else "(no digest)"


# The config.json key that marks a snapshot the kit wrote itself (random weights).
SYNTHETIC_KEY = "omni_loader_synthetic"


def cache_dir() -> Path:
    """The kit's cache folder: synthetic snapshots, the audit's cache (``$OMNI_LOADER_CACHE`` overrides)."""
    import os

    env = os.environ.get("OMNI_LOADER_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "omni-loader"


# Data shipped with the repository (the PR's published figures, the embedded config).
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
