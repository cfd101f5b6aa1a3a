"""Per-key mutual exclusion with kernel locks, bounded in time.

A kernel lock (``flock``) dies with its holder: after a SIGKILL the next caller gets the
lock at once, where an O_EXCL "lock present" file would stay behind and wedge the key.
The lock *file* stays; only the lock on it matters.

The kernel offers no timed wait for ``flock``, hence short polling with backoff; polling
is right for a holder in another process, but threads of one process waiting for each
other would then hand the lock on up to a pause late each, and a burst of same-id calls
on one connection would queue in pauses. So threads of one process first queue on a
per-path ``threading.Lock`` (woken the moment it is released, bounded by the same
deadline) and only its holder polls for the ``flock``, which then waits for other
processes alone. ``flock`` belongs to an open file description, so every acquisition
opens the file anew.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator

__all__ = ["LockTimeout", "hold"]

_FIRST_PAUSE_S = 0.0005
_LONGEST_PAUSE_S = 0.01


class _Queue:
    """The in-process lock of one path and how many threads hold or wait for it; it
    lives only while some thread does, so the table stays as small as the calls in flight."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


_queues: dict[str, _Queue] = {}
_queues_lock = threading.Lock()


class LockTimeout(Exception):
    """The holder kept the lock for longer than the caller was willing to wait."""


@contextlib.contextmanager
def hold(path: str, timeout_s: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the ``with`` body."""
    deadline = time.monotonic() + timeout_s
    with _queues_lock:
        queue = _queues.setdefault(path, _Queue())
        queue.users += 1
    try:
        if not queue.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LockTimeout(f"lock {os.path.basename(path)} still held after {timeout_s:g}s")
        try:
            with _kernel_lock(path, deadline, timeout_s):
                yield
        finally:
            queue.lock.release()
    finally:
        with _queues_lock:
            queue.users -= 1
            if queue.users == 0:
                del _queues[path]


@contextlib.contextmanager
def _kernel_lock(path: str, deadline: float, timeout_s: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
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
