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
from pathlib import Path
from typing import Any

from retryproof.reference_impl import durable
from retryproof.reference_impl.locking import LockTimeout, hold
from retryproof.reference_impl.runtime import WAIT_TIMEOUT_S
from retryproof.spec.protocol import ProtocolError

__all__ = ["AuditLog", "OperationStore", "append_line"]


def append_line(path: Path, value: Any) -> None:
    """Append one JSON line and fsync it; a new file's directory entry is fsynced too."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, durable.dump(value))
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        durable.fsync_directory(str(path.parent))


@contextlib.contextmanager
def _hold(path: Path, what: str) -> Iterator[None]:
    try:
        with hold(str(path), WAIT_TIMEOUT_S):
            yield
    except LockTimeout as exc:
        raise ProtocolError("in_progress", f"another call holds {what}: {exc}") from None


class OperationStore:
    """One JSON file per operation under ``operations/``, replaced atomically."""

    def __init__(self, root: Path):
        self.root = root / "operations"
        self.locks = root / "locks"
        for folder in (self.root, self.locks):
            folder.mkdir(parents=True, exist_ok=True)

    def locked(self, operation_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the operation for one whole step, against threads and processes."""
        return _hold(self.locks / f"{operation_id}.lock", f"operation {operation_id}")

    def load(self, operation_id: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.root / f"{operation_id}.json").read_bytes())
        except FileNotFoundError:
            return None

    def save(self, record: dict[str, Any]) -> None:
        record["updated_at"] = time.time()
        durable.replace(str(self.root / f"{record['operation_id']}.json"), durable.dump(record))


class AuditLog:
    """Audit events appended to one ``audit.jsonl``, serialized by a lock file."""

    def __init__(self, root: Path):
        self.path = root / "audit.jsonl"
        self._lock = root / "audit.lock"
        self._aside = self.path.with_name(self.path.name + ".aside")
        with _hold(self._lock, "the audit log"):
            self._undo_fault()

    def _undo_fault(self) -> None:
        """Put back what a process killed inside ``_replaced_by_directory`` left.

        Without this the log would stay a directory for good, and every later append,
        repairs included, would fail. The order of the steps there makes the leftover
        unambiguous: a directory at the path is always the fault's, and ``.aside`` is
        the log until it is moved back.
        """
        if not self.path.is_dir() and not self._aside.exists():
            return
        if self.path.is_dir():
            os.rmdir(self.path)
        if self._aside.exists():
            os.replace(self._aside, self.path)
        durable.fsync_directory(str(self.path.parent))

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
        had_file = self.path.exists()
        if had_file:
            os.replace(self.path, self._aside)
        os.mkdir(self.path)
        try:
            yield
        finally:
            os.rmdir(self.path)
            if had_file:
                os.replace(self._aside, self.path)
            durable.fsync_directory(str(self.path.parent))

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]
