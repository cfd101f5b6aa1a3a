"""Sequence numbers that are never handed out twice, across threads, processes and crashes.

Number ``n`` belongs to whoever O_EXCL-creates the file ``<directory>/<n>``; the kernel
lets exactly one creator win, whichever process or thread it is in. Claims are never
removed and every claimer takes the lowest free number at or above a point below which
all are taken, so the claimed numbers always form the prefix 1..N. That makes finding
the next free number a galloping search over ``stat`` calls, O(log N), with no counter
file to keep consistent and nothing to scan.
"""

from __future__ import annotations

import os
import threading

from retryproof.reference_impl.durable import FsyncDirectory, fsync_directory

__all__ = ["Numbering"]


class Numbering:
    def __init__(self, directory: str, fsync_dir: FsyncDirectory = fsync_directory):
        self.directory = directory
        self._fsync_dir = fsync_dir
        self._hint = 1  # every number below it is known to be claimed
        self._hint_lock = threading.Lock()

    def claim(self) -> int:
        """Claim the next number; it is durable (its directory fsynced) on return."""
        candidate = self._first_free(self._read_hint())
        while True:
            try:
                os.close(os.open(self._path(candidate), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:  # another thread or process won this one
                candidate = self._first_free(candidate + 1)
                continue
            break
        # The name is the whole claim; it must survive a power cut before a receipt
        # names the number, or a later claimer could take it again.
        self._fsync_dir(self.directory)
        with self._hint_lock:
            self._hint = max(self._hint, candidate + 1)
        return candidate

    def _read_hint(self) -> int:
        with self._hint_lock:
            return self._hint

    def _path(self, number: int) -> str:
        return os.path.join(self.directory, str(number))

    def _first_free(self, start: int) -> int:
        """The lowest unclaimed number >= ``start``, given that claims form a prefix."""
        if not os.path.exists(self._path(start)):
            return start
        low, step = start, 1  # low is claimed
        while os.path.exists(self._path(low + step)):
            low += step
            step *= 2
        high = low + step  # high is free
        while high - low > 1:
            middle = (low + high) // 2
            if os.path.exists(self._path(middle)):
                low = middle
            else:
                high = middle
        return high
