"""Commands about the model itself: ``inventory``, ``synth``, ``load``, ``discovery-bench``, ``audit``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import OmniLoaderError
from ..names import LAYOUTS, SIZES
from ..token2wav.variants import BUILTIN_VARIANTS
from .options import (MAX_RUNS, add_checkpoint_options, add_load_options, bounded_int, load_options, print_json,
                      snapshot_from_args)


def cmd_inventory(args: argparse.Namespace) -> int:
    from ..token2wav.model import inventory

    inv = inventory(args.layout, args.size).to_dict()
    if args.json:
        print_json(inv)
        return 0
    print(f"Token2Wav ({args.size}, {args.layout} layout)")
    for key in ("modules", "named_buffers", "parameters", "parameter_elements", "parameter_bytes"):
        print(f"  {key:20s} {inv[key]:>15,}")
    print(f"  {'persistent_buffers':20s} {len(inv['persistent_buffers']):>15,}  {', '.join(inv['persistent_buffers'])}")
    return 0


def cmd_synth(args: argparse.Namespace) -> int:
    from ..token2wav.checkpoint import INDEX_FILE, default_snapshot_dir, place_in_hub_cache, synthesize

    if args.out:
        out = synthesize(args.out, size=args.size, seed=args.seed, progress=True, overwrite=args.force)
        print(f"wrote synthetic {args.size} snapshot (seed {args.seed}) to {out}")
    else:  # the one `reproduce` reads when given no --checkpoint: made ahead, a first reproduce finds it
        out = default_snapshot_dir(args.size, args.seed)
        found = (out / INDEX_FILE).is_file() and not args.force
        if not found:  # as ensure_synthetic makes it (another process's finished copy is kept), or anew
            synthesize(out, size=args.size, seed=args.seed, progress=True, overwrite=args.force)
        print(f"{'found' if found else 'wrote'} the default synthetic {args.size} snapshot (seed {args.seed}), the "
              f"one reproduce reads: {out}")
    if args.hub_cache:
        target = place_in_hub_cache(out, args.hub_cache, args.model_id)
        print(f"placed it in the Hugging Face cache as {args.model_id}: {target}")
    return 0


def cmd_load(args: argparse.Namespace) -> int:
    from ..formatting import mib
    from ..host.timing import phase_tree
    from ..token2wav.loader import load_token2wav

    snapshot = snapshot_from_args(args)
    _, result = load_token2wav(snapshot, args.variant, load_options(args))
    data = result.to_dict()
    data["checkpoint"] = snapshot.describe()
    if args.json:
        print_json(data)
        return 0
    print(f"Token2Wav load: variant={result.variant} layout={result.layout} device={result.device} dtype={result.dtype}"
          f" construct={result.construct}")
    print(f"checkpoint: {snapshot.root} ({snapshot.source})")
    print(f"  {'phase':<24}{'time':>12}   {'minor faults':>12} {'major':>6} {'inv. switches':>13}")
    for depth, r in phase_tree(result.phases):
        indent = "  " * (depth + 1)
        print(f"{indent}{r.name:<{24 - len(indent) + 2}}{r.seconds * 1e3:>9.3f} ms   {r.minor_faults:>12,} "
              f"{r.major_faults:>6,} {r.involuntary_switches:>13,}")
    print(f"state_dict() calls: {result.state_dict_calls}")
    print(f"weights loaded:     {result.weights_loaded}")
    print(f"persistent buffers: {', '.join(result.persistent_buffers) or '(none)'}")
    print(f"peak RSS:           {mib(data['rss_peak_bytes'], 0)}")
    if data["device_peak_bytes"] is not None:
        print(f"device peak:        {mib(data['device_peak_bytes'], 0)}")
    print(f"digest:             {result.digest} ({result.tensors_digested} tensors)")
    return 0


def cmd_discovery_bench(args: argparse.Namespace) -> int:
    from ..sweep.discovery_timing import time_discovery
    from ..formatting import duration, times
    from ..sweep.trees import token2wav_model

    timing = time_discovery(token2wav_model(args.size, args.layout), repeats=args.repeats, warmup=args.warmup)
    if args.json:
        print_json({"samples": timing.samples, "state_dict_calls": timing.state_dict_calls, "ratio": timing.ratio(),
                    "agree": timing.agree, "repeats": args.repeats, "warmup": args.warmup})
        return 0
    print(f"buffer discovery on Token2Wav ({args.size}, {args.layout}), {args.warmup} warm-up + {args.repeats} runs "
          "each, alternating")
    for variant, samples in timing.samples.items():
        print(f"  {variant:<10} median {duration(timing.median(variant), 'ms'):>13}   min "
              f"{duration(min(samples), 'ms'):>13}   max {duration(max(samples), 'ms'):>13}   "
              f"state_dict() calls {timing.state_dict_calls[variant]}")
    print(f"  ratio baseline/optimized (medians): {times(timing.ratio())}")
    print(f"  {timing.summary}")
    return 0


SOURCE_PRICING = ("modules", "items", "like", "visit_cost", "results")


def cmd_source_audit(args: argparse.Namespace) -> int:
    """``audit --source PATH...``: exit 1 on any finding, 0 on none, 2 on a path that cannot be read."""
    import sys

    from ..lint.findings import text_lines, to_json, to_sarif
    from ..lint.price import VisitCost, price_findings, tree_size, visit_cost
    from ..lint.source_audit import scan_sources

    if args.arch or args.all or args.list:
        raise OmniLoaderError("--source audits source files; it does not combine with --arch, --all or --list")
    if args.visit_cost is not None and not args.visit_cost > 0:
        raise OmniLoaderError(f"--visit-cost must be a positive number of seconds, not {args.visit_cost}")
    size = tree_size(args.modules, args.items, args.like)  # a bad --like is said before the sources are read
    audit = scan_sources(args.source, args.exclude)
    findings = list(audit.findings)
    if size is not None and findings:
        cost = (VisitCost(args.visit_cost, "given (--visit-cost)") if args.visit_cost
                else visit_cost(args.results))
        findings = price_findings(findings, size, cost)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print_json(to_json(findings))
    elif fmt == "sarif":
        print_json(to_sarif(findings))
    else:
        print("\n".join(text_lines(findings)) if findings else "", end="\n" if findings else "")
    if args.unresolved:
        for u in audit.unresolved:
            print(f"{u.path}:{u.line}: note: {u.call}() inside the loop at line {u.loop_line} is not followed "
                  f"(its receiver is unknown); a function of that name walks: {', '.join(u.candidates)}",
                  file=sys.stderr)
    print(f"audit --source: {audit.summary()}", file=sys.stderr)
    return 1 if findings else 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 1 when the two rules disagree on any model built: that is a finding, not a crash."""
    if args.source:
        return cmd_source_audit(args)
    given = [f"--{k.replace('_', '-')}" for k in SOURCE_PRICING if getattr(args, k) is not None]
    given += ["--unresolved"] * args.unresolved + ["--exclude"] * bool(args.exclude)
    if given:
        raise OmniLoaderError(f"{given[0]} belongs to a source audit: give --source PATH")
    from ..sweep.audit import architectures, audit, audit_markdown, write_audit


    known = architectures()
    archs = known if args.all else args.arch
    unknown = [a for a in archs if a not in known]
    if unknown:
        raise OmniLoaderError(f"--arch {unknown[0]!r} is not a transformers model type (see --list)")
    if args.list or not archs:
        print("\n".join(known) if args.list else "give --arch NAME (repeatable), --all or --list")
        return 0 if args.list else 2
    rows = audit(archs, repeats=args.repeats, progress=not args.json)
    files = write_audit(rows, args.out) if args.out else {}
    if args.json:
        print_json([r.to_dict() for r in rows])
    else:
        print(audit_markdown(rows, top=args.top))
        if files:
            print(f"audit: {', '.join(map(str, files.values()))}")
    return 1 if any(r.agree is False for r in rows) else 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("inventory", help="count modules, buffers and parameters (meta device, fast)")
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inventory)

    p = sub.add_parser("synth", help="write a synthetic snapshot in the Hub layout")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--out", metavar="DIR", help="where to write it (default: the cache's snapshot that reproduce "
                   "reads without --checkpoint; $OMNI_LOADER_CACHE, else ~/.cache/omni-loader; kept if already there)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="replace an existing non-empty --out")
    p.add_argument("--hub-cache", metavar="DIR", help="also place it in this Hugging Face cache directory")
    p.add_argument("--model-id", default="Qwen/Qwen2.5-Omni-3B", help="model id for --hub-cache")
    p.set_defaults(func=cmd_synth)

    p = sub.add_parser("load", help="load Token2Wav once with one variant and report its phases")
    p.add_argument("--variant", choices=tuple(BUILTIN_VARIANTS), default="optimized",
                   help="a built-in loader variant (default optimized)")
    add_checkpoint_options(p)
    add_load_options(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("discovery-bench", help="time both buffer-discovery rules on the model, alternating")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni")
    p.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_RUNS), default=5)
    p.add_argument("--warmup", type=bounded_int("--warmup", 0, MAX_RUNS), default=1)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_discovery_bench)

    p = sub.add_parser("audit", help="audit transformers architectures for the state_dict()-per-buffer cost (meta)")
    p.add_argument("--arch", action="append", default=[], metavar="NAME", help="a model type, e.g. resnet (repeatable)")
    p.add_argument("--all", action="store_true", help="every model type transformers' AutoModel knows")
    p.add_argument("--list", action="store_true", help="list the model types and exit")
    p.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_RUNS), default=3,
                   help="timed calls of each rule per model (default 3)")
    p.add_argument("--top", type=int, default=10, help="rows of the printed table (default 10)")
    p.add_argument("--out", metavar="DIR", help="write audit.csv (every model) and audit.md here")
    p.add_argument("--json", action="store_true", help="JSON (the same as --format json)")
    g = p.add_argument_group("source audit", "whole-tree module walks inside loops, read from source (rule OL001); "
                             "exit 1 on a finding")
    g.add_argument("--source", nargs="+", metavar="PATH", help="Python files or folders to audit (nothing is run)")
    g.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out files whose path or name matches (repeatable), e.g. '*/testing/*'")
    g.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                   help="text (path:line: OL001 message), json or sarif (2.1.0)")
    g.add_argument("--modules", type=int, metavar="N", help="price each finding for a tree of N modules...")
    g.add_argument("--items", type=int, metavar="M", help="...walked once per item, M times")
    g.add_argument("--like", metavar="NAME", help="price for token2wav's tree (or a transformers model type's, "
                   "built on the meta device)")
    g.add_argument("--visit-cost", type=float, metavar="SECONDS",
                   help="seconds per module visit (default: measured here by a quick sweep, then cached)")
    g.add_argument("--results", metavar="DIR", help="take the per-visit cost from a saved traversal sweep")
    g.add_argument("--unresolved", action="store_true", help="note calls inside loops that were not followed")
    p.set_defaults(func=cmd_audit)
