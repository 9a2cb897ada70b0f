"""Option groups that several commands share, and their translation into typed values.

Every command that loads Token2Wav takes the same checkpoint options (``--checkpoint``,
``--model``, ``--size``…) and load options (``--layout``, ``--device``…); they are declared once
here and turned into a :class:`~omni_loader.token2wav.checkpoint.Snapshot` and a
:class:`~omni_loader.token2wav.options.LoadOptions` here, so that no library function sees a Namespace.
"""

from __future__ import annotations

import argparse
from dataclasses import fields
import json
import sys
from typing import Any

from ..names import CONSTRUCT_MODES, DTYPE_NAMES, LAYOUTS, READ_STRATEGIES, SIZES
from ..token2wav.options import LoadOptions

CONSTRUCT_HELP = ("where parameter memory is first written: resident (default: every parameter at construction, "
                  "as GPU memory is resident when the allocator hands it out), upstream-cpu (as vLLM-Omni's "
                  "constructors do on a CPU: fused qkv_proj left empty), empty (nothing written: first touches "
                  "land in load_parameters) or init (full random init)")


def add_checkpoint_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("checkpoint (default: the embedded synthetic snapshot)")
    g.add_argument("--checkpoint", metavar="DIR", help="a snapshot directory in the Hub layout")
    g.add_argument("--model", metavar="ID", help="a model id resolved in the local Hugging Face cache, offline")
    g.add_argument("--size", choices=SIZES, default=Default("full"), help="synthetic snapshot size (default full)")
    g.add_argument("--seed", type=int, default=Default(0), help="synthetic snapshot seed (default 0)")
    g.add_argument("--hf-cache", metavar="DIR", help="Hugging Face cache directory for --model")
    g.add_argument("--download", action="store_true", default=Default(False),
                   help="allow --model to download the Token2Wav shards")


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layout", choices=LAYOUTS, default=Default("vllm-omni"), help="module tree to build (default vllm-omni)")
    p.add_argument("--construct", choices=CONSTRUCT_MODES, default=Default("resident"), help=CONSTRUCT_HELP)
    p.add_argument("--device", default=Default("auto"),
                   help="auto (default: the GPU when torch sees one, else the CPU), cpu, cuda or cuda:N (ROCm GPUs are cuda)")
    p.add_argument("--dtype", choices=DTYPE_NAMES, default=Default("float32"), help="stage dtype (default float32)")
    p.add_argument("--read", choices=READ_STRATEGIES, default=Default("lazy"),
                   help="how the shards are read, as vLLM's --safetensors-load-strategy: lazy (default: memory-mapped, "
                        "each tensor read on first use) or eager (each shard read whole into memory first)")


def load_options(args: argparse.Namespace) -> LoadOptions:
    """The :class:`LoadOptions` that the load options select: one option per field, named after it
    (``--layout`` sets ``layout``), so a new field needs its ``add_argument`` in :func:`add_load_options` only."""
    return LoadOptions(**{f.name: getattr(args, f.name) for f in fields(LoadOptions)})  # one option per field


def snapshot_from_args(args: argparse.Namespace, progress: bool = True) -> Any:
    """The snapshot that ``--checkpoint`` / ``--model`` / ``--size`` select (made or found; never downloaded
    without ``--download``)."""
    from ..token2wav.checkpoint import resolve_snapshot

    return resolve_snapshot(checkpoint=args.checkpoint, model_id=args.model, size=args.size, seed=args.seed,
                            cache_dir=args.hf_cache, download=args.download, progress=progress)


class Default:
    """An option's default, marked as one: ``add_argument(..., default=Default(10))``.

    Why: ``--resume`` takes every setting the user did not type from the saved spec and refuses a typed
    one that contradicts it, so the command layer must know which options were typed. argparse does not
    say; a marked default does, with nothing but its public API: after parsing, a value that is still a
    ``Default`` was not typed (:func:`take_defaults` unwraps it). Options whose default is ``None``, and
    flags (``store_true``: ``False`` until typed), need no mark. The commands whose ``--resume`` compares
    settings (``reproduce``, ``serve-ab``) mark every other default; a test holds them to it.
    """

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return repr(self.value)


NOT_OPTIONS = frozenset({"func", "command", "debug", "explicit"})  # what a Namespace holds besides options


def take_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Unwrap every :class:`Default` in ``args`` and record the typed options' dests in ``args.explicit``."""
    typed = set()
    for dest, value in vars(args).items():
        if isinstance(value, Default):
            setattr(args, dest, value.value)
        elif value is not None and value is not False and dest not in NOT_OPTIONS:
            typed.add(dest)
    args.explicit = typed
    return args


def given_options(args: argparse.Namespace) -> set[str]:
    """The dests of the options the user typed (not defaults), as :func:`take_defaults` recorded them in
    ``args.explicit``. A Namespace built without it has typed nothing."""
    return set(getattr(args, "explicit", ()))


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# --------------------------------------------------------------------------- checked option values

# The most runs (per variant) and warm-ups a benchmark may plan: a plan is kept in memory and in
# metadata.json, and 10,000 loads of even the tiny model take hours.
MAX_RUNS = 10_000
# The most torch threads a load may ask for.
MAX_THREADS = 4096


def bounded_int(option: str, low: int, high: int, meaning: str = "") -> Any:
    """An argparse ``type=``: an integer from ``low`` to ``high``, else one line naming ``option`` (exit 2).

    The error is an :class:`~omni_loader.errors.OmniLoaderError`, which argparse does not catch
    (only ValueError and TypeError): :func:`omni_loader.cli.main` prints it as its one line.
    """
    from ..errors import OmniLoaderError

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise OmniLoaderError(f"{option} {text}: must be a whole number from {low:,} to {high:,}{meaning}")
        return value

    parse.__name__ = "int"
    return parse


def positive_seconds(option: str) -> Any:
    """An argparse ``type=``: a finite number of seconds above 0, else one line naming ``option`` (exit 2)."""
    import math

    from ..errors import OmniLoaderError

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise OmniLoaderError(f"{option} {text}: must be a finite number of seconds above 0")
        return value

    parse.__name__ = "float"
    return parse
