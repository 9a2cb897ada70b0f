"""``omni-loader doctor``: what a run here will use and what may bend it (:mod:`omni_loader.doctor`)."""

from __future__ import annotations

import argparse
from typing import Any

from .options import print_json


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..doctor import as_json, diagnose, render

    checks = diagnose()
    if args.json:
        print_json(as_json(checks))
    else:
        print(render(checks))
    return 1 if any(c.fix for c in checks) else 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("doctor", help="what a run here will use (Python, torch build, GPUs, transformers, the "
                       "installed vLLM-Omni's rule, py-spy, threads, disk) and what to fix first; no model import")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_doctor)
