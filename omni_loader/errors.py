"""User-facing errors.

Every problem a user can cause (a missing checkpoint, a shape mismatch, a GPU that is not there)
is raised as an :class:`OmniLoaderError` whose message is one line naming the culprit. The CLI
prints that line and exits with status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class OmniLoaderError(Exception):
    """A problem with the user's input or machine, described in one line."""

    exit_code = 2


class CheckpointError(OmniLoaderError):
    """A snapshot that is missing, incomplete, corrupt or does not match the model."""


class DeviceError(OmniLoaderError):
    """A device that was asked for but is not available."""


class ResultsError(OmniLoaderError):
    """A results directory that cannot be read or continued."""


class PlanError(OmniLoaderError, ValueError):
    """A run plan that cannot be made (unknown order, no runs)."""
