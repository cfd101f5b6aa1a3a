"""Where the approval service keeps its facts: operation records and the audit log.

The record and the audit log are two files, so no write makes them one transaction
(the second field report's point). The record is the source of truth; it says which
audit events are still owed (``audit_pending``), so recovery can append them later.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

from spec import validator

__all__ = ["AuditLog", "OperationStore", "append_line", "fsync_dir", "replace_json"]


def fsync_dir(path: Path) -> None:
    """Make a file creation, rename or removal in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_json(path: Path, value: Any) -> None:
    """Atomically replace ``path`` with ``value``: temp file, fsync, rename, fsync dir.

    A reader (or a process started after a SIGKILL) sees the old record or the new
    one, never a torn one.
    """
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temp, "wb") as handle:
        handle.write(json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fsync_dir(path.parent)


def append_line(path: Path, value: Any) -> None:
    """Append one JSON line and fsync it; a new file's directory entry is fsynced too."""
    created = not path.exists()
    data = json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    # flock on a fresh descriptor excludes other threads and other processes alike.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class OperationStore:
    """One JSON file per operation under ``operations/``, replaced atomically."""

    def __init__(self, root: Path):
        self.root = root / "operations"
        self.locks = root / "locks"
        for folder in (self.root, self.locks):
            folder.mkdir(parents=True, exist_ok=True)
        self._check = validator("approval-operation")

    def locked(self, operation_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the operation for one whole step, against threads and processes."""
        return _flock(self.locks / f"{operation_id}.lock")

    def load(self, operation_id: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.root / f"{operation_id}.json").read_bytes())
        except FileNotFoundError:
            return None

    def save(self, record: dict[str, Any]) -> None:
        record["updated_at"] = time.time()
        # The shipped schema guards the reference against writing a record it
        # would not accept back; a violation is this runtime's bug, not the caller's.
        self._check.validate(record)
        replace_json(self.root / f"{record['operation_id']}.json", record)


class AuditLog:
    """Audit events appended to one ``audit.jsonl``, serialized by a lock file."""

    def __init__(self, root: Path):
        self.path = root / "audit.jsonl"
        self._lock = root / "audit.lock"
        self._check = validator("audit-event")

    def append(self, event: dict[str, Any], fail: bool = False) -> None:
        """Append ``event``; with ``fail``, the real append meets a directory.

        This is how the second field report produced its audit faults: the
        destination path is briefly a directory, so ``open`` raises the native
        EISDIR, and the file is put back afterwards with nothing lost.
        """
        self._check.validate(event)
        with _flock(self._lock):
            if not fail:
                append_line(self.path, event)
                return
            with self._replaced_by_directory():
                append_line(self.path, event)

    @contextlib.contextmanager
    def _replaced_by_directory(self) -> Iterator[None]:
        aside = self.path.with_name(self.path.name + ".aside")
        had_file = self.path.exists()
        if had_file:
            os.replace(self.path, aside)
        os.mkdir(self.path)
        try:
            yield
        finally:
            os.rmdir(self.path)
            if had_file:
                os.replace(aside, self.path)
            fsync_dir(self.path.parent)

    def events(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]
