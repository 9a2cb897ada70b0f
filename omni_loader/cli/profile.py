"""``omni-loader profile``: one load per variant under cProfile, py-spy and torch.profiler."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import profiling
from ..formatting import percent
from ..profiling.settings import (DEFAULT_RATE, DEFAULT_TOP, MAX_AUTO_REPEAT, PY_SPY_ENV, SAMPLES_WANTED, TOOLS,
                                  VARIANT_CHOICES, ProfileSettings, resolve_tools)
from ..profiling.outputs import PROFILE_MD
from ..profiling.result import VariantProfile, largest_cost
from ..profiling.run import profile_variants
from .options import add_checkpoint_options, add_load_options, load_options, snapshot_from_args


def profile_settings(args: argparse.Namespace) -> ProfileSettings:
    """The :class:`ProfileSettings` that ``--top``/``--rate``/``--native``/``--repeat``/``--py-spy``… select."""
    return ProfileSettings(top=args.top, rate=args.rate, native=args.native, repeat=args.repeat, py_spy=args.py_spy,
                           py_spy_svg=args.py_spy_svg, warmup=args.warmup, reference_runs=args.reference_runs)


def cmd_profile(args: argparse.Namespace) -> int:
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


def print_variant(variant: str, vp: VariantProfile) -> None:
    """The variant's largest cost in one line, then every file it wrote."""
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
    p.add_argument("--variant", choices=VARIANT_CHOICES, default="both", help="variant(s) to profile (default both)")
    p.add_argument("--tool", choices=(*TOOLS, "all"), action="append",
                   help="profiler to run; repeat for several (default all)")
    add_checkpoint_options(p)
    add_load_options(p)
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (DIR/<variant>/ and DIR/profile.md)")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N", help=f"rows in the tables (default {DEFAULT_TOP})")
    p.add_argument("--rate", type=int, default=DEFAULT_RATE, metavar="HZ",
                   help=f"py-spy samples per second (default {DEFAULT_RATE})")
    p.add_argument("--native", action="store_true", help="py-spy: also record native (C/C++) frames")
    p.add_argument("--repeat", type=int, default=None, metavar="N",
                   help=f"py-spy: loads per worker process (default: enough for ~{SAMPLES_WANTED} samples, at most "
                        f"{MAX_AUTO_REPEAT})")
    p.add_argument("--py-spy", dest="py_spy", metavar="PATH",
                   help=f"py-spy executable (default ${PY_SPY_ENV}, this Python's bin directory, then PATH)")
    p.add_argument("--py-spy-svg", action="store_true",
                   help="record flame.svg with a second py-spy run in its own interactive format (default: draw it "
                        "from the speedscope samples of the one recording)")
    p.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="unprofiled loads before profiling, and warm-ups of the reference runs (default 1)")
    p.add_argument("--reference-runs", type=int, default=3, metavar="N",
                   help="unprofiled runs per variant, each in a fresh process, that the phase shares come from: "
                        "the median run's (default 3)")
    p.set_defaults(func=cmd_profile)
