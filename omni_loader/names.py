"""The kit's vocabulary: variant, phase, layout and file names that every layer shares.

Why a module of its own: rendering a report or a plot from a saved ``runs.csv`` needs these
names but nothing that builds a model, so this module imports no torch (``omni-loader report``
stays a sub-second command, and a test checks ``sys.modules`` for it). Modules that build or load
models import what they use from here; nothing here may import from the rest of the package.
"""

from __future__ import annotations

from pathlib import Path

# The two loader variants of vLLM-Omni PR 7061, in the order the PR's tables list them: every A/B
# compares with the first.
VARIANTS = ("baseline", "optimized")

# The timed steps of one Token2Wav load, in the order they run. The middle six are the children of
# "weight_loading" (upstream's Token2Wav ``load_weights``); "total" encloses them all.
# "model_loaded_size" is vLLM-Omni's ``[Model Loaded] … size=… MB`` walk over the parameters, which
# upstream runs inside ``load_weights`` between the parameters and the buffers; "hub_check" is the
# outer ``load_weights`` resolving ``spk_dict.pt`` through huggingface_hub for a Hub id.
LEAF_PHASES = (
    "construct",
    "read_checkpoint",
    "hub_check",
    "speaker_conditioning",
    "buffer_discovery",
    "split_buffers",
    "load_parameters",
    "model_loaded_size",
    "load_buffers",
    "load_spk_dict",
    "post_load",
)
WEIGHT_LOADING_CHILDREN = LEAF_PHASES[4:10]
# vLLM's ``Loading weights took X seconds`` (its DefaultModelLoader) times the outer Qwen2.5-Omni
# ``load_weights``: its clock starts when that method first pulls the weight iterator (the lists are
# made first) and stops when it returns, so the region holds these phases and not "construct" (before
# it) or "post_load" (after it: the all-loaded check, post-load processing, eval). The kit times the
# region as the phase "outer_load_weights", which encloses them.
OUTER_LOAD_WEIGHTS = "outer_load_weights"
OUTER_LOAD_WEIGHTS_CHILDREN = LEAF_PHASES[1:10]

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
