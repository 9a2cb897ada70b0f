"""Commands on saved results: ``report`` (re-render), ``compare`` (several side by side), ``pack`` (one archive).

None of them loads a model or imports torch; each imports what it runs when it runs, so that building the parser
stays free of numpy and pandas.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..formatting import count
from .reproduce import equivalent


def cmd_report(args: argparse.Namespace) -> int:
    from ..reporting.report import write_report
    from ..results.integrity import check_results
    from ..results.lifecycle import report_check, report_drawn, reserve_blas

    reserve_blas()  # before the report's memory is taken: out of memory in OpenBLAS would be its exit, not one line
    # less the finding that it was not drawn (a drawing stopped); once written, metadata.json says it was drawn
    path = write_report(report_check(args.directory))
    report_drawn(args.directory)
    if not args.quiet:
        print(path.read_text(encoding="utf-8"))
    print(f"report: {path}")
    check = check_results(args.directory)
    if args.strict and check.problems:
        print(f"omni-loader: error: {args.directory}: {count(len(check.problems), 'integrity problem')}: "
              f"{' | '.join(check.problems)}", file=sys.stderr)
        return 1
    # the variants' timings compare different loads: nothing to stand behind
    return 1 if args.strict and check.benchmark("load") and not equivalent(check, args.directory) else 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ..compare.compare_render import render, write_compare
    from ..compare.reproductions import compare_results

    result = compare_results(args.directories, against=args.against)
    written = write_compare(result, args.out) if args.out else []
    plot = next((p for p in written if p.suffix == ".png"), None)
    print(render(result, args.format, plot.as_posix() if plot else None).rstrip("\n"))
    if args.out:
        print(f"compare: wrote {', '.join(p.name for p in written)} to {args.out}", file=sys.stderr)
    return 0


def cmd_pack(args: argparse.Namespace) -> int:
    from ..results.archive import pack

    print(pack(args.directory, out=args.out, fmt=args.format, overwrite=args.force))
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render report.md and plots from a saved results directory")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--quiet", action="store_true", help="do not print the report")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when the integrity checks find anything (torn, duplicated or edited rows, rows off the "
                        "plan, missing runs, a writer still running or dead) or the variants did not load the same "
                        "tensors")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="several results directories or packed archives side by side, with the PR's",
                       description="One row per results directory (or archive from `omni-loader pack`): machine, "
                                   "versions, layout, and the PR's rows with medians, spread, ratio and verdict; "
                                   "the PR's own figures as a reference row; checks that the directories loaded the "
                                   "same model and tensors.")
    p.add_argument("directories", nargs="+", metavar="DIR", help="results directories or .tar.gz/.zip archives")
    p.add_argument("--against", metavar="DIR",
                   help="compare every other directory with this one, phase by phase (ratio and Mann-Whitney)")
    p.add_argument("--out", metavar="DIR", help="also write compare.md/.csv/.json, against.csv and plots/ here")
    p.add_argument("--format", choices=("md", "csv", "json"), default="md",
                   help="what is printed (default md; csv prints the --against table after a blank line)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("pack", help="a results directory as one .tar.gz or .zip that compare reads directly")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--out", metavar="FILE", help="the archive (default DIR.tar.gz beside DIR)")
    p.add_argument("--format", choices=("tar.gz", "zip"), default=None,
                   help="default: from --out's ending, else tar.gz")
    p.add_argument("--force", action="store_true", help="replace an existing archive")
    p.set_defaults(func=cmd_pack)
