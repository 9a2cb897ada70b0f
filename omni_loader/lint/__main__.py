#!/usr/bin/env python3
"""The source audit on its own: ``python -m omni_loader.lint PATH…``, or this file run directly from a checkout
of the kit, as pre-commit's ``script`` hook runs it (``.pre-commit-hooks.yaml``). The audit reads source with
``ast`` and needs only the standard library, so the hook has no environment to install and never pulls torch."""

import sys
from pathlib import Path

if not __package__:  # run as a file: the checkout holding it is the package's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from omni_loader.cli import main  # noqa: E402

sys.exit(main(["audit", "--source", *sys.argv[1:]]))
