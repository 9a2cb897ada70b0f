"""The audit's bounds, apart so the command line can name them without importing the audit: a source over
5 MB is no code to audit, 10^7 modules or items is a typo, and a second per module visit is no measurement."""

MAX_FILE_BYTES = 5_000_000
MAX_COUNT = 10_000_000
MAX_VISIT_SECONDS = 1.0
