"""Where the approval service keeps its facts: operation records and the audit log.

The record and the audit log are two files, so no write makes them one transaction
(the second field report's point). The record is the source of truth; it says which
audit events are still owed (``audit_pending``), so recovery can append them later.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator

from retryproof.reference_impl import durable
from retryproof.reference_impl.locking import LockTimeout, hold
from retryproof.reference_impl.runtime import WAIT_TIMEOUT_S
from retryproof.spec.protocol import ProtocolError

TYPE_CHECKING = False  # not typing's: see approval.py
if TYPE_CHECKING:
    from typing import Any

__all__ = ["AuditLog", "OperationStore", "append_line"]


def append_line(path: str, value: Any) -> None:
    """Append one JSON line and fsync it; a new file's directory entry is fsynced too."""
    created = not os.path.exists(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, durable.dump(value))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        durable.fsync_directory(os.path.dirname(path))


@contextlib.contextmanager
def _hold(path: str, what: str) -> Iterator[None]:
    try:
        with hold(path, WAIT_TIMEOUT_S):
            yield
    except LockTimeout as exc:
        raise ProtocolError("in_progress", f"another call holds {what}: {exc}") from None


class OperationStore:
    """One JSON file per operation under ``operations/``, replaced atomically."""

    def __init__(self, root: str):
        self.root = os.path.join(root, "operations")
        self.locks = os.path.join(root, "locks")
        for folder in (self.root, self.locks):
            durable.make_directory(folder)

    def locked(self, operation_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the operation for one whole step, against threads and processes."""
        return _hold(os.path.join(self.locks, f"{operation_id}.lock"), f"operation {operation_id}")

    def load(self, operation_id: str) -> dict[str, Any] | None:
        try:
            with open(os.path.join(self.root, f"{operation_id}.json"), "rb") as handle:
                return json.loads(handle.read())
        except FileNotFoundError:
            return None

    def save(self, record: dict[str, Any]) -> None:
        record["updated_at"] = time.time()
        durable.replace(os.path.join(self.root, f"{record['operation_id']}.json"), durable.dump(record))


class AuditLog:
    """Audit events appended to one ``audit.jsonl``, serialized by a lock file."""

    def __init__(self, root: str):
        self.path = os.path.join(root, "audit.jsonl")
        self._lock = os.path.join(root, "audit.lock")
        self._aside = self.path + ".aside"
        with _hold(self._lock, "the audit log"):
            self._undo_fault()

    def _undo_fault(self) -> None:
        """Put back what a process killed inside ``_replaced_by_directory`` left.

        Without this the log would stay a directory for good, and every later append,
        repairs included, would fail. The order of the steps there makes the leftover
        unambiguous: a directory at the path is always the fault's, and ``.aside`` is
        the log until it is moved back.
        """
        if not os.path.isdir(self.path) and not os.path.exists(self._aside):
            return
        if os.path.isdir(self.path):
            os.rmdir(self.path)
        if os.path.exists(self._aside):
            os.replace(self._aside, self.path)
        durable.fsync_directory(os.path.dirname(self.path))

    def append(self, event: dict[str, Any], fail: bool = False) -> None:
        """Append ``event``; with ``fail``, the real append meets a directory.

        This is how the second field report produced its audit faults: the
        destination path is briefly a directory, so ``open`` raises the native
        EISDIR, and the file is put back afterwards with nothing lost.
        """
        with _hold(self._lock, "the audit log"):
            if not fail:
                append_line(self.path, event)
                return
            with self._replaced_by_directory():
                append_line(self.path, event)

    @contextlib.contextmanager
    def _replaced_by_directory(self) -> Iterator[None]:
        had_file = os.path.exists(self.path)
        if had_file:
            os.replace(self.path, self._aside)
        os.mkdir(self.path)
        try:
            yield
        finally:
            os.rmdir(self.path)
            if had_file:
                os.replace(self._aside, self.path)
            durable.fsync_directory(os.path.dirname(self.path))

    def events(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]
