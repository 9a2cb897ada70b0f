"""``omni-loader stage-server`` (a vLLM-like stage serving /health) and ``serve-ab`` (startup A/B of two servers)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from .. import server
from ..errors import OmniLoaderError, ResultsError
from ..names import VARIANTS
from ..planner import ORDERS
from ..serve_ab import (DEFAULT_PATTERNS, StartupSpec, parse_pattern_args, run_serve_ab, saved_serve_ab,
                        serve_ab_conflicts, summarize)
from ..server import DEFAULT_HOST, SnapshotChoice, StageServerOptions, run_stage_server
from .options import (MAX_RUNS, add_checkpoint_options, add_load_options, bounded_int, given_options, load_options,
                      positive_seconds)


def cmd_stage_server(args: argparse.Namespace) -> int:
    snapshot = SnapshotChoice(checkpoint=args.checkpoint, model_id=args.model, size=args.size, seed=args.seed,
                              cache_dir=args.hf_cache, download=args.download)
    return run_stage_server(StageServerOptions(args.variant, args.port, snapshot, load_options(args), host=args.host,
                                               digest=args.digest, tag=args.tag))


# serve-ab's options (argparse dest) -> its spec keys in metadata.json.
SPEC_DESTS = {"baseline_cmd": "baseline_cmd", "optimized_cmd": "optimized_cmd", "health_url": "health_url",
              "warmup": "warmup", "runs": "runs", "order": "order", "timeout": "timeout_s", "grace": "grace_s",
              "poll_interval": "poll_interval_s", "port_wait": "port_wait_s"}


def startup_spec(args: argparse.Namespace) -> StartupSpec:
    """The spec the options select: typed ones, and (``--resume``) the saved spec for the rest."""
    patterns = parse_pattern_args(args.log_pattern, defaults=not args.no_default_patterns)
    typed = {key: getattr(args, dest) for dest, key in SPEC_DESTS.items()}
    if not args.resume:
        missing = [f"--{d.replace('_', '-')}" for d in ("baseline_cmd", "optimized_cmd", "health_url")
                   if not getattr(args, d)]
        if missing:
            raise OmniLoaderError(f"serve-ab needs {', '.join(missing)} (or --resume --out DIR to continue a saved "
                                  "benchmark)")
        return StartupSpec(**typed, patterns=patterns)
    saved = saved_serve_ab(args.out)["spec"]
    given = given_options(args)
    values = {key: value for dest, (key, value) in zip(SPEC_DESTS, typed.items()) if dest in given}
    if given & {"log_pattern", "no_default_patterns"}:
        values["patterns"] = patterns
    made = StartupSpec.from_dict({**saved, **values}).to_dict()  # commands joined as they are saved
    conflicts = serve_ab_conflicts(saved, {key: made[key] for key in values})
    if conflicts:
        raise ResultsError(f"--resume --out {args.out}: options that contradict the saved serve-ab benchmark: "
                           f"{', '.join(conflicts)}; drop them (the spec comes from metadata.json) or choose another "
                           "--out")
    return StartupSpec.from_dict(saved)


def cmd_serve_ab(args: argparse.Namespace) -> int:
    spec = startup_spec(args)

    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # the finally clauses stop the running server's group

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        out = run_serve_ab(spec, args.out, progress=True, device=args.device, model=args.model, resume=args.resume)
    except KeyboardInterrupt:
        print(f"interrupted: continue with: omni-loader serve-ab --resume --out {args.out}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(f"serve-ab: wrote {Path(out) / 'runs.csv'} and {Path(out) / 'metadata.json'}")
    lines = summarize(out)
    print("measured runs, status ok:" if lines else "no measured run succeeded")
    for line in lines:
        print(line)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline-cmd", metavar="CMD", help="server command of the baseline (no shell; required "
                   "unless --resume)")
    p.add_argument("--optimized-cmd", metavar="CMD", help="server command of the optimized version (idem)")
    p.add_argument("--health-url", metavar="URL", help="e.g. http://127.0.0.1:8091/health (idem)")
    p.add_argument("--warmup", type=bounded_int("--warmup", 0, MAX_RUNS), default=1, help="warm-up runs of each variant first (default 1)")
    p.add_argument("--runs", type=bounded_int("--runs", 1, MAX_RUNS), default=5, help="measured runs of each variant (default 5)")
    p.add_argument("--order", choices=ORDERS, default="alternate", help="measured-run order (default alternate)")
    p.add_argument("--timeout", type=positive_seconds("--timeout"), default=600.0, metavar="S",
                   help="a run fails when /health has not answered 200 after S seconds (default 600)")
    p.add_argument("--grace", type=float, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping a server (default 10)")
    p.add_argument("--poll-interval", type=float, default=0.05, metavar="S", help="health poll period (default 0.05)")
    p.add_argument("--port-wait", type=float, default=10.0, metavar="S",
                   help="how long to wait for the health port to be free before a launch (default 10)")
    p.add_argument("--log-pattern", action="append", default=[], metavar="NAME=REGEX",
                   help="extract a figure from each run's log (first group; unit read after it); repeatable; "
                        f"defaults: {', '.join(DEFAULT_PATTERNS)}")
    p.add_argument("--no-default-patterns", action="store_true", help="use only the --log-pattern ones")
    p.add_argument("--device", default="auto",
                   help="device described in the environment record (default auto: the GPU torch sees, else the CPU)")
    p.add_argument("--model", metavar="NAME", help="what the servers serve, recorded in metadata.json")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (runs.csv, metadata.json, logs/)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted serve-ab benchmark in --out with its saved spec (options given "
                        "must agree with it)")


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "stage-server",
        help="serve /health (503 while Token2Wav loads, 200 once loaded) and /stats, like a vLLM stage",
        description=server.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--variant", choices=VARIANTS, required=True)
    add_checkpoint_options(p)
    add_load_options(p)
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}, loopback)")
    p.add_argument("--port", type=bounded_int("--port", 1, 65535), required=True, help="port to listen on (bound before anything is loaded)")
    p.add_argument("--digest", action="store_true",
                   help="also hash every tensor after loading (reported in /stats; adds to the startup time)")
    p.add_argument("--tag", help="free text echoed in the log and in /stats (e.g. a run label)")
    p.set_defaults(func=cmd_stage_server)

    p = subparsers.add_parser(
        "serve-ab",
        help="time two server commands from spawn to their first HTTP 200 on /health, alternating",
        description=(
            "Launch the baseline and optimized server commands alternately (warm-ups first), each in its "
            "own process group with its output captured, time spawn -> first HTTP 200 on the health URL, "
            "stop the whole group, and extract named figures from the captured logs."
        ),
    )
    add_arguments(p)
    p.set_defaults(func=cmd_serve_ab)
