"""The kit's vocabulary: variant, phase, layout and file names that every layer shares.

Why a module of its own: rendering a report or a plot from a saved ``runs.csv`` needs these
names but nothing that builds a model, so this module imports no torch (``omni-loader report``
stays a sub-second command, and a test checks ``sys.modules`` for it). Modules that build or load
models re-export what they use from here; nothing here may import from the rest of the package.
"""

from __future__ import annotations

from pathlib import Path

# The two loader variants of vLLM-Omni PR 7061, in the order the PR's tables list them: every A/B
# compares with the first.
VARIANTS = ("baseline", "optimized")

# The timed steps of one Token2Wav load, in the order they run. The middle five are the children of
# "weight_loading" (upstream's Token2Wav ``load_weights``); "total" encloses them all.
LEAF_PHASES = (
    "construct",
    "read_checkpoint",
    "speaker_conditioning",
    "buffer_discovery",
    "split_buffers",
    "load_parameters",
    "load_buffers",
    "load_spk_dict",
    "post_load",
)
WEIGHT_LOADING_CHILDREN = LEAF_PHASES[3:8]

# Module trees the kit can build, construction modes (where parameter memory is first written),
# synthetic snapshot sizes, and the stage dtypes by name (loader maps them to torch dtypes).
LAYOUTS = ("vllm-omni", "transformers")
CONSTRUCT_MODES = ("upstream", "empty", "init")
SIZES = ("full", "tiny")
DTYPE_NAMES = ("float32", "bfloat16", "float16")

# The config.json key that marks a snapshot the kit wrote itself (random weights).
SYNTHETIC_KEY = "omni_loader_synthetic"

# Data shipped with the repository (the PR's published figures, the embedded config).
DATA_DIR = Path(__file__).resolve().parent.parent / "data"
