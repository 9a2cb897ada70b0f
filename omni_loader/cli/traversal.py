"""``omni-loader traversal``: the sweep of synthetic module trees (what module traversal costs)."""

from __future__ import annotations

import argparse
from typing import Any

from .options import MAX_RUNS, bounded_int


def cmd_traversal(args: argparse.Namespace) -> int:
    from ..sweep.traversal import SweepConfig, traversal_sweep  # imports torch: only when the command runs

    config = SweepConfig.preset(args.quick, repeats=args.repeats, warmup=args.warmup,
                                token2wav=None if args.token2wav == "none" else args.token2wav)
    result = traversal_sweep(config, args.out, progress=not args.no_progress)
    print(result.summary())
    print(f"wrote {', '.join(p.name for p in result.files.values())} to {args.out}")
    return 0


def add_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "traversal",
        help="sweep synthetic module trees: cost of state_dict() and both discovery rules vs N and B",
        description="Time one state_dict() against N modules, the baseline discovery against B·N and the "
                    "optimized one against N + B on synthetic trees, fit log-log slopes, place the real "
                    "Token2Wav on the curves, and write traversal.csv, fits.csv, fits.json and plots to --out.",
    )
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (files in it are replaced)")
    p.add_argument("--quick", action="store_true", help="small trees, 3 repeats: seconds instead of minutes")
    p.add_argument("--repeats", type=bounded_int("--repeats", 1, MAX_RUNS), metavar="N",
                   help="timed repeats per point (default 7, quick 3)")
    p.add_argument("--warmup", type=bounded_int("--warmup", 0, MAX_RUNS), metavar="N",
                   help="warm-up calls per point (default 1)")
    p.add_argument("--token2wav", choices=("full", "tiny", "none"), default="full",
                   help="real Token2Wav to place on the curves (default full, built on the CPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_traversal)
