"""The retryproof kit: scenarios, the runner, the CLI and the report writers."""

__version__ = "0.1.0"
