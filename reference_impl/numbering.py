"""Sequence numbers that are never handed out twice, across threads, processes and crashes.

Number ``n`` belongs to whoever O_EXCL-creates the file ``<directory>/<n>``; the kernel
lets exactly one creator win, whichever process or thread it is in. Claims are never
removed and every claimer takes the lowest free number at or above a point below which
all are taken, so the claimed numbers always form the prefix 1..N. That makes finding
the next free number a galloping search over ``stat`` calls, O(log N), with no counter
file to keep consistent and nothing to scan.

A claim may carry the record that will be published under the number (the report
``REPORT-<n>``): the claimer writes it into the claim file and fsyncs file and directory
together, so the claim and the record's content become durable in one file-system commit,
and publishing it later is a link (``durable.link_new``) rather than a temp file of its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from retryproof.reference_impl.durable import FsyncDirectory, fsync_directory, write_all

__all__ = ["Numbering"]


class Numbering:
    def __init__(self, directory: str, fsync_dir: FsyncDirectory = fsync_directory):
        self.directory = directory
        self._fsync_dir = fsync_dir
        self._hint = 1  # every number below it is known to be claimed
        self._hint_lock = threading.Lock()

    def claim(self, record: Callable[[int], bytes] | None = None) -> int:
        """Claim the next number; it is durable (its directory fsynced) on return, and so
        is ``record(number)`` in the claim file (``path(number)``) when given."""
        candidate = self._first_free(self._read_hint())
        while True:
            try:
                fd = os.open(self.path(candidate), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:  # another thread or process won this one
                candidate = self._first_free(candidate + 1)
                continue
            break
        try:
            if record is not None:
                # A claimer killed before this leaves an empty claim: a number, no record.
                write_all(fd, record(candidate))
                os.fsync(fd)
        finally:
            os.close(fd)
        # The name is the whole claim; it must survive a power cut before a receipt
        # names the number, or a later claimer could take it again.
        self._fsync_dir(self.directory)
        with self._hint_lock:
            self._hint = max(self._hint, candidate + 1)
        return candidate

    def _read_hint(self) -> int:
        with self._hint_lock:
            return self._hint

    def path(self, number: int) -> str:
        """The claim file of ``number``."""
        return os.path.join(self.directory, str(number))

    def _first_free(self, start: int) -> int:
        """The lowest unclaimed number >= ``start``, given that claims form a prefix."""
        if not os.path.exists(self.path(start)):
            return start
        low, step = start, 1  # low is claimed
        while os.path.exists(self.path(low + step)):
            low += step
            step *= 2
        high = low + step  # high is free
        while high - low > 1:
            middle = (low + high) // 2
            if os.path.exists(self.path(middle)):
                low = middle
            else:
                high = middle
        return high
