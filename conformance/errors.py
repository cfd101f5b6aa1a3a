"""User-facing errors: a typed diagnostic with a hint, never a traceback."""

from __future__ import annotations


class KitError(Exception):
    """Something the user can fix: bad arguments, an unreadable file, a harness that
    fails its handshake. The CLI prints ``error: <message>`` and ``hint: <hint>`` and
    exits 2 (the kit could not run)."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
