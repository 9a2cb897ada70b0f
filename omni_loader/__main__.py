#!/usr/bin/env python3
"""``python -m omni_loader COMMAND``, or this file run directly from a checkout of the kit, as pre-commit's
``script`` hook runs the source audit (``.pre-commit-hooks.yaml``: ``omni_loader/__main__.py audit --source``):
the audit needs only the standard library, so the hook has no environment to install and never pulls torch."""

import sys
from pathlib import Path

if not __package__:  # run as a file: the checkout holding it is the package's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omni_loader.cli import main  # noqa: E402

sys.exit(main())
