"""``omni-loader profile``: one load per variant under cProfile, py-spy and torch.profiler; ``--diff``: which
functions a change made faster or slower, over fresh-process runs sampled by py-spy."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from .. import profiling
from ..results.spec import LOAD_FIELDS
from ..errors import OmniLoaderError, ResultsError
from ..formatting import percent
from ..profiling.settings import SETTING_NAMES, VARIANT_CHOICES, ProfileSettings, resolve_tools
from ..profiling.settings import DIFF, PROFILE
from ..profiling.spec import ProfileSpec
from ..token2wav.options import dest, flag, option_conflicts, option_fields
from .options import (MAX_RUNS, add_checkpoint_options, add_field_options, bounded_int, checked, given_options,
                      load_options, snapshot_from_args)
from .reproduce import CHECKPOINT_DESTS

# Bounds of rows of a table, loads per py-spy worker, a seed that metadata's JSON keeps whole, and a worker timeout
# that a wait can take (multiprocessing's join of 1e300 s raises OverflowError)
MAX_TOP, MAX_REPEAT, MAX_SEED, MAX_TIMEOUT_S = 10_000, 1_000, 2**63 - 1, 7 * 24 * 3600.0


def variant_value(text: str) -> Any:
    """``--variant``: a name (baseline, optimized, both; with --diff any known variant) or a custom variant's
    definition ``NAME=STEP:REF[,STEP:REF]`` (with --diff), as reproduce takes it."""
    from ..token2wav.variants import parse_variant

    return parse_variant(text) if "=" in text else text.strip()


def cmd_profile(args: argparse.Namespace) -> int:
    """``omni-loader profile``; SIGTERM stops it as SIGINT does (:func:`omni_loader.cli.terminate_as_interrupt`)."""
    from ..profiling.outputs import PROFILE_MD  # imported when the command runs: the parser stays free of pandas
    from ..profiling.run import profile_variants

    given, spec = given_options(args), profile_spec(args)
    names = [v for v in spec.variant if isinstance(v, str)]
    if spec.diff:
        return cmd_profile_diff(args, spec, given, names)
    wrong = typed_only(DIFF, given) + ["--resume"] * args.resume + (
        ["--variant NAME=STEP:REF"] if len(names) < len(spec.variant) else [])
    if wrong:
        raise OmniLoaderError(f"{', '.join(wrong)}: only with --diff (a differential profile)")
    if len(names) > 1 or (names and names[0] not in VARIANT_CHOICES):
        raise OmniLoaderError(f"--variant {' '.join(names)}: choose one of {', '.join(VARIANT_CHOICES)}")
    variant, settings = names[0] if names else "both", spec.settings
    snapshot = snapshot_from_args(args)
    print(f"profiling {variant} on {snapshot.root} ({snapshot.source}), tools: "
          f"{', '.join(resolve_tools(spec.tool))}", flush=True)
    profiles = profile_variants(snapshot, variant, spec.tool, args.out, spec.load, settings, progress=True)
    print()
    for name, vp in profiles.items():
        print_variant(name, vp)
    print(f"summary: {Path(args.out) / PROFILE_MD}")
    return 0


def profile_spec(args: argparse.Namespace) -> ProfileSpec:
    """The :class:`ProfileSpec` the options select (one option per field), checked as it is made."""
    values = {name: getattr(args, dest(f)) for name, f in option_fields(ProfileSpec).items()
              if name != "checkpoint" and name not in LOAD_FIELDS}
    settings, tool = ProfileSettings.from_dict(values), values.pop("tool")
    values = {k: v for k, v in values.items() if k not in SETTING_NAMES}
    return ProfileSpec(**{**values, "variant": tuple(values["variant"] or ()), "variants": tuple(values["variants"])},
                       tool=tuple(tool) if tool else None, load=load_options(args), settings=settings)


def typed_only(mode: str, given: set[str]) -> list[str]:
    """The options typed that only ``mode`` takes (ProfileSpec's fields marked so), as their flags."""
    return [flag(f) for f in option_fields(ProfileSpec).values() if f.metadata.get("only") == mode and dest(f) in given]


def cmd_profile_diff(args: argparse.Namespace, spec: ProfileSpec, given: set[str], names: list[str]) -> int:
    """``profile --diff``: the differential profile of two variants (:func:`~omni_loader.profiling.diff.profile_diff`);
    ``--resume`` continues an interrupted one with its saved settings."""
    from ..bench.driver import Interrupted
    from ..profiling.diff import DIFF_DIR, DIFF_JSON, profile_diff, two_variants
    from ..profiling.diff_words import estimated_tests, reach_words
    from ..profiling.pyspy import PySpyUnavailable

    wrong = typed_only(PROFILE, given)
    if wrong:
        raise OmniLoaderError(f"--diff samples with py-spy only, one load per fresh process: {', '.join(wrong)} "
                              "cannot be used with it")
    if names:
        raise OmniLoaderError(f"--diff --variant {names[0]}: name the two variants with --variants A,B (--variant "
                              "takes a definition NAME=STEP:REF[,STEP:REF] with --diff)")
    if args.resume:
        spec, snapshot = resumed_spec(args, spec, given)
    else:
        two_variants(spec.variants)
        snapshot = snapshot_from_args(args)
    variants = two_variants(spec.variants)
    print(f"differential profile of {' against '.join(variants)} on {snapshot.root} ({snapshot.source}): "
          f"{spec.runs} py-spy-sampled loads per variant, each in a fresh process"
          + (", and as many of an A/A for each function's noise floor" if spec.aa else ""), flush=True)
    print(reach_words(spec.runs, spec.runs, *estimated_tests(Path(args.out) / DIFF_DIR / DIFF_JSON)), flush=True)
    try:
        diff = profile_diff(snapshot, spec, out_dir=args.out, resume=args.resume, progress=True)
    except PySpyUnavailable as exc:  # --diff is nothing but py-spy's samples: without them there is no diff
        raise OmniLoaderError(f"--diff: {exc}") from None
    except Interrupted as exc:  # every run that ended is saved: the line says how to continue
        print(exc.line, file=sys.stderr)
        return 130
    print()
    print(diff.markdown())
    for name in ("functions.csv", "diff.md", "flame-diff.svg"):
        print(f"  {diff.directory / name}")
    return 0


def resumed_spec(args: argparse.Namespace, typed: ProfileSpec, given: set[str]) -> tuple[ProfileSpec, Any]:
    """``--diff --resume --out DIR``: the settings and snapshot saved in DIR/diff; options typed that contradict them
    are refused in one line naming each, as ``reproduce --resume`` refuses them."""
    from ..results.spec import same_path
    from ..profiling.diff import DIFF_DIR, PLAN_JSON, read_plan
    from ..token2wav.checkpoint import open_snapshot

    directory = Path(args.out) / DIFF_DIR
    saved = read_plan(directory).get("spec")
    if not isinstance(saved, dict):
        raise ResultsError(f"--resume: {directory} holds no differential profile to continue (drop --resume to start "
                           "one there)")
    record = typed.record()
    if "device" in given:
        from ..host.devices import resolve_device

        record["device"] = str(resolve_device(record["device"]))
    fields = option_fields(ProfileSpec)
    conflicts = option_conflicts(ProfileSpec, saved, {n: record[n] for n in record
                                                      if dest(fields[n]) in given and n != "checkpoint"})
    if given & set(CHECKPOINT_DESTS) and not same_path(str(snapshot_from_args(args).root), saved.get("checkpoint")):
        conflicts.insert(0, f"the checkpoint options (saved: {saved.get('checkpoint')})")
    if conflicts:
        raise ResultsError(f"--resume --out {args.out}: options that contradict the saved differential profile: "
                           f"{', '.join(conflicts)}; drop them (the settings come from {directory / PLAN_JSON}) or "
                           "choose another --out")
    spec = ProfileSpec.from_record(saved)
    return spec, open_snapshot(spec.checkpoint)


def print_variant(variant: str, vp: Any) -> None:
    """The variant's largest cost in one line, then every file it wrote (``vp``: a VariantProfile)."""
    from ..profiling.result import largest_cost

    c = largest_cost(vp)
    calls = vp.state_dict_calls
    print(f"{variant}: largest phase {c['phase']} {percent(c['phase_share'])}"
          + (f", top function {c['function']} ~{percent(c['function_share'])}" if "function" in c else "")
          + (f"; Module.state_dict primitive calls {calls['primitive']}" if calls else ""))
    for key, path in vp.files.items():
        print(f"  {key:<20} {path}")


def setting_type(name: str, cap: int | None = None) -> Any:
    """The argparse ``type=`` of the whole-number setting ``name``: its field's bounds, ``cap`` the high one where
    the setting has none of its own."""
    f = option_fields(ProfileSettings)[name]
    bounds = f.metadata["bounds"]
    return bounded_int(flag(f), bounds.low, bounds.high or cap, bounds.meaning)


# argparse's part of each option (its type and metavar, how it repeats); the rest is its ProfileSpec field's
EXTRAS: dict[str, dict[str, Any]] = {
    "variant": {"type": variant_value, "action": "append", "default": None, "metavar": "NAME|NAME=STEP:REF"},
    "tool": {"action": "append"},
    "top": {"type": setting_type("top", MAX_TOP), "metavar": "N"},
    "rate": {"type": setting_type("rate"), "metavar": "HZ"},
    "repeat": {"type": setting_type("repeat", MAX_REPEAT), "metavar": "N"},
    "py_spy": {"metavar": "PATH"},
    "warmup": {"type": setting_type("warmup", MAX_RUNS), "metavar": "N"},
    "reference_runs": {"type": setting_type("reference_runs", MAX_RUNS), "metavar": "N"},
    "variants": {"metavar": "A,B"},
    "runs": {"type": bounded_int("--runs", 2, MAX_RUNS), "metavar": "N"},
    "order_seed": {"type": bounded_int("--order-seed", 0, MAX_SEED), "metavar": "SEED"},
    "worker_timeout": {"type": checked("--worker-timeout", float, lambda v: math.isfinite(v) and 0 < v <= MAX_TIMEOUT_S,
                                       f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:,.0f} "
                                       "(a week)"), "metavar": "S"},
}


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser("profile", help="profile one load per variant with cProfile, py-spy and torch.profiler",
                              description=profiling.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    fields, into = option_fields(ProfileSpec), {}

    def add(first: str | None, last: str | None) -> None:  # the fields from first up to last, in --help's order
        names = list(fields)[list(fields).index(first) if first else 0:list(fields).index(last) if last else None]
        add_field_options(p, ProfileSpec, skip=tuple(n for n in fields if n not in names or n == "checkpoint"),
                          extras=EXTRAS, into=into)

    add(None, "checkpoint")
    add_checkpoint_options(p)
    d = p.add_argument_group("differential profile (--diff)")
    into.update((n, d) for n, f in fields.items() if f.metadata.get("only") == DIFF or n == "diff")
    add(LOAD_FIELDS[0], "top")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (DIR/<variant>/ and DIR/profile.md)")
    add("top", None)
    d.add_argument("--resume", action="store_true",
                   help="continue the interrupted differential profile in --out with its saved settings (options "
                        "given must agree with them)")
    p.set_defaults(func=cmd_profile)
