"""``omni-loader profile``: one load per variant under cProfile, py-spy and torch.profiler; ``--diff``: which
functions a change made faster or slower, over fresh-process runs sampled by py-spy."""

from __future__ import annotations

import argparse
import math
import signal
from pathlib import Path
from typing import Any

from .. import profiling
from ..bench.spec import BenchmarkSpec
from ..errors import OmniLoaderError
from ..formatting import percent
from ..profiling.settings import (DEFAULT_RATE, DEFAULT_TOP, MAX_AUTO_REPEAT, MAX_RATE, MIN_RATE, PY_SPY_ENV,
                                  RATE_MEANING, SAMPLES_WANTED, TOOLS, VARIANT_CHOICES, ProfileSettings, resolve_tools)
from ..token2wav.options import option_fields
from .options import (MAX_RUNS, Default, add_checkpoint_options, add_field_options, add_load_options, bounded_int,
                      comma_list, given_options, load_options, snapshot_from_args)

# Bounds of profile's other numbers (--rate's are py-spy's, settings.MIN_RATE/MAX_RATE; --runs' the kit's MAX_RUNS):
# rows of a table, loads per py-spy worker, a seed that random.Random and metadata's JSON keep whole, and a worker
# timeout that a wait can take (multiprocessing's join of 1e300 s raises OverflowError)
MAX_TOP, MAX_REPEAT, MAX_SEED, MAX_TIMEOUT_S = 10_000, 1_000, 2**63 - 1, 7 * 24 * 3600.0

# profile's options that only the one-load-per-tool profile takes, and those only --diff takes
PROFILE_ONLY = ("tool", "top", "native", "repeat", "py_spy_svg", "reference_runs")
DIFF_ONLY = ("runs", "variants", "order_seed", "worker_timeout", "aa")


def timeout_seconds(option: str) -> Any:
    """An argparse ``type=``: a finite number of seconds above 0 and at most :data:`MAX_TIMEOUT_S` (a week)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
            raise OmniLoaderError(f"{option} {text}: must be a number of seconds above 0 and at most "
                                  f"{MAX_TIMEOUT_S:,.0f} (a week)")
        return value

    parse.__name__ = "float"
    return parse


def profile_settings(args: argparse.Namespace) -> ProfileSettings:
    """The :class:`ProfileSettings` that ``--top``/``--rate``/``--native``/``--repeat``/``--py-spy``… select."""
    return ProfileSettings(top=args.top, rate=args.rate, native=args.native, repeat=args.repeat, py_spy=args.py_spy,
                           py_spy_svg=args.py_spy_svg, warmup=args.warmup, reference_runs=args.reference_runs)


def variant_value(text: str) -> Any:
    """``--variant``: a name (baseline, optimized, both; with --diff any known variant) or a custom variant's
    definition ``NAME=STEP:REF[,STEP:REF]`` (with --diff), as reproduce takes it."""
    from ..token2wav.variants import parse_variant

    return parse_variant(text) if "=" in text else text.strip()


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def cmd_profile(args: argparse.Namespace) -> int:
    """``omni-loader profile``; SIGTERM stops it as SIGINT does (a batch system or ``timeout`` sends SIGTERM: it
    once left py-spy, its worker and the private temporary folder behind)."""
    def on_term(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # as SIGINT: the finally clauses stop py-spy and its worker, remove the temp folders

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        return _profile(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _profile(args: argparse.Namespace) -> int:
    from ..profiling.outputs import PROFILE_MD  # imported when the command runs: the parser stays free of pandas
    from ..profiling.run import profile_variants

    given = given_options(args)
    chosen = args.variant or []
    names = [v for v in chosen if isinstance(v, str)]
    if args.diff:
        return cmd_profile_diff(args, given, names)
    wrong = [d for d in DIFF_ONLY if d in given] + (["variant NAME=STEP:REF"] if len(names) < len(chosen) else [])
    if wrong:
        raise OmniLoaderError(f"{', '.join(_flag(d) for d in wrong)}: only with --diff (a differential profile)")
    if len(names) > 1 or (names and names[0] not in VARIANT_CHOICES):
        raise OmniLoaderError(f"--variant {' '.join(names)}: choose one of {', '.join(VARIANT_CHOICES)}")
    args.variant = names[0] if names else "both"
    options, settings = load_options(args), profile_settings(args)  # checked before the snapshot is made
    snapshot = snapshot_from_args(args)
    print(f"profiling {args.variant} on {snapshot.root} ({snapshot.source}), tools: "
          f"{', '.join(resolve_tools(args.tool))}", flush=True)
    profiles = profile_variants(snapshot, args.variant, args.tool, args.out, options, settings, progress=True)
    print()
    for variant, vp in profiles.items():
        print_variant(variant, vp)
    print(f"summary: {Path(args.out) / PROFILE_MD}")
    return 0


def cmd_profile_diff(args: argparse.Namespace, given: set[str], names: list[str]) -> int:
    """``profile --diff``: the differential profile of two variants (:func:`~omni_loader.profiling.diff.profile_diff`)."""
    from ..profiling.diff import DEFAULT_RUNS, DIFF_DIR, DIFF_JSON, profile_diff, two_variants
    from ..profiling.diff_words import estimated_tests, reach_words
    from ..profiling.pyspy import PySpyUnavailable

    wrong = [d for d in PROFILE_ONLY if d in given]
    if wrong:
        raise OmniLoaderError(f"--diff samples with py-spy only, one load per fresh process: "
                              f"{', '.join(_flag(d) for d in wrong)} cannot be used with it")
    if names:
        raise OmniLoaderError(f"--diff --variant {names[0]}: name the two variants with --variants A,B (--variant "
                              "takes a definition NAME=STEP:REF[,STEP:REF] with --diff)")
    variants = two_variants(args.variants or ("baseline", "optimized"))
    custom = [v for v in (args.variant or []) if not isinstance(v, str)]
    options = load_options(args)
    snapshot = snapshot_from_args(args)
    print(f"differential profile of {' against '.join(variants)} on {snapshot.root} ({snapshot.source}): "
          f"{args.runs or DEFAULT_RUNS} py-spy-sampled loads per variant, each in a fresh process"
          + (", and as many of an A/A for each function's noise floor" if args.aa else ""), flush=True)
    runs = args.runs or DEFAULT_RUNS
    print(reach_words(runs, runs, *estimated_tests(Path(args.out) / DIFF_DIR / DIFF_JSON)), flush=True)
    try:
        diff = profile_diff(snapshot, variants, args.runs or DEFAULT_RUNS, args.out, options=options,
                            custom_variants=custom, warmup=args.warmup, rate=args.rate, seed=args.order_seed or 0,
                            py_spy=args.py_spy, worker_timeout=args.worker_timeout, aa=args.aa, progress=True)
    except PySpyUnavailable as exc:  # --diff is nothing but py-spy's samples: without them there is no diff
        raise OmniLoaderError(f"--diff: {exc}") from None
    print()
    print(diff.markdown())
    for name in ("functions.csv", "diff.md", "flame-diff.svg"):
        print(f"  {diff.directory / name}")
    return 0


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


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser("profile", help="profile one load per variant with cProfile, py-spy and torch.profiler",
                              description=profiling.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--variant", type=variant_value, action="append", metavar="NAME|NAME=STEP:REF",
                   help=f"variant(s) to profile: {', '.join(VARIANT_CHOICES)} (default both); with --diff, "
                        "NAME=STEP:REF[,STEP:REF] defines a variant of your own for --variants, as in reproduce")
    p.add_argument("--tool", choices=(*TOOLS, "all"), action="append",
                   help="profiler to run; repeat for several (default all)")
    add_checkpoint_options(p)
    add_load_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (DIR/<variant>/ and DIR/profile.md)")
    p.add_argument("--top", type=bounded_int("--top", 1, MAX_TOP), default=Default(DEFAULT_TOP), metavar="N", help=f"rows in the tables (default {DEFAULT_TOP})")
    p.add_argument("--rate", type=bounded_int("--rate", MIN_RATE, MAX_RATE, RATE_MEANING), default=DEFAULT_RATE,
                   metavar="HZ", help=f"py-spy samples per second, {MIN_RATE} to {MAX_RATE:,} (default {DEFAULT_RATE})")
    p.add_argument("--native", action="store_true", help="py-spy: also record native (C/C++) frames")
    p.add_argument("--repeat", type=bounded_int("--repeat", 1, MAX_REPEAT), default=None, metavar="N",
                   help=f"py-spy: loads per worker process (default: enough for ~{SAMPLES_WANTED} samples, at most "
                        f"{MAX_AUTO_REPEAT})")
    p.add_argument("--py-spy", dest="py_spy", metavar="PATH",
                   help=f"py-spy executable (default ${PY_SPY_ENV}, this Python's bin directory, then PATH)")
    p.add_argument("--py-spy-svg", action="store_true",
                   help="record flame.svg with a second py-spy run in its own interactive format (default: draw it "
                        "from the speedscope samples of the one recording)")
    p.add_argument("--warmup", type=bounded_int("--warmup", 0, MAX_RUNS), default=1, metavar="N",
                   help="unprofiled loads before profiling, and warm-ups of the reference runs (default 1)")
    p.add_argument("--reference-runs", type=bounded_int("--reference-runs", 1, MAX_RUNS), default=Default(3), metavar="N",
                   help="unprofiled runs per variant, each in a fresh process, that the phase shares come from: "
                        "the median run's (default 3)")
    d = p.add_argument_group("differential profile (--diff)")
    d.add_argument("--diff", action="store_true",
                   help="which functions B made faster or slower than A: randomized blocks of fresh-process loads, "
                        "each sampled by py-spy, per-function medians, intervals and rank tests with "
                        "Benjamini-Hochberg at 5%%; writes DIR/diff/functions.csv, diff.md, flame-diff.svg")
    d.add_argument("--variants", type=comma_list, metavar="A,B",
                   help="the two variants (default baseline,optimized; the same name twice: an A/A diff)")
    d.add_argument("--runs", type=bounded_int("--runs", 2, MAX_RUNS), metavar="N",
                   help="sampled loads per variant (default 15), and as many unsampled ones for py-spy's cost")
    d.add_argument("--order-seed", type=bounded_int("--order-seed", 0, MAX_SEED), metavar="SEED", help="seed of the randomized blocks (default 0)")
    d.add_argument("--worker-timeout", type=timeout_seconds("--worker-timeout"), metavar="S",
                   help="kill a load after S seconds")
    # --aa as reproduce declares it (BenchmarkSpec's field): its flag and its words, said of functions here
    spec_fields = option_fields(BenchmarkSpec)
    add_field_options(d, BenchmarkSpec, skip=tuple(n for n in spec_fields if n != "aa"), extras={"aa": {
        "help": spec_fields["aa"].metadata["help"] + ", per function: two more arms in each block, sampled alike; "
                "a function's difference within its A/A floor is not claimed (functions.csv aa_floor_s)"}})
    p.set_defaults(func=cmd_profile)
