"""``omni-loader reproduce``: the main job, and ``--resume`` of an interrupted one."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

from ..errors import OmniLoaderError, ResultsError
from ..formatting import count
from ..results.metadata import stamped
from ..host.placement import resolve_cpus
from ..results.rows import RUNS_FILE
from ..results.suite import METADATA_FILE, Suite
from ..results.integrity import Results, resume_command
from ..results.spec import IN_PROCESS_TIMEOUT, LOAD_FIELDS, BenchmarkSpec, same_path, spec_conflicts
from ..token2wav.options import CheckpointOptions, dest, option_fields
from ..token2wav.variants import parse_variant
from .options import (MAX_RUNS, MAX_THREADS, Default, add_checkpoint_options, add_field_options, bounded_int,
                      given_options, load_options, positive_seconds, snapshot_from_args)


# reproduce's options that set a spec setting (argparse dest -> BenchmarkSpec's flat name), and those that pick the
# checkpoint.
SPEC_DESTS = {dest(f): name for name, f in option_fields(BenchmarkSpec).items() if name != "checkpoint"}
CHECKPOINT_DESTS = tuple(dest(f) for f in option_fields(CheckpointOptions).values())


def resume_spec(args: argparse.Namespace, out: Path) -> tuple[BenchmarkSpec, Any]:
    """``--resume --out DIR``: the spec and snapshot saved in DIR; options typed that contradict them are refused in
    one line naming each (``--runs 6 (saved: 5)``)."""
    from ..token2wav.checkpoint import open_snapshot
    from ..host.devices import resolve_device

    if not (out / METADATA_FILE).is_file():
        raise ResultsError(f"--resume: {out} has no {METADATA_FILE}, nothing to continue (drop --resume to start "
                           "a benchmark there)")
    suite = Suite.read(out)
    saved = BenchmarkSpec.from_metadata(suite)
    given = given_options(args)
    values = {field: getattr(args, dest) for dest, field in SPEC_DESTS.items() if dest in given}
    if "device" in values:
        values["device"] = str(resolve_device(values["device"]))
    if "custom_variants" in values:
        values["custom_variants"] = tuple(v.to_dict() for v in values["custom_variants"])
    if "threads" in values:
        values["threads"] = values["threads"] or None  # --threads 0: torch's default
    if "cpus" in values:
        values["cpus"] = resolve_cpus(values["cpus"], values.get("threads", saved.threads))
    conflicts = spec_conflicts(saved, values)
    picked = [d for d in CHECKPOINT_DESTS if d in given]
    if picked and not same_path(str(_checkpoint_dir(args)), saved.checkpoint):
        typed = " ".join(f"--{d.replace('_', '-')}" + ("" if getattr(args, d) is True else f" {getattr(args, d)}")
                         for d in picked)
        conflicts.insert(0, f"{typed} (saved: {saved.checkpoint})")
    if conflicts:
        raise ResultsError(f"--resume --out {out}: options that contradict the saved benchmark: {', '.join(conflicts)};"
                           f" drop them (the spec comes from {METADATA_FILE}) or choose another --out")
    described = (suite.benchmark("load") or {}).get("checkpoint") or {}
    snapshot = open_snapshot(saved.checkpoint, source=described.get("checkpoint_source") or "directory",
                             model_id=described.get("model_id"))
    return saved, snapshot


def _checkpoint_dir(args: argparse.Namespace) -> Path:
    """The snapshot directory the checkpoint options select, found without making or downloading anything."""
    from ..token2wav.checkpoint import default_cache_dir, find_in_hub_cache

    if args.checkpoint:
        return Path(args.checkpoint)
    if args.model:
        return find_in_hub_cache(args.model, cache_dir=args.hf_cache, download=False).root
    return default_cache_dir() / "synthetic" / f"{args.size}-seed{args.seed}"


def new_spec(args: argparse.Namespace, snapshot: Any) -> BenchmarkSpec:
    """The spec that reproduce's options select for a new benchmark of ``snapshot``."""
    from ..bench.runner import benchmark_spec

    settings = {name: getattr(args, d) for d, name in SPEC_DESTS.items() if name not in LOAD_FIELDS}
    if {"runs"} & given_options(args) and "design" not in given_options(args):
        settings["design"] = "fixed"  # --runs N asks for N runs a side, as the PR ran them
    return benchmark_spec(snapshot, load_options(args), **{**settings, "threads": settings["threads"] or None,
                                                           "custom_variants": settings["custom_variants"] or ()})


def cmd_reproduce(args: argparse.Namespace) -> int:
    if args.resume and not args.out:
        raise ResultsError("--resume needs --out DIR (the results directory to continue)")
    if args.workers == "in-process" and args.worker_timeout is not None:  # before a snapshot is made
        raise OmniLoaderError(IN_PROCESS_TIMEOUT)
    # results/reproduce-<what>-<time> by default, named by the same rule as the notebooks' directories
    label = "model" if args.model else ("checkpoint" if args.checkpoint else f"synthetic-{args.size}")
    out = Path(args.out) if args.out else Path("results") / stamped(f"reproduce-{label}")
    try:
        return _reproduce(args, out)
    except KeyboardInterrupt:
        # said with the standard library alone: a Ctrl-C inside an import (pandas) leaves that library half made
        if not (out / METADATA_FILE).is_file():  # stopped before the benchmark began: there is nothing to resume
            print(f"interrupted before the benchmark started: nothing was saved{'' if out.exists() else f' ({out} was not made)'}")
            return 130
        print(f"interrupted: {count(saved_runs(out), 'run')} saved in {out}; continue with: {resume_command(out)}")
        return 130


def _reproduce(args: argparse.Namespace, out: Path) -> int:
    from ..host.devices import device_banner
    from ..results.suite import REPORT_FILE
    from ..job import reproduce

    if args.resume:  # the spec comes from DIR/metadata.json; options given must agree with it
        spec, snapshot = resume_spec(args, out)
    else:
        print(device_banner(args.device))  # resolves --device: fails before a multi-GB snapshot is made
        if args.workers == "forkserver" and not (args.checkpoint or args.model):
            from ..bench.worker import ensure_forkserver

            ensure_forkserver()  # its imports (seconds) run on another core while the synthetic snapshot is made
        snapshot = snapshot_from_args(args)
        spec = new_spec(args, snapshot)
    print(f"results: {out}")
    check = reproduce(spec, out, snapshot=snapshot, resume=args.resume, profile=args.profile,
                      with_startup=args.with_startup)
    report = out / REPORT_FILE
    print(report.read_text(encoding="utf-8"))
    print(f"report: {report}")
    return 0 if equivalent(check) else 1


def saved_runs(out: Path) -> int:
    """How many load runs ``out`` holds rows of (0 when runs.csv cannot be read), read with the csv module: after an
    interrupt, pandas may be half imported."""
    try:
        with open(out / RUNS_FILE, newline="", encoding="utf-8") as fh:
            return len({row.get("run_id") for row in csv.DictReader(fh) if row.get("source") in ("load", "aa")})
    except (OSError, csv.Error, UnicodeDecodeError):
        return 0


def equivalent(check: Results, name: str | Path | None = None) -> bool:
    """Did every variant load the same tensors? If not, say so on stderr (naming the directory ``name``, else
    ``check``'s): the timings compare different loads."""
    from ..reporting.measurements import planned_arms
    from ..reporting.stats import equivalence

    equiv = equivalence(check.frame, planned_arms(check.suite))
    if not equiv["equivalent"]:
        print(f"omni-loader: error: {name or check.directory}: {equiv['statement']}", file=sys.stderr)
    return bool(equiv["equivalent"])


def add_command(sub: Any) -> None:
    from ..bench.worker import WORKER_MODES

    p = sub.add_parser("reproduce", help="reproduce the PR's tables: alternating A/B loads, statistics, report, plots")
    add_checkpoint_options(p)
    w = p.add_mutually_exclusive_group()
    add_field_options(p, BenchmarkSpec, skip=("checkpoint",), into={"workers": w}, extras={
        "warmup": {"type": bounded_int("--warmup", 0, MAX_RUNS)},
        "runs": {"type": bounded_int("--runs", 1, MAX_RUNS)},
        "workers": {"choices": WORKER_MODES},
        "worker_timeout": {"type": positive_seconds("--worker-timeout"), "metavar": "S"},
        "threads": {"type": bounded_int("--threads", 0, MAX_THREADS, " (0: torch's default)"), "metavar": "N"},
        "cpus": {"type": str, "default": Default("auto"), "metavar": "auto|any|LIST"},
        "variants": {"metavar": "A,B[,C...]"},
        "custom_variants": {"type": parse_variant, "action": "append", "default": None,
                            "metavar": "NAME=STEP:REF[,STEP:REF]"}})
    w.add_argument("--spawn", dest="workers", action="store_const", const="spawn",
                   help="short for --workers spawn: a full cold start per run")
    w.add_argument("--in-process", dest="workers", action="store_const", const="in-process",
                   help="short for --workers in-process")
    p.add_argument("--out", metavar="DIR", help="results directory (default results/reproduce-<...>-<time>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted results directory (--out)")
    p.add_argument("--profile", action="store_true", help="also profile one load per variant into DIR/profiles")
    p.add_argument("--with-startup", action="store_true", help="also measure startup to /health of a stage server")
    p.set_defaults(func=cmd_reproduce)
