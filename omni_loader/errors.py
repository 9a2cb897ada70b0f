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


class OptionError(OmniLoaderError, ValueError):
    """A setting that is not one of its choices (a layout, a construction mode, a dtype)."""


def check_choice(option: str, value: object, allowed: tuple[str, ...]) -> None:
    """The one check of a setting against its choices, for every layer that takes one (a CLI option, a
    :class:`~omni_loader.token2wav.options.LoadOptions`, ``build_model`` called directly): one message."""
    if value not in allowed:
        raise OptionError(f"{option} {value!r} is not one of {', '.join(allowed)}")


class PlanError(OmniLoaderError, ValueError):
    """A run plan that cannot be made (unknown order, no runs)."""


def one_line(text: str, limit: int = 300, library: bool = True) -> str:
    """The first meaningful line of a library's error message (torch's weights-only essay, a JSON position...).

    torch.load's ``UnpicklingError`` opens with paragraphs on ``weights_only``; the line that says
    what is wrong with the file follows ``WeightsUnpickler error:``. ANSI escapes are dropped.
    """
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", str(text))
    marker = "WeightsUnpickler error:"
    if library and marker in text:
        text = text.split(marker, 1)[1]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("Please file an issue")] or lines
    line = lines[0] if lines else "no message"
    return line if len(line) <= limit else line[: limit - 3] + "..."
