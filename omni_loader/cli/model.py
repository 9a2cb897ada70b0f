"""Commands about the model itself: ``inventory``, ``synth``, ``load``, ``discovery-bench``, ``audit``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import OmniLoaderError
from ..names import LAYOUTS, SIZES
from ..token2wav.options import LoadOptions
from ..token2wav.variants import BUILTIN_VARIANTS
from .options import (MAX_RUNS, add_checkpoint_options, add_field_options, bounded_int, load_options, print_json,
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


SOURCE_ONLY = ("modules", "items", "like", "visit_cost", "results", "baseline", "write_baseline", "max_file_size",
               "jobs")
SOURCE_FLAGS = ("unresolved", "once", "no_cache", "exclude", "select", "ignore")
ARCH_ONLY = ("out", "top", "repeats")  # the architecture audit's; a source audit would ignore them


def cmd_source_audit(args: argparse.Namespace) -> int:
    """``audit --source PATH...``: exit 2 on any path not audited (or any other failure), else 1 on a finding
    (a new one, with --baseline), else 0."""
    import sys

    from ..lint.baseline import new_findings, read_baseline, write_baseline
    from ..lint.findings import github_lines, ordered, selected_rules, text_lines, to_json, to_sarif
    from ..lint.limits import MAX_FILE_BYTES
    from ..sweep.price import VisitCost, price_findings, tree_size, visit_cost
    from ..lint.source_audit import scan_sources
    from .options import given_options

    if args.arch or args.all or args.list:
        raise OmniLoaderError("--source audits source files; it does not combine with --arch, --all or --list")
    typed = [o for o in ARCH_ONLY if o in given_options(args)]
    if typed:
        raise OmniLoaderError(f"--{typed[0]} belongs to the architecture audit (--arch/--all): a source audit "
                              "does not use it")
    rules = selected_rules([c for group in args.select for c in group], [c for group in args.ignore for c in group])
    size = tree_size(args.modules, args.items, args.like)  # a bad --like is said before the sources are read
    if args.results:
        check_sweep_columns(args.results)  # before the sources are read
    baseline = read_baseline(args.baseline) if args.baseline else None
    audit = scan_sources(args.source, args.exclude, rules=rules, once=args.once,
                         max_bytes=MAX_FILE_BYTES if args.max_file_size is None else args.max_file_size,
                         workers=args.jobs, cache=not args.no_cache)
    findings, known = list(audit.findings), 0
    if args.write_baseline and not audit.failures:
        write_baseline(args.write_baseline, findings)
        findings, known = [], len(findings)
    elif baseline is not None:
        findings, known = new_findings(findings, baseline)
    if size is not None and findings:
        cost = (VisitCost(args.visit_cost, "given (--visit-cost)") if args.visit_cost
                else visit_cost(args.results))
        findings = ordered(price_findings(findings, size, cost))
    fmt = "json" if args.json else args.format
    if fmt in ("json", "sarif"):
        print_json((to_json if fmt == "json" else to_sarif)(findings))
    elif findings:
        print("\n".join(github_lines(findings) if fmt == "github" else text_lines(findings)))
    if args.unresolved:
        for u in audit.unresolved:
            print(f"{u.path}:{u.line}: note: {u.call}() inside the loop at line {u.loop_line} is not followed "
                  f"(its receiver is unknown); a function of that name walks: {', '.join(u.candidates)}",
                  file=sys.stderr)
    for line in audit.failures:  # each path not audited, one line each; no summary claims a clean audit
        print(f"omni-loader: error: {line}", file=sys.stderr)
    if audit.failures:
        if args.write_baseline:  # a baseline of a partial audit would let the unread files' findings in as new
            print(f"omni-loader: error: --write-baseline {args.write_baseline}: not written, "
                  f"{len(audit.failures)} path(s) not audited", file=sys.stderr)
        return 2
    words = (f"; {known} {'written to ' + args.write_baseline if args.write_baseline else 'known from the baseline'}"
             if args.write_baseline or baseline is not None else "")
    print(f"audit --source: {audit.summary()}{words}", file=sys.stderr)
    return 1 if findings else 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Exit 1 when the two rules disagree on any model built: that is a finding, not a crash."""
    if args.source:
        return cmd_source_audit(args)
    given = [f"--{k.replace('_', '-')}" for k in SOURCE_ONLY if getattr(args, k) is not None]
    given += [f"--{k.replace('_', '-')}" for k in SOURCE_FLAGS if getattr(args, k)]
    if args.format != "text":
        given.append("--format")
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


# What the per-visit cost is fitted from in a saved sweep's traversal.csv (omni_loader.sweep.fits.linear_costs).
SWEEP_COLUMNS = ("experiment", "source", "N", "B", "x", "seconds")


def check_sweep_columns(results: str) -> None:
    """``--results``' traversal.csv has every column the cost is fitted from, else one line naming the file and the
    first one missing (not a KeyError deep in pandas); a missing file is the fit's reader's to say."""
    import csv
    from pathlib import Path

    path = Path(results) / "traversal.csv" if Path(results).is_dir() else Path(results)
    if not path.is_file():
        return
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        header = next(csv.reader(fh), [])
    missing = [c for c in SWEEP_COLUMNS if c not in header]
    if missing:
        raise OmniLoaderError(f"--results {path}: no {missing[0]!r} column (it has {', '.join(header) or 'none'}): "
                              "not a traversal sweep's table; write one with `omni-loader traversal --out DIR`")


def _count(option: str) -> Any:
    """--modules' and --items' type: a whole number from 1 to 10^7 (one line naming the option otherwise)."""
    def parse(text: str) -> int:
        from ..lint.limits import check_count

        try:
            value: object = int(text)
        except ValueError:
            value = text
        return check_count(option, value)

    parse.__name__ = "int"
    return parse


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
    add_field_options(p, LoadOptions)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_load)

    p = sub.add_parser("discovery-bench", help="time both buffer-discovery rules on the model, alternating")
    p.add_argument("--size", choices=SIZES, default="full")
    p.add_argument("--layout", choices=LAYOUTS, default="vllm-omni")
    p.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_RUNS), default=5)
    p.add_argument("--warmup", type=bounded_int("--warmup", 0, MAX_RUNS), default=1)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_discovery_bench)

    from ..lint.limits import MAX_COUNT, MAX_FILE_BYTES, check_visit_cost
    from .options import Default, comma_list

    p = sub.add_parser("audit", help="audit transformers architectures for the state_dict()-per-buffer cost (meta)")
    p.add_argument("--arch", action="append", default=[], metavar="NAME", help="a model type, e.g. resnet (repeatable)")
    p.add_argument("--all", action="store_true", help="every model type transformers' AutoModel knows")
    p.add_argument("--list", action="store_true", help="list the model types and exit")
    p.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_RUNS), default=Default(3),
                   help="timed calls of each rule per model (default 3)")
    p.add_argument("--top", type=int, default=Default(10), help="rows of the printed table (default 10)")
    p.add_argument("--out", metavar="DIR", help="write audit.csv (every model) and audit.md here")
    p.add_argument("--json", action="store_true", help="JSON (the same as --format json)")
    g = p.add_argument_group("source audit", "module walks inside loops, read from source (rules OL001, OL002); "
                             "exit 2 on a path not audited, else 1 on a finding, else 0")
    g.add_argument("--source", nargs="+", metavar="PATH", help="Python files or folders to audit (nothing is run)")
    g.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out files whose path or name matches (repeatable), e.g. '*/testing/*'")
    g.add_argument("--select", action="append", default=[], type=comma_list, metavar="CODES",
                   help="rules to report, comma separated, by id or prefix (default OL001; OL002: path walks; ALL)")
    g.add_argument("--ignore", action="append", default=[], type=comma_list, metavar="CODES",
                   help="rules not to report, comma separated")
    g.add_argument("--once", action="store_true", help="also report walks that run at most once per call (the "
                   "loop is left right after them), as notes")
    g.add_argument("--baseline", metavar="FILE", help="report only findings this baseline does not hold (by file, "
                   "rule and source line: moved lines stay known)")
    g.add_argument("--write-baseline", metavar="FILE", help="write today's findings as a baseline and exit 0")
    g.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                   help="text (path:line: OL001 message), json, sarif (2.1.0) or github (workflow annotations)")
    g.add_argument("--max-file-size", type=bounded_int("--max-file-size", 0, 1 << 40), metavar="BYTES", help=f"refuse files larger than this (default {MAX_FILE_BYTES:,}; 0: no cap)")
    g.add_argument("--jobs", type=bounded_int("--jobs", 1, 1024), metavar="N",
                   help="processes to parse in (default: one per CPU; 1: none)")
    g.add_argument("--no-cache", action="store_true", help="parse every file again (the cache of earlier scans, "
                   "by content, is in $OMNI_LOADER_CACHE/audit or ~/.cache/omni-loader/audit)")
    g.add_argument("--modules", type=_count("--modules"), metavar="N",
                   help=f"price each finding for a tree of N modules (at most {MAX_COUNT:,})...")
    g.add_argument("--items", type=_count("--items"), metavar="M", help="...walked once per item, M times")
    g.add_argument("--like", metavar="NAME", help="price for token2wav's tree (or a transformers model type's, "
                   "built on the meta device)")
    g.add_argument("--visit-cost", type=check_visit_cost, metavar="SECONDS",
                   help="seconds per module visit (default: measured here by a quick sweep, then cached)")
    g.add_argument("--results", metavar="DIR", help="take the per-visit cost from a saved traversal sweep")
    g.add_argument("--unresolved", action="store_true", help="note calls inside loops that were not followed")
    p.set_defaults(func=cmd_audit)
