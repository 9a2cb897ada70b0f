"""The audit's bounds, in a module of their own so the command line can name them without importing the audit.

Why these numbers: a source file over 5 MB is a generated table or a vendored blob, not code to audit
(``--max-file-size`` raises or lifts the cap); the largest models have ~10^5 modules, so 10^7 modules
or items is a typo or an overflow to come; a module visit costs microseconds anywhere, so a second
per visit is no measurement.
"""

MAX_FILE_BYTES = 5_000_000
MAX_COUNT = 10_000_000
MAX_VISIT_SECONDS = 1.0
