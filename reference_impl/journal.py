"""The receipt journal: every receipt state, and every task number, in one append-only file.

A creation moves its receipt through three states and must make each durable before the
next step. A file per receipt would cost a new directory entry, and so a directory fsync,
per submission; the journal exists before any creation (it is made, durably, when the
state directory is first opened), so a state is one appended line and one ``fdatasync``.

Format (``receipts.journal`` in the state directory): UTF-8, one JSON object a line,
``durable.dump``'s form. Two kinds of line:

* a *receipt state*: a whole receipt (``schemas/receipt.json``); the last line of a
  ``client_submission_id`` is its receipt;
* a *claim*: ``{"task_id": "TASK-000007"}``, a task number taken with no receipt (the
  legacy path, which promises nothing about retries).

Task numbers: every line names a ``task_id``, and the next number is one above the
highest named so far. The line that names a new number is the claim of it, so a
reservation claims its number and records its receipt in one line and one sync.

Writers append one at a time under an exclusive lock (``locking.hold`` of
``receipts.journal.lock``: threads queue in the process, processes sharing the state
directory on ``flock``), having first read the lines others appended since their last
look, and ``fdatasync`` before they let go: only the last line is ever unsynced. Readers
take no lock: an append lands at the end of the file, and the kernel grows the file's
size only over bytes already copied, so a reader sees a prefix of a line in progress,
never its newline without all that comes before it. A reader may see the last line
before its sync returns, as it could see any file's data before its fsync: a call acts
on another call's state only under that id's lock (after the writer synced), except a
reuse of a committed state, whose writer answers the same result once its sync returns.

Recovery rule: a line counts only when it is complete (ends in a newline) and parses as
a JSON object. A crash can cut short only the last line (a SIGKILL inside the write, a
power cut before its ``fdatasync`` returned); that line was never acknowledged and
nothing after it began, so the state before it stands. It cannot be misread: a cut JSON
object does not parse, and bytes a power cut lost read as NUL, which no JSON text holds.
Unreadable lines at the end are left for later (a reader never skips them); the next
writer closes them off with a newline and the line ``{"cut_short":true}``, synced before
its own, which tells every reader to skip them. An unreadable line followed by anything else was
complete once, so it is damage, and every call that reads the journal fails with an I/O
error: a receipt read as absent would let a retry create a second task.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable

from retryproof.reference_impl.durable import FsyncDirectory, dump, fsync_directory, in_parallel, write_all
from retryproof.reference_impl.locking import LockTimeout, hold

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["JOURNAL", "Journal"]

JOURNAL = "receipts.journal"
#: How much of the tail one read takes.
_CHUNK = 1 << 20
#: The line a writer puts after lines a crash cut short, before its own.
_CUT_SHORT = {"cut_short": True}


class Journal:
    """The journal of one state directory, as one process sees it.

    ``key(record)`` names the receipt a line belongs to (``None`` for a claim); the
    index maps each key to where its last line is, so reading a receipt is one
    ``pread`` however long the journal grows.
    """

    def __init__(
        self,
        state_dir: str,
        key: Callable[[dict[str, Any]], str | None],
        wait_timeout_s: float,
        fsync_dir: FsyncDirectory = fsync_directory,
    ):
        self.path = os.path.join(state_dir, JOURNAL)
        self._lock_path = self.path + ".lock"
        self._key = key
        self._wait_timeout_s = wait_timeout_s
        self._index: dict[str, tuple[int, int]] = {}  # key -> (offset, length) of its last line
        self._top = 0  # the highest task number any line names
        self._end = 0  # where the first line not yet read starts
        self._size = 0  # the journal's length at the last look; past _end, a torn line
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._directory = state_dir
        self._fsync_dir = fsync_dir
        self._state_lock = threading.Lock()  # the index and offsets, among this process's threads

    def read(self, key: str) -> dict[str, Any] | None:
        """The last state of the receipt ``key``, ``None`` when it has none."""
        with self._state_lock:
            self._catch_up()
            where = self._index.get(key)
        if where is None:
            return None
        offset, length = where
        record: dict[str, Any] = json.loads(os.pread(self._fd, length, offset))
        return record

    def keys(self) -> list[str]:
        """Every receipt the journal holds."""
        with self._state_lock:
            self._catch_up()
            return list(self._index)

    def append(self, record: dict[str, Any]) -> None:
        """Make ``record`` the receipt's next state, durably."""
        self._append(lambda number: record)

    def claim(
        self,
        record_for: Callable[[int], dict[str, Any]],
        alongside: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Take the next task number and append ``record_for(number)``, which names it,
        in one durable line; return that record. ``alongside(record)`` runs while the
        line is synced: a step that needs the number and must be durable with it."""
        return self._append(record_for, alongside)

    def _append(
        self,
        record_for: Callable[[int], dict[str, Any]],
        alongside: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Append ``record_for(the next free task number)`` as the only writer of the
        journal, and sync it before letting go: so only the last line is ever unsynced,
        which the recovery rule relies on."""
        try:
            with hold(self._lock_path, self._wait_timeout_s):
                with self._state_lock:
                    self._catch_up()
                    record = record_for(self._top + 1)
                    start, cut_short = self._size, self._size > self._end
                if start == 0:
                    # The first line: the journal's name must be durable before a state
                    # is, so its first writer syncs it (a start that never writes, or
                    # finds lines there, pays nothing; one that died before writing
                    # leaves the name to the next first writer).
                    os.fsync(self._fd)
                    self._fsync_dir(self._directory)
                if cut_short:
                    # Lines a crash cut short end the journal: close them off and say
                    # so, so readers tell them from damage (the recovery rule above).
                    # Synced before the record: written with it, a power cut could keep
                    # the record and lose part of this line, which would then read as
                    # damage for good.
                    closing = b"\n" + dump(_CUT_SHORT)
                    write_all(self._fd, closing, start)
                    os.fdatasync(self._fd)
                    start += len(closing)
                write_all(self._fd, dump(record), start)
                if alongside is None:
                    os.fdatasync(self._fd)
                else:
                    in_parallel(lambda: os.fdatasync(self._fd), lambda: alongside(record))
        except LockTimeout as exc:
            raise OSError(errno.EWOULDBLOCK, f"the receipt journal is held by a stuck writer: {exc}") from None
        return record

    def _catch_up(self) -> None:
        """Index the complete lines after ``_end``. Unreadable lines at the end stay
        unread (``_end`` stops before them) until a ``_CUT_SHORT`` line follows them;
        unreadable lines followed by anything else are damage."""
        position = cut = self._end
        while True:
            data = os.pread(self._fd, _CHUNK, position)
            last = data.rfind(b"\n")
            if last < 0:
                if len(data) == _CHUNK:
                    raise OSError(errno.EFBIG, "a journal line longer than one read", self.path)
                self._size = position + len(data)
                return
            for line in data[:last].split(b"\n"):
                record = _parsed(line)
                if record is None:
                    pass  # unreadable: the run goes on
                elif record == _CUT_SHORT:
                    cut = position + len(line) + 1
                elif cut < position:
                    raise OSError(errno.EIO, f"the receipt journal is damaged at byte {cut}", self.path)
                else:
                    self._index_line(record, position, len(line))
                    cut = position + len(line) + 1
                position += len(line) + 1
                self._end = cut

    def _index_line(self, record: dict[str, Any], offset: int, length: int) -> None:
        task_id = record.get("task_id")
        if isinstance(task_id, str) and task_id[len("TASK-") :].isdigit():
            self._top = max(self._top, int(task_id[len("TASK-") :]))
        key = self._key(record)
        if key is not None:
            self._index[key] = (offset, length)


def _parsed(line: bytes) -> dict[str, Any] | None:
    """The JSON object on ``line``; ``None`` for anything else (a line cut short, damage)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
