"""``omni-loader stage-server`` (a vLLM-like stage serving /health), ``stage-group`` (N stages started together)
and ``serve-ab`` (startup A/B of two servers).

``python -m omni_loader.cli.serve stage-server|stage-group ...`` (:func:`main`) runs the stage commands without
importing the rest of the CLI, so that serve-ab times the stage's start, not the kit's.
"""

from __future__ import annotations

import argparse
from dataclasses import MISSING
import sys
from pathlib import Path
from typing import Any

from ..startup import server, stage_group
from ..errors import OmniLoaderError, ResultsError, one_line
from ..names import VARIANTS
from ..results.integrity import resume_command
from ..startup.logfigures import parse_pattern_args
from ..startup.serve_ab import StartupSpec, run_serve_ab, saved_serve_ab, serve_ab_conflicts, summarize
from ..startup.server import DEFAULT_HOST, StageServerOptions, run_stage_server
from ..startup.stage_group import StageGroupOptions, run_stage_group
from ..token2wav.options import LoadOptions, dest, option_fields
from .options import (MAX_RUNS, Default, add_checkpoint_options, checkpoint_options, add_field_options, bounded_int,
                      given_options, load_options, positive_seconds, seconds_at_least_zero, take_defaults)


def cmd_stage_server(args: argparse.Namespace) -> int:
    if args.variant is None and args.simulate is None:
        raise OmniLoaderError("stage-server needs --variant (or --simulate S for a stage that is not Token2Wav)")
    return run_stage_server(StageServerOptions(args.variant or "simulated", args.port, checkpoint_options(args),
                                               load_options(args), host=args.host, digest=args.digest, tag=args.tag,
                                               stage=args.stage, replica=args.replica, simulate=args.simulate))


def cmd_stage_group(args: argparse.Namespace) -> int:
    try:
        seconds = tuple(float(s) for s in args.simulate_seconds.split(","))
    except ValueError:
        raise OmniLoaderError(f"--simulate-seconds {args.simulate_seconds}: seconds, or seconds,seconds,...") from None
    return run_stage_group(StageGroupOptions(args.variant, args.port, args.stages, args.token2wav_stage, seconds,
                                             checkpoint_options(args), load_options(args), host=args.host,
                                             digest=args.digest, tag=args.tag, replica_tags=args.replica_tags,
                                             grace=args.grace))


def port_or_zero(text: str) -> int:
    """``--port``: 0 (a free port the OS picks, named in the log) or a port from 1 to 65535."""
    return 0 if text.strip() == "0" else bounded_int("--port", 1, 65535)(text)


# serve-ab's options (argparse dest) -> its spec keys in metadata.json: one per StartupSpec field (add_command
# declares them), the log patterns aside (--log-pattern and --no-default-patterns make them together).
SPEC_DESTS = {dest(f): name for name, f in option_fields(StartupSpec).items() if name != "patterns"}
REQUIRED = tuple(d for d, name in SPEC_DESTS.items() if option_fields(StartupSpec)[name].default is MISSING)


def startup_spec(args: argparse.Namespace) -> StartupSpec:
    """The spec the options select: typed ones, and (``--resume``) the saved spec for the rest."""
    patterns = parse_pattern_args(args.log_pattern or [], defaults=not args.no_default_patterns)
    typed = {key: getattr(args, dest) for dest, key in SPEC_DESTS.items()}
    if not args.resume:
        missing = [f"--{d.replace('_', '-')}" for d in REQUIRED if not getattr(args, d)]
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
    try:  # SIGTERM too (omni_loader.cli.terminate_as_interrupt): the finally clauses stop the running server's group
        out = run_serve_ab(spec, args.out, progress=True, device=args.device, model=args.model, resume=args.resume)
    except KeyboardInterrupt:
        print(f"interrupted: continue with: {resume_command(args.out, command='serve-ab')}", file=sys.stderr)
        return 130
    print(f"serve-ab: wrote {Path(out) / 'runs.csv'} and {Path(out) / 'metadata.json'}")
    lines = summarize(out)
    if lines:
        print("measured runs, status ok:")
        for line in lines:
            print(line)
    # an arm with no successful run leaves nothing to compare: a failure, with its first run's reason, never exit 0
    failure = first_failure(out, any_ok=bool(lines))
    if failure:
        print(f"omni-loader: error: {failure}; each run's log is in {Path(out) / 'logs'}", file=sys.stderr)
        return 1
    return 0


def first_failure(out: str | Path, any_ok: bool) -> str:
    """'' when some measured run of a serve-ab directory ended ok (``any_ok``) and so did one of each arm; else
    which arm (or, with none ok, the whole benchmark) has none, and its first failed measured run in a few words."""
    from ..results.rows import read_runs
    from ..startup.one_run import PHASE

    frame = read_runs(out)
    measured = frame[~frame["warmup"].astype(bool)]
    variant = None
    if any_ok:
        startup = measured[measured["phase"] == PHASE]
        variant = next((v for v in VARIANTS if not (startup[startup["variant"] == v]["status"] == "ok").any()), None)
        if variant is None:
            return ""
    failed = measured[(measured["status"] != "ok") & ((measured["variant"] == variant) if variant else True)]
    row = failed.iloc[0] if len(failed) else None
    return (f"no measured run of {'serve-ab' if variant is None else f'the {variant} arm'} succeeded; "
            + ("no measured run was recorded" if row is None
               else f"run {row['run_id']} ({row['variant']}): {one_line(str(row['error']))}"))


def _listen_and_load_options(p: argparse.ArgumentParser) -> None:
    add_checkpoint_options(p)
    add_field_options(p, LoadOptions)
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}, loopback)")
    p.add_argument("--port", type=port_or_zero, required=True,
                   help="port to listen on (bound before anything is loaded; 0: a free one, named in the log)")
    p.add_argument("--digest", action="store_true",
                   help="also hash every tensor after loading (reported in /stats; adds to the startup time)")
    p.add_argument("--tag", help="free text echoed in the log and in /stats (e.g. a run label)")


def add_stage_commands(subparsers: Any) -> None:
    """``stage-server`` and ``stage-group``."""
    p = subparsers.add_parser(
        "stage-server",
        help="serve /health (503 while Token2Wav loads, 200 once loaded) and /stats, like a vLLM stage",
        description=server.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--variant", choices=VARIANTS, help="the Token2Wav load (required unless --simulate)")
    p.add_argument("--simulate", type=positive_seconds("--simulate"), metavar="S",
                   help="a stage that is not Token2Wav: sleep S seconds as its load, no model")
    p.add_argument("--stage", type=bounded_int("--stage", 0, 63), default=0,
                   help="vLLM-Omni stage number in every log line's tag (default 0)")
    p.add_argument("--replica", type=bounded_int("--replica", 0, 1023), metavar="R",
                   help="tag lines (StageEngineCoreProc_stage<N>_replica<R> pid=...) instead of [Stage-N]")
    _listen_and_load_options(p)
    p.set_defaults(func=cmd_stage_server)

    p = subparsers.add_parser(
        "stage-group",
        help="start N stage servers together (one Token2Wav, the others simulated), one interleaved log, one "
             "/health that answers 200 when every stage is ready",
        description=stage_group.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--stages", type=bounded_int("--stages", 1, 64), default=3, help="stages (default 3)")
    p.add_argument("--token2wav-stage", type=bounded_int("--token2wav-stage", 0, 63), default=2,
                   help="the stage that loads Token2Wav (default 2, as Qwen2.5-Omni's code2wav)")
    p.add_argument("--variant", choices=VARIANTS, required=True, help="the Token2Wav stage's load")
    p.add_argument("--simulate-seconds", default="2", metavar="S[,S...]",
                   help="what each other stage sleeps as its load: one value, or one per other stage (default 2)")
    p.add_argument("--replica-tags", action="store_true",
                   help="the stages tag lines (StageEngineCoreProc_stage<N>_replica0 pid=...)")
    p.add_argument("--grace", type=seconds_at_least_zero("--grace"), default=5.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when stopping the stages (default 5)")
    _listen_and_load_options(p)
    p.set_defaults(func=cmd_stage_group)


def main(argv: list[str] | None = None) -> int:
    """The stage commands alone: ``python -m omni_loader.cli.serve stage-server|stage-group ...``."""
    parser = argparse.ArgumentParser(prog="omni-loader")
    add_stage_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    try:
        args = take_defaults(parser.parse_args(argv))
        return int(args.func(args) or 0)
    except OmniLoaderError as exc:
        print(f"omni-loader: error: {one_line(str(exc), limit=2000, library=False)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("omni-loader: interrupted", file=sys.stderr)
        return 130


def add_command(subparsers: Any) -> None:
    add_stage_commands(subparsers)

    p = subparsers.add_parser(
        "serve-ab",
        help="time two server commands from spawn to their first HTTP 200 on /health, alternating",
        description=(
            "Launch the baseline and optimized server commands alternately (warm-ups first), each in its "
            "own process group with its output captured, time spawn -> first HTTP 200 on the health URL, "
            "stop the whole group, and extract named figures from the captured logs."
        ),
    )
    add_field_options(p, StartupSpec, extras={
        "baseline_cmd": {"metavar": "CMD"}, "optimized_cmd": {"metavar": "CMD"}, "health_url": {"metavar": "URL"},
        "warmup": {"type": bounded_int("--warmup", 0, MAX_RUNS)}, "runs": {"type": bounded_int("--runs", 1, MAX_RUNS)},
        "timeout_s": {"type": positive_seconds("--timeout"), "metavar": "S"}, "grace_s": {"metavar": "S"},
        "poll_interval_s": {"metavar": "S"}, "port_wait_s": {"metavar": "S"},
        "patterns": {"action": "append", "type": str, "default": None, "metavar": "NAME=REGEX"}})
    p.add_argument("--no-default-patterns", action="store_true", default=Default(False), help="use only the --log-pattern ones")
    p.add_argument("--device", default=Default("auto"),
                   help="device described in the environment record (default auto: the GPU torch sees, else the CPU)")
    p.add_argument("--model", metavar="NAME", help="what the servers serve, recorded in metadata.json")
    p.add_argument("--out", required=True, metavar="DIR", help="results directory (runs.csv, metadata.json, logs/)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted serve-ab benchmark in --out with its saved spec (options given "
                        "must agree with it)")
    p.set_defaults(func=cmd_serve_ab)


if __name__ == "__main__":
    sys.exit(main())
