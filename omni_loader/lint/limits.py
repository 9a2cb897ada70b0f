"""The audit's bounds, apart so the command line can name and check them without importing the audit: a source
over 5 MB is no code to audit, 10^7 modules or items is a typo, and a second per module visit is no measurement."""

import math

from ..errors import OmniLoaderError

MAX_FILE_BYTES = 5_000_000
MAX_COUNT = 10_000_000
MAX_VISIT_SECONDS = 1.0


def check_count(option: str, value: object) -> int:
    """``value`` as a whole number from 1 to :data:`MAX_COUNT`, else one line naming ``option``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise OmniLoaderError(f"{option} must be at least 1 and at most {MAX_COUNT:,} (a whole number), not {value}")
    return value


def check_visit_cost(value: object) -> float:
    """``value`` as a finite number of seconds above 0 and at most :data:`MAX_VISIT_SECONDS`, else one line."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(value, bool) or not (math.isfinite(seconds) and 0 < seconds <= MAX_VISIT_SECONDS):
        raise OmniLoaderError(f"--visit-cost {value}: must be a finite number of seconds above 0 and at most "
                              f"{MAX_VISIT_SECONDS:g} (a module visit costs microseconds)")
    return seconds
