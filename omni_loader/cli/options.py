"""Option groups that several commands share, and their translation into typed values.

Every command that loads Token2Wav takes the same checkpoint options (``--checkpoint``,
``--model``, ``--size``…) and load options (``--layout``, ``--device``…); they are declared once
here and turned into a :class:`~omni_loader.checkpoint.Snapshot` and a
:class:`~omni_loader.options.LoadOptions` here, so that no library function sees a Namespace.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..names import CONSTRUCT_MODES, DTYPE_NAMES, LAYOUTS, SIZES
from ..options import LoadOptions

CONSTRUCT_HELP = ("where parameter memory is first written: upstream (default: at construction, as vLLM-Omni's "
                  "constructors do; fused qkv_proj left empty), empty (nothing written: first touches land in "
                  "load_parameters) or init (full random init)")


def add_checkpoint_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("checkpoint (default: the embedded synthetic snapshot)")
    g.add_argument("--checkpoint", metavar="DIR", help="a snapshot directory in the Hub layout")
    g.add_argument("--model", metavar="ID", help="a model id resolved in the local Hugging Face cache, offline")
    g.add_argument("--size", choices=SIZES, default="full", help="synthetic snapshot size (default full)")
    g.add_argument("--seed", type=int, default=0, help="synthetic snapshot seed (default 0)")
    g.add_argument("--hf-cache", metavar="DIR", help="Hugging Face cache directory for --model")
    g.add_argument("--download", action="store_true", help="allow --model to download the Token2Wav shards")


def add_load_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni", help="module tree to build (default vllm-omni)")
    p.add_argument("--construct", choices=CONSTRUCT_MODES, default="upstream", help=CONSTRUCT_HELP)
    p.add_argument("--device", default="auto",
                   help="auto (default: the GPU when torch sees one, else the CPU), cpu, cuda or cuda:N (ROCm GPUs are cuda)")
    p.add_argument("--dtype", choices=DTYPE_NAMES, default="float32", help="stage dtype (default float32)")


def load_options(args: argparse.Namespace) -> LoadOptions:
    """The :class:`LoadOptions` that ``--layout``/``--device``/``--dtype``/``--construct`` select."""
    return LoadOptions(layout=args.layout, device=args.device, dtype=args.dtype, construct=args.construct)


def snapshot_from_args(args: argparse.Namespace, progress: bool = True) -> Any:
    """The snapshot that ``--checkpoint`` / ``--model`` / ``--size`` select (made or found; never downloaded
    without ``--download``)."""
    from ..checkpoint import resolve_snapshot

    return resolve_snapshot(checkpoint=args.checkpoint, model_id=args.model, size=args.size, seed=args.seed,
                            cache_dir=args.hf_cache, download=args.download, progress=progress)


def given_options(args: argparse.Namespace) -> set[str]:
    """The dests of the options the user typed (not argparse defaults), as :func:`omni_loader.cli.main`
    recorded them in ``args.explicit``. A Namespace built without :func:`main` has typed nothing."""
    return set(getattr(args, "explicit", ()))


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
