"""The ``omni-loader`` command line. Each subcommand is a thin call into the library."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from . import __version__
from .errors import OmniLoaderError, one_line

# Modules that add their own subcommands through ``add_command(subparsers)``.
COMMAND_MODULES: tuple[str, ...] = (
    "omni_loader.runner",
    "omni_loader.report",
    "omni_loader.profiling",
    "omni_loader.traversal",
    "omni_loader.server",
    "omni_loader.compare",
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
    p.add_argument("--device", default="auto",
                   help="auto (default: the GPU when torch sees one, else the CPU), cpu, cuda or cuda:N (ROCm GPUs are cuda)")
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


# --------------------------------------------------------------------------- audit


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 1 when the two rules disagree on any model built: that is a finding, not a crash."""
    from pathlib import Path

    from .audit import architectures, audit, audit_frame, audit_markdown

    known = architectures()
    archs = known if args.all else args.arch
    unknown = [a for a in archs if a not in known]
    if unknown:
        raise OmniLoaderError(f"--arch {unknown[0]!r} is not a transformers model type (see --list)")
    if args.list or not archs:
        print("\n".join(known) if args.list else "give --arch NAME (repeatable), --all or --list")
        return 0 if args.list else 2
    rows = audit(archs, repeats=args.repeats, progress=not args.json)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        audit_frame(rows).to_csv(out / "audit.csv", index=False)
        (out / "audit.md").write_text(audit_markdown(rows, top=None))
    if args.json:
        _print_json([r.to_dict() for r in rows])
    else:
        print(audit_markdown(rows, top=args.top))
        if args.out:
            print(f"audit: {Path(args.out) / 'audit.csv'}, {Path(args.out) / 'audit.md'}")
    return 1 if any(r.agree is False for r in rows) else 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    from .model import LAYOUTS, SIZES
    from .variants import BUILTIN_VARIANTS

    parser = argparse.ArgumentParser(
        prog="omni-loader",
        description="Profile Qwen2.5-Omni Token2Wav loading with both buffer-discovery variants "
        "(baseline: one state_dict() per buffer; optimized: one module walk).",
        epilog="Start with `omni-loader reproduce` (synthetic full-size checkpoint, CPU) or `--help` on a command.",
    )
    parser.add_argument("--version", action="version", version=f"omni-loader {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help=f"print the full traceback of an error (also {DEBUG_ENV}=1); any place on the line")
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
    p.add_argument("--variant", choices=tuple(BUILTIN_VARIANTS), default="optimized",
                   help="a built-in loader variant (default optimized)")
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

    p = sub.add_parser("audit", help="audit transformers architectures for the state_dict()-per-buffer cost (meta)")
    p.add_argument("--arch", action="append", default=[], metavar="NAME", help="a model type, e.g. resnet (repeatable)")
    p.add_argument("--all", action="store_true", help="every model type transformers' AutoModel knows")
    p.add_argument("--list", action="store_true", help="list the model types and exit")
    p.add_argument("--repeats", type=int, default=3, help="timed calls of each rule per model (default 3)")
    p.add_argument("--top", type=int, default=10, help="rows of the printed table (default 10)")
    p.add_argument("--out", metavar="DIR", help="write audit.csv (every model) and audit.md here")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)

    for name in COMMAND_MODULES:
        importlib.import_module(name).add_command(sub)
    return parser


# Libraries whose exceptions reach the user as one line (the file, what is wrong), not as a traceback.
ONE_LINE_MODULES = ("torch", "safetensors", "json", "pickle", "_pickle", "zipfile", "pandas", "csv")
DEBUG_ENV = "OMNI_LOADER_DEBUG"


def given_options(args: argparse.Namespace) -> set[str]:
    """The dests of the options the user typed (not argparse defaults): :func:`main` records them.

    Without that record (a command function called directly), the options whose value differs
    from the command's default count as typed.
    """
    explicit = getattr(args, "explicit", None)
    if explicit is not None:
        return set(explicit)
    defaults = vars(build_parser().parse_args([args.command])) if getattr(args, "command", None) else {}
    return {k for k, v in vars(args).items() if k in defaults and v != defaults[k]}


def _explicit_options(argv: Sequence[str]) -> set[str]:
    """Parse ``argv`` again with every default suppressed: what is left was typed."""
    parser = build_parser()

    def suppress(p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    suppress(sub)
            action.default = argparse.SUPPRESS
        p._defaults.clear()

    suppress(parser)
    return set(vars(parser.parse_args(list(argv)))) - {"command", "debug"}


def _debug(argv: list[str]) -> tuple[bool, list[str]]:
    """``--debug`` anywhere before ``--`` (or OMNI_LOADER_DEBUG=1): tracebacks for errors."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    flag = "--debug" in head
    if flag:
        argv = [a for i, a in enumerate(argv) if not (a == "--debug" and i < len(head))]
    env = os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return flag or env, argv


def _from_library(exc: BaseException) -> bool:
    """Was ``exc`` raised inside torch, safetensors, json...? (Then it is a file's problem, told in one line.)"""
    if type(exc).__module__.split(".")[0] in ONE_LINE_MODULES:
        return True
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_globals.get("__name__", "")
        tb = tb.tb_next
    return bool(last) and last.split(".")[0] in ONE_LINE_MODULES


def main(argv: Sequence[str] | None = None) -> int:
    debug, argv = _debug(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    args.explicit = _explicit_options(argv)
    try:
        return int(args.func(args) or 0)
    except OmniLoaderError as exc:
        if debug:
            traceback.print_exc()
        print(f"omni-loader: error: {one_line(str(exc), limit=2000, library=False)}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # a file torch, safetensors, json... could not read (or an OS error): one line
        if debug or not (isinstance(exc, OSError) or _from_library(exc)):
            raise
        where = f" ({exc.filename})" if getattr(exc, "filename", None) and str(exc.filename) not in str(exc) else ""
        print(f"omni-loader: error: {type(exc).__name__}: {one_line(str(exc))}{where}; run again with --debug "
              "(or OMNI_LOADER_DEBUG=1) for the traceback", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("omni-loader: interrupted", file=sys.stderr)
        return 130
