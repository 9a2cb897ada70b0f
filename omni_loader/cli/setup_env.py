"""Set-up beside an existing environment, as the Makefile runs it with the user's Python before the kit's
dependencies exist: ``python -m omni_loader.cli.setup_env keep --venv DIR --extras lab,dev``.
The work is :mod:`omni_loader.host.requirements`; this is only its command line (standard library only)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ..host.requirements import keep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omni_loader.cli.setup_env",
                                     description="set up the kit beside an existing environment")
    sub = parser.add_subparsers(dest="command", required=True)
    k = sub.add_parser("keep", help="layer the kit's venv over this Python's environment, replacing nothing")
    k.add_argument("--venv", type=Path, required=True)
    k.add_argument("--extras", default="", help="comma-separated extras (lab,dev)")
    k.add_argument("--uv", default=None, help="a uv to install with (else pip)")
    args = parser.parse_args(argv)
    python = str(args.venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
    try:
        return keep(args.venv, tuple(e for e in args.extras.split(",") if e), python,
                    args.uv if args.uv and Path(args.uv).exists() else None)
    except subprocess.CalledProcessError as exc:
        print(f"set-up: failed: {' '.join(map(str, exc.cmd[:6]))} … exited {exc.returncode}; run it again with "
              "OMNI_LOADER_DEBUG=1 to see pip's own words", file=sys.stderr)
        return exc.returncode or 1


if __name__ == "__main__":
    sys.exit(main())
