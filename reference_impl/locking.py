"""Per-key mutual exclusion with kernel locks, bounded in time.

A kernel lock (``flock``) dies with its holder: after a SIGKILL the next caller gets the
lock at once, where an O_EXCL "lock present" file would stay behind and wedge the key.
The lock *file* stays; only the lock on it matters.

``flock`` belongs to an open file description, so every acquisition opens the file
anew: two threads of one process then exclude each other exactly like two processes.
The kernel offers no timed wait, hence the short polling with backoff.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

__all__ = ["LockTimeout", "hold"]

_FIRST_PAUSE_S = 0.0005
_LONGEST_PAUSE_S = 0.01


class LockTimeout(Exception):
    """The holder kept the lock for longer than the caller was willing to wait."""


@contextlib.contextmanager
def hold(path: str, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` body."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        pause = _FIRST_PAUSE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LockTimeout(f"lock {os.path.basename(path)} still held after {timeout_s:g}s") from None
                time.sleep(min(pause, remaining))
                pause = min(pause * 2, _LONGEST_PAUSE_S)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
