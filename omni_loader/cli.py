"""The ``omni-loader`` command line. Each subcommand is a thin call into the library."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__
from .errors import OmniLoaderError

# Modules that add their own subcommands through ``add_command(subparsers)``.
COMMAND_MODULES: tuple[str, ...] = (
    "omni_loader.runner",
    "omni_loader.report",
    "omni_loader.profiling",
    "omni_loader.traversal",
    "omni_loader.server",
)


def _add_checkpoint_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("checkpoint (default: the embedded synthetic snapshot)")
    g.add_argument("--checkpoint", metavar="DIR", help="a snapshot directory in the Hub layout")
    g.add_argument("--model", metavar="ID", help="a model id resolved in the local Hugging Face cache, offline")
    g.add_argument("--size", choices=("full", "tiny"), default="full", help="synthetic snapshot size (default full)")
    g.add_argument("--seed", type=int, default=0, help="synthetic snapshot seed (default 0)")
    g.add_argument("--hf-cache", metavar="DIR", help="Hugging Face cache directory for --model")
    g.add_argument("--download", action="store_true", help="allow --model to download the Token2Wav shards")


def _add_load_args(p: argparse.ArgumentParser) -> None:
    from .loader import DTYPES
    from .model import CONSTRUCT_MODES, LAYOUTS

    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni", help="module tree to build (default vllm-omni)")
    p.add_argument("--construct", choices=CONSTRUCT_MODES, default="upstream",
                   help="where parameter memory is first written: upstream (default: at construction, as vLLM-Omni's "
                        "constructors do; fused qkv_proj left empty), empty (nothing written: first touches land in "
                        "load_parameters) or init (full random init)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (ROCm GPUs are cuda); default cpu")
    p.add_argument("--dtype", choices=tuple(DTYPES), default="float32", help="stage dtype (default float32)")


def snapshot_from_args(args: argparse.Namespace, progress: bool = True) -> Any:
    """The snapshot that ``--checkpoint`` / ``--model`` / ``--size`` select."""
    from .checkpoint import resolve_snapshot

    return resolve_snapshot(
        checkpoint=args.checkpoint,
        model_id=args.model,
        size=args.size,
        seed=args.seed,
        cache_dir=args.hf_cache,
        download=args.download,
        progress=progress,
    )


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


# --------------------------------------------------------------------------- inventory


def cmd_inventory(args: argparse.Namespace) -> int:
    from .model import inventory

    inv = inventory(args.layout, args.size).to_dict()
    if args.json:
        _print_json(inv)
        return 0
    print(f"Token2Wav ({args.size}, {args.layout} layout)")
    for key in ("modules", "named_buffers", "parameters", "parameter_elements", "parameter_bytes"):
        print(f"  {key:20s} {inv[key]:>15,}")
    print(f"  {'persistent_buffers':20s} {len(inv['persistent_buffers']):>15,}  {', '.join(inv['persistent_buffers'])}")
    return 0


# --------------------------------------------------------------------------- synth


def cmd_synth(args: argparse.Namespace) -> int:
    from .checkpoint import place_in_hub_cache, synthesize

    out = synthesize(args.out, size=args.size, seed=args.seed, progress=True, overwrite=args.force)
    print(f"wrote synthetic {args.size} snapshot (seed {args.seed}) to {out}")
    if args.hub_cache:
        target = place_in_hub_cache(out, args.hub_cache, args.model_id)
        print(f"placed it in the Hugging Face cache as {args.model_id}: {target}")
    return 0


# --------------------------------------------------------------------------- load


def cmd_load(args: argparse.Namespace) -> int:
    from .loader import LEAF_PHASES, load_token2wav

    snapshot = snapshot_from_args(args)
    _, result = load_token2wav(snapshot, args.variant, layout=args.layout, device=args.device, dtype=args.dtype,
                               construct=args.construct)
    data = result.to_dict()
    data["checkpoint"] = snapshot.describe()
    if args.json:
        _print_json(data)
        return 0
    print(f"Token2Wav load: variant={result.variant} layout={result.layout} device={result.device} dtype={result.dtype}"
          f" construct={result.construct}")
    print(f"checkpoint: {snapshot.root} ({snapshot.source})")
    records = {r.name: r for r in result.phases}
    print(f"  {'phase':<24}{'time':>12}   {'minor faults':>12} {'major':>6} {'inv. switches':>13}")
    for name in ("total", *LEAF_PHASES[:3], "weight_loading", *LEAF_PHASES[3:]):
        r = records[name]
        indent = "    " if r.parent == "weight_loading" else "  "
        print(f"{indent}{name:<{24 - len(indent) + 2}}{r.seconds * 1e3:>9.3f} ms   {r.minor_faults:>12,} "
              f"{r.major_faults:>6,} {r.involuntary_switches:>13,}")
    print(f"state_dict() calls: {result.state_dict_calls}")
    print(f"weights loaded:     {result.weights_loaded}")
    print(f"persistent buffers: {', '.join(result.persistent_buffers) or '(none)'}")
    print(f"peak RSS:           {data['rss_peak_bytes'] / 2**20:,.0f} MiB")
    if data["device_peak_bytes"] is not None:
        print(f"device peak:        {data['device_peak_bytes'] / 2**20:,.0f} MiB")
    print(f"digest:             {result.digest} ({result.tensors_digested} tensors)")
    return 0


# --------------------------------------------------------------------------- discovery-bench


def cmd_discovery_bench(args: argparse.Namespace) -> int:
    from .model import build_model, config_dict
    from .traversal import time_discovery

    model = build_model(config_dict(args.size), layout=args.layout, device="cpu")
    timing = time_discovery(model, repeats=args.repeats, warmup=args.warmup)
    rows = {v: timing.samples[v] for v in timing.samples}
    if args.json:
        _print_json({"samples": rows, "state_dict_calls": timing.state_dict_calls, "ratio": timing.ratio(),
                     "agree": timing.agree, "repeats": args.repeats, "warmup": args.warmup})
        return 0
    print(f"buffer discovery on Token2Wav ({args.size}, {args.layout}), {args.warmup} warm-up + {args.repeats} runs each, alternating")
    for variant, samples in rows.items():
        print(f"  {variant:<10} median {timing.median(variant) * 1e3:10.3f} ms   min {min(samples) * 1e3:10.3f}"
              f"   max {max(samples) * 1e3:10.3f}   state_dict() calls {timing.state_dict_calls[variant]}")
    print(f"  ratio baseline/optimized (medians): {timing.ratio():.0f}x")
    print(f"  {timing.summary}")
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from .discovery import VARIANTS
    from .model import LAYOUTS, SIZES

    parser = argparse.ArgumentParser(
        prog="omni-loader",
        description="Profile Qwen2.5-Omni Token2Wav loading with both buffer-discovery variants "
        "(baseline: one state_dict() per buffer; optimized: one module walk).",
        epilog="Start with `omni-loader reproduce` (synthetic full-size checkpoint, CPU) or `--help` on a command.",
    )
    parser.add_argument("--version", action="version", version=f"omni-loader {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inventory", help="count modules, buffers and parameters (meta device, fast)")
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inventory)

    p = sub.add_parser("synth", help="write a synthetic snapshot in the Hub layout")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
    p.add_argument("--hub-cache", metavar="DIR", help="also place it in this Hugging Face cache directory")
    p.add_argument("--model-id", default="Qwen/Qwen2.5-Omni-3B", help="model id for --hub-cache")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("load", help="load Token2Wav once with one variant and report its phases")
    p.add_argument("--variant", choices=VARIANTS, default="optimized")
    _add_checkpoint_args(p)
    _add_load_args(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("discovery-bench", help="time both buffer-discovery rules on the model, alternating")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_discovery_bench)

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except OmniLoaderError as exc:
        print(f"omni-loader: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("omni-loader: interrupted", file=sys.stderr)
        return 130
