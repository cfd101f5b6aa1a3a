"""The reference runtime: durable, retry-safe task creation over one state directory.

Layout of the state directory (every path below is relative to it)::

    receipts.journal             every receipt state and every task number claimed, one
                                 JSON line each, appended (journal.py: format, recovery)
    receipts.journal.lock        the kernel lock of the journal's writers
    tasks/TASK-000001.json       the task objects, one record each
    receipt-locks/<id>.lock      the kernel lock of each id (the file itself means nothing)
    reports/<id>.json            one report per write_report submission id
    report-numbers/1             claimed report numbers

A receipt moves ``reserved -> task_created -> committed`` (``spec/retryproof.yaml``,
``receipt``); each state is durable before the next step starts, and every later call
finishes or reuses what the receipt says, never starts over. A creation waits for the
disk four times, once per step, with five syncs: the reservation (one journal line that
claims the task number too, synced at once with the task object prepared under a hidden
name), the task object (that file linked under its name, the directory fsynced),
task_created and committed (a journal line each). No name is made per submission, so no
directory fsync is paid for a receipt. A creation interrupted by a crash is not finished
at start-up: the retry finishes it, so a stalled reservation stays observable to
diagnostics and to the kit.

The small ``_``-prefixed methods marked *seam* are the steps a one-defect variant
(``retryproof.reference_impl.faulty``) overrides; keep each one a single decision.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import time
from collections.abc import Iterator, Mapping

from retryproof.reference_impl import durable
from retryproof.reference_impl.journal import Journal
from retryproof.reference_impl.locking import LockTimeout, hold
from retryproof.reference_impl.numbering import Numbering
from retryproof.spec.digest import (
    DIGEST_SCHEMA_VERSION,
    ContractError,
    check_submission_id,
    request_digest,
)
from retryproof.spec.protocol import ABSENT_DIAGNOSIS, ProtocolError, crash_now

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["WAIT_TIMEOUT_S", "WRITE_TASK_FAILPOINTS", "Runtime"]

WRITE_TASK_FAILPOINTS = (
    "write_task.after_reserve",
    "write_task.after_task_write",
    "write_task.after_task_created",
    "write_task.after_commit",
)
# How long a call waits for another holder of its id (or operation) before in_progress:
# well inside the kit's 10 s call timeout (DISP-R8), or a wait that would
# have ended in reuse reads as no answer.
WAIT_TIMEOUT_S = 5.0
TASK_ID_PATTERN = re.compile(r"TASK-[0-9]{6,}")
_DIRECTORIES = ("tasks", "receipt-locks", "reports", "report-numbers")


def _conflict(reason: str, digest: str, receipt: Mapping[str, Any]) -> dict[str, Any]:
    """A conflict result: this call's digest, and the identity and facts bound to the id."""
    return {
        "disposition": "conflict",
        "action_taken": False,
        "task_id": receipt["task_id"],
        "task_path": receipt["task_path"],
        "client_submission_id": receipt["client_submission_id"],
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        "idempotent": True,
        "conflict": {
            "reason": reason,
            "receipt_request_digest": receipt["request_digest"],
            "receipt_digest_schema_version": receipt["digest_schema_version"],
        },
    }


def _task_id(number: int) -> str:
    return f"TASK-{number:06d}"


def _report_id(number: int) -> str:
    return f"REPORT-{number:06d}"


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _load(path: str) -> Any:
    """The JSON at ``path``, ``None`` when there is no file, ``{}`` when it is not JSON
    (a foreign or damaged object is a fact to report, never a crash of the call)."""
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return {}


class Runtime:
    """A retry-safe ``write_task`` and its companions over ``state_dir``.

    ``failpoints`` maps a name of ``WRITE_TASK_FAILPOINTS`` to ``crash`` or ``fail``;
    ``wait_timeout_s`` bounds how long a call waits for another holder of its id before
    answering ``in_progress``.
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        failpoints: Mapping[str, str] | None = None,
        wait_timeout_s: float = WAIT_TIMEOUT_S,
    ):
        self.state_dir = os.path.abspath(state_dir)
        if not os.path.isdir(self.state_dir):
            raise NotADirectoryError(
                errno.ENOTDIR, "state directory does not exist or is not a directory", str(state_dir)
            )
        self.armed_failpoints = dict(failpoints or {})
        self.wait_timeout_s = wait_timeout_s
        self._dirs = {name: os.path.join(self.state_dir, name) for name in _DIRECTORIES}
        made = False
        for directory in self._dirs.values():
            if not os.path.isdir(directory):
                os.makedirs(directory, exist_ok=True)
                made = True
        if made:
            self._fsync_directory(self.state_dir)
        self._journal = Journal(self.state_dir, self._journal_key, wait_timeout_s, self._fsync_directory)
        # Task objects this process prepared and synced with their reservation (the
        # set is small: an entry lives from a reservation to its task write).
        self._prepared_here: set[str] = set()
        self._report_numbers = Numbering(self._dirs["report-numbers"], self._fsync_directory)

    # ------------------------------------------------------------------ write_task

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Create the task of one submission, or recover the first creation's result.

        ``client_submission_id=None`` is the legacy path (a new task every call).
        ``invocation`` is call-time data: accepted, never part of the digest.
        """
        if invocation is not None and not isinstance(invocation, Mapping):
            raise ContractError("invalid_request", "invocation", "must be an object")
        if client_submission_id is not None:
            check_submission_id(client_submission_id)
        digest = self._digest(task)
        if client_submission_id is None:
            return self._write_legacy(task, digest)
        receipt = self._read_receipt(client_submission_id)
        if receipt is not None and receipt["state"] == "committed":
            # Nothing rewrites a committed receipt, so reuse needs no lock: no wait
            # behind a slow holder of the id, and no fsync.
            return self._settle(client_submission_id, task, digest, receipt)
        with self._acquire(client_submission_id):
            receipt = self._read_receipt(client_submission_id)
            if receipt is None:
                receipt = self._reserve(client_submission_id, digest, task)
            return self._settle(client_submission_id, task, digest, receipt)

    def _settle(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        """Apply the recovery rule of the receipt's state (the first call goes through
        here too, right after its reservation: there is one way forward, not two)."""
        if receipt["digest_schema_version"] != DIGEST_SCHEMA_VERSION:
            return _conflict("digest_schema_mismatch", digest, receipt)
        if receipt["request_digest"] != digest:
            return _conflict("digest_mismatch", digest, receipt)
        if receipt["state"] == "reserved":
            return self._recover_reserved(submission_id, task, digest, receipt)
        if receipt["state"] == "task_created":
            return self._recover_task_created(submission_id, digest, receipt)
        return self._reuse_committed(digest, receipt)

    def _reserve(self, submission_id: str, digest: str, task: Any) -> dict[str, Any]:
        # One journal line claims the number and records the receipt naming it: the
        # number is never durable without its owner, nor the receipt without its number.
        # The task object is prepared under a hidden name meanwhile, and both are synced
        # at once: neither is a task yet, so they need no order between them, and the
        # reservation costs one wait for the disk, not two (see _write_task_object).
        receipt = self._journal.claim(
            lambda number: self._reservation(submission_id, digest, number),
            alongside=lambda receipt: self._prepare_task_object(receipt, submission_id, task, digest),
        )
        self._prepared_here.add(self._prepared_path(receipt["task_id"]))
        self._failpoint("write_task.after_reserve")
        return receipt

    def _prepare_task_object(self, receipt: Mapping[str, Any], submission_id: str, task: Any, digest: str) -> None:
        """Write and sync the task object under its hidden name (no listing shows it)."""
        prepared = self._prepared_path(receipt["task_id"])
        durable.write_file(prepared, durable.dump(self._task_record(receipt["task_id"], submission_id, task, digest)))
        durable.sync_file(prepared)

    def _reservation(self, submission_id: str, digest: str, number: int) -> dict[str, Any]:
        """The reserved receipt of a submission under task number ``number``."""
        task_id = _task_id(number)
        now = time.time()
        return {
            "client_submission_id": submission_id,
            "digest_schema_version": DIGEST_SCHEMA_VERSION,
            "request_digest": digest,
            "task_id": task_id,
            "task_path": f"tasks/{task_id}.json",
            "state": "reserved",
            "reserved_at": now,
            "updated_at": now,
        }

    def _recover_reserved(self, submission_id: str, task: Any, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        """*Seam.* Write the task under the preallocated identity, or adopt a matching one."""
        path = self._state_path(receipt["task_path"])
        wrote = False
        if _load(path) is None:
            try:
                self._write_task_object(receipt, submission_id, task, digest)
                wrote = True
            except FileExistsError:  # someone put an object there meanwhile: judge it below
                pass
            else:
                self._failpoint("write_task.after_task_write")
        if not wrote and not self._task_matches(_load(path), receipt):
            return _conflict("task_path_occupied", digest, receipt)
        receipt = self._advance(receipt, "task_created")
        self._failpoint("write_task.after_task_created")
        return self._commit(receipt, wrote)

    def _recover_task_created(self, submission_id: str, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        """*Seam.* The task was confirmed: finish committing, or report that it is gone."""
        record = _load(self._state_path(receipt["task_path"]))
        if record is None:
            return _conflict("task_missing", digest, receipt)
        if not self._task_matches(record, receipt):
            return _conflict("task_path_occupied", digest, receipt)
        return self._commit(receipt, wrote=False)

    def _reuse_committed(self, digest: str, receipt: dict[str, Any]) -> dict[str, Any]:
        """*Seam.* Answer the stored result again, unless its task object vanished."""
        if not os.path.exists(self._state_path(receipt["task_path"])):
            return _conflict("task_missing", digest, receipt)
        return {**receipt["result"], "disposition": "reused", "action_taken": False}

    def _commit(self, receipt: dict[str, Any], wrote: bool) -> dict[str, Any]:
        # The stored result is the creation's; the answer says whether *this* call wrote.
        first = {
            "disposition": "created",
            "action_taken": True,
            "task_id": receipt["task_id"],
            "task_path": receipt["task_path"],
            "client_submission_id": receipt["client_submission_id"],
            "request_digest": receipt["request_digest"],
            "digest_schema_version": receipt["digest_schema_version"],
            "idempotent": True,
        }
        self._advance(receipt, "committed", result=first)
        self._failpoint("write_task.after_commit")
        return first if wrote else {**first, "disposition": "reused", "action_taken": False}

    def _advance(self, receipt: dict[str, Any], state: str, **extra: Any) -> dict[str, Any]:
        receipt = {**receipt, **extra, "state": state, "updated_at": time.time()}
        self._write_receipt(receipt)
        return receipt

    def _write_task_object(self, receipt: Mapping[str, Any], submission_id: str, task: Any, digest: str) -> None:
        """Write the task object at the receipt's task_path, or raise ``FileExistsError``:
        a link of the object the reservation prepared when it holds exactly this record,
        else a new file (a retry in another process may word the task differently under
        the same digest; its own wording is stored, as on a first call)."""
        data = durable.dump(self._task_record(receipt["task_id"], submission_id, task, digest))
        path = self._state_path(receipt["task_path"])
        prepared = self._prepared_path(receipt["task_id"])
        if _read_bytes(prepared) == data:
            if prepared not in self._prepared_here:
                durable.sync_file(prepared)  # a crashed process prepared it: its sync may never have run
            durable.link_new(prepared, path, self._fsync_directory)
            self._prepared_here.discard(prepared)
            os.unlink(prepared)
        else:
            durable.create_new(path, data, self._fsync_directory)

    def _write_legacy(self, task: Any, digest: str) -> dict[str, Any]:
        task_id = _task_id(self._allocate_number())
        task_path = f"tasks/{task_id}.json"
        data = durable.dump(self._task_record(task_id, None, task, digest))
        durable.create_new(self._state_path(task_path), data, self._fsync_directory)
        return self._legacy_result(task_id, task_path, digest)

    # ------------------------------------------------------------------ reading

    def list_tasks(self, with_task: bool = False) -> dict[str, Any]:
        """Every task object on disk, from the files themselves (not from receipts);
        ``with_task`` adds each stored task, read in the same pass (the services'
        listing, which has no read_task)."""
        return {
            "tasks": [
                {
                    "task_id": name[: -len(".json")],
                    "task_path": f"tasks/{name}",
                    "client_submission_id": record.get("client_submission_id"),
                    "request_digest": record.get("request_digest"),
                    **({"task": record.get("task")} if with_task else {}),
                }
                for name, record in self._records("tasks")
            ]
        }

    def read_task(self, task_id: Any) -> dict[str, Any]:
        record = _load(self._task_file(task_id))
        if record is None:
            raise ProtocolError("not_found", f"no task {task_id!r}")
        return {
            "task_id": task_id,
            "task": record.get("task"),
            "client_submission_id": record.get("client_submission_id"),
            "request_digest": record.get("request_digest"),
        }

    def diagnose(self, client_submission_id: Any, stale_after_s: Any) -> dict[str, Any]:
        """Facts about one receipt. Reads only: no lock is taken, nothing is written."""
        check_submission_id(client_submission_id)
        if (
            isinstance(stale_after_s, bool)
            or not isinstance(stale_after_s, (int, float))
            or not math.isfinite(stale_after_s)
            or stale_after_s < 0
        ):
            raise ContractError("invalid_request", "stale_after_s", "must be a finite number >= 0")
        receipt = self._read_receipt(client_submission_id)
        if receipt is None:
            return dict(ABSENT_DIAGNOSIS)
        record = _load(self._state_path(receipt["task_path"]))
        age_s = max(0.0, time.time() - receipt["updated_at"])
        return {
            "state": receipt["state"],
            "task_id": receipt["task_id"],
            "task_path": receipt["task_path"],
            "task_exists": record is not None,
            "digest_matches": None if record is None else self._record_digest(record) == receipt["request_digest"],
            "age_s": age_s,
            "stalled": receipt["state"] != "committed" and age_s >= stale_after_s,
        }

    # ------------------------------------------------------------------ reports

    def write_report(self, client_submission_id: Any, task_id: Any, content: Any) -> dict[str, Any]:
        """File a report on a task; the same id with the same task and content is
        answered with the first report (``deduplicated``), as it always was."""
        check_submission_id(client_submission_id)
        if not isinstance(content, str):
            raise ContractError("invalid_request", "content", "must be a string")
        if _load(self._task_file(task_id)) is None:
            raise ProtocolError("not_found", f"no task {task_id!r}")
        path = self._confined("reports", client_submission_id + ".json")
        existing = _load(path)
        if existing is None:

            def record(number: int) -> bytes:
                return durable.dump(
                    {
                        "report_id": _report_id(number),
                        "client_submission_id": client_submission_id,
                        "task_id": task_id,
                        "content": content,
                    }
                )

            number = self._report_numbers.claim(record)
            try:
                durable.link_new(self._report_numbers.path(number), path, self._fsync_directory)
                return {"report_id": _report_id(number), "deduplicated": False}
            except FileExistsError:  # a concurrent call with the same id won
                existing = _load(path)
        if self._is_duplicate_report(existing, task_id, content):
            return {"report_id": existing["report_id"], "deduplicated": True}
        raise ContractError(
            "invalid_request",
            "client_submission_id",
            f"already names report {existing.get('report_id')} with another task or content; nothing was written",
        )

    def list_reports(self) -> dict[str, Any]:
        return {
            "reports": [
                {"report_id": record.get("report_id"), "task_id": record.get("task_id")}
                for _, record in self._records("reports")
            ]
        }

    # ------------------------------------------------------------------ tamper (test-only)

    def tamper(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Damage state the way an operator or an older runtime version could, so the
        kit can check the recovery rules. Not a runtime feature: never call it in use."""
        action = args.get("action")
        if action == "remove_task":
            try:
                os.unlink(self._task_file(args.get("task_id")))
            except FileNotFoundError:
                raise ProtocolError("not_found", f"no task {args.get('task_id')!r}") from None
            self._fsync_directory(self._dirs["tasks"])
        elif action == "occupy_task_path":
            receipt = self._existing_receipt(args.get("client_submission_id"))
            foreign_task = {"sender": "tamper", "subject": "a foreign object at a reserved task path"}
            foreign = self._task_record(receipt["task_id"], None, foreign_task, request_digest(foreign_task))
            durable.replace(self._state_path(receipt["task_path"]), durable.dump(foreign), self._fsync_directory)
        elif action == "set_receipt_schema":
            receipt = self._existing_receipt(args.get("client_submission_id"))
            version = args.get("digest_schema_version")
            if not isinstance(version, str) or not version:
                raise ContractError("invalid_request", "digest_schema_version", "must be a non-empty string")
            receipt["digest_schema_version"] = version
            if "result" in receipt:
                receipt["result"]["digest_schema_version"] = version
            self._write_receipt(receipt)
        else:
            raise ContractError("invalid_request", "action", f"unknown tamper action {action!r}")
        return {}

    def _existing_receipt(self, submission_id: Any) -> dict[str, Any]:
        check_submission_id(submission_id)
        receipt = self._read_receipt(submission_id)
        if receipt is None:
            raise ProtocolError("not_found", f"no receipt for {submission_id!r}")
        return receipt

    # ------------------------------------------------------------------ seams

    def _digest(self, task: Any) -> str:
        """*Seam.* The write-task-v1 request digest (raises ``ContractError``)."""
        return request_digest(task)

    @contextlib.contextmanager
    def _acquire(self, submission_id: str) -> Iterator[None]:
        """*Seam.* Exclusive hold of one id, across threads and processes, bounded."""
        try:
            with hold(self._confined("receipt-locks", self._receipt_key(submission_id) + ".lock"), self.wait_timeout_s):
                yield
        except LockTimeout as exc:
            raise ProtocolError("in_progress", f"another call holds this client_submission_id: {exc}") from None

    def _allocate_number(self) -> int:
        """*Seam.* A task number no one else ever got or will get, for a task without a
        receipt (a reservation claims its number with its first line, ``_reserve``)."""
        claim = self._journal.claim(lambda number: {"task_id": _task_id(number)})
        return int(claim["task_id"][len("TASK-") :])

    def _write_receipt(self, receipt: Mapping[str, Any]) -> None:
        """*Seam.* Make one later state of a receipt durable: a line appended to the journal."""
        self._journal.append(dict(receipt))

    def _receipt_key(self, submission_id: str) -> str:
        """*Seam.* What a receipt and its lock are filed under: the id, exactly as sent
        (ids that differ only in case or past some length are distinct submissions)."""
        return submission_id

    def _legacy_result(self, task_id: str, task_path: str, digest: str) -> dict[str, Any]:
        """*Seam.* The legacy answer: a creation that promises nothing about retries."""
        return {
            "disposition": "created",
            "action_taken": True,
            "task_id": task_id,
            "task_path": task_path,
            "client_submission_id": None,
            "request_digest": digest,
            "digest_schema_version": DIGEST_SCHEMA_VERSION,
            "idempotent": False,
        }

    def _is_duplicate_report(self, existing: Mapping[str, Any], task_id: str, content: str) -> bool:
        """*Seam.* Whether a repeated report id is the same report."""
        return existing.get("task_id") == task_id and existing.get("content") == content

    def _fsync_directory(self, directory: str) -> None:
        """*Seam.* Make a name created, renamed or removed in ``directory`` durable."""
        durable.fsync_directory(directory)

    # ------------------------------------------------------------------ helpers

    def _failpoint(self, name: str) -> None:
        action = self.armed_failpoints.get(name)
        if action == "crash":
            crash_now()
        elif action == "fail":
            # The step before the point is durable; the caller sees a native I/O error,
            # which is the indeterminate "error after the effect" case.
            raise OSError(errno.EIO, f"failpoint {name}")

    def _read_receipt(self, submission_id: str) -> dict[str, Any] | None:
        """The current state of the receipt of ``submission_id``; ``None`` when there is none."""
        return self._journal.read(self._receipt_key(submission_id))

    def _journal_key(self, record: Mapping[str, Any]) -> str | None:
        """The receipt a journal line belongs to; ``None`` for a number claim."""
        submission_id = record.get("client_submission_id")
        return self._receipt_key(submission_id) if isinstance(submission_id, str) else None

    def _records(self, directory: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every record file of one state subdirectory, by name, skipping temp files.
        A file that is not a JSON object reads as ``{}``: listed, never hidden."""
        for name in sorted(os.listdir(self._dirs[directory])):
            if not name.startswith(".") and name.endswith(".json"):
                record = _load(os.path.join(self._dirs[directory], name))
                yield name, record if isinstance(record, dict) else {}

    def _task_record(self, task_id: str, submission_id: str | None, task: Any, digest: str) -> dict[str, Any]:
        return {
            "task_id": task_id,
            "client_submission_id": submission_id,
            "request_digest": digest,
            "digest_schema_version": DIGEST_SCHEMA_VERSION,
            "task": task,
        }

    def _record_digest(self, record: Any) -> str | None:
        """The digest of the task inside a task object, recomputed rather than trusted."""
        try:
            return self._digest(record.get("task")) if isinstance(record, dict) and "task" in record else None
        except ContractError:
            return None

    def _task_matches(self, record: Any, receipt: Mapping[str, Any]) -> bool:
        """Whether the object at a receipt's task_path is that submission's task."""
        return (
            isinstance(record, dict)
            and record.get("client_submission_id") == receipt["client_submission_id"]
            and self._record_digest(record) == receipt["request_digest"]
        )

    def _prepared_path(self, task_id: str) -> str:
        """Where a reservation prepares the object of ``task_id``: a dot-name, so no
        listing shows it before it is published under its own name."""
        if not TASK_ID_PATTERN.fullmatch(task_id):
            raise OSError(errno.EINVAL, f"task id {task_id!r} is not one this runtime hands out")
        return os.path.join(self._dirs["tasks"], f".{task_id}.prepared")

    def _task_file(self, task_id: Any) -> str:
        if not isinstance(task_id, str) or not TASK_ID_PATTERN.fullmatch(task_id):
            raise ProtocolError("not_found", f"no task {task_id!r}")
        return self._confined("tasks", task_id + ".json")

    def _state_path(self, task_path: str) -> str:
        """The file of a receipt's task_path, which must name a file in tasks/."""
        path = os.path.normpath(os.path.join(self.state_dir, task_path))
        if os.path.dirname(path) != self._dirs["tasks"]:
            raise OSError(errno.EINVAL, f"task path {task_path!r} leaves the tasks directory")
        return path

    def _confined(self, directory: str, name: str) -> str:
        """``name`` inside one state subdirectory. Submission ids are already checked
        against the pattern; this is the second wall, in case a seam skipped it."""
        if os.sep in name or name.startswith(".") or "\0" in name:
            raise OSError(errno.EINVAL, f"{name!r} is not a plain file name")
        return os.path.join(self._dirs[directory], name)
