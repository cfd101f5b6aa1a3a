"""The application's effect: one JSON file per task under ``<state dir>/tasks/``.

An idempotency library guards a side effect it does not own; this store is that side
effect for the bundled harnesses, the same for every library so that their verdicts
differ only by the library. It makes no idempotency decision: ``write`` writes what it
is given under the name it is given. Each write is durable before it returns (fsynced
file, atomic rename, fsynced directory), so a crash after it cannot undo it.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Mapping
from typing import Any

from retryproof.spec.digest import DIGEST_SCHEMA_VERSION
from retryproof.spec.protocol import ProtocolError

#: What ``tamper occupy_task_path`` leaves at a path: no task of any submission.
FOREIGN = {"foreign": True}


class TaskStore:
    def __init__(self, state_dir: str):
        self.folder = os.path.join(state_dir, "tasks")
        os.makedirs(self.folder, exist_ok=True)

    @staticmethod
    def new_id() -> str:
        return "T-" + uuid.uuid4().hex[:16]

    def path(self, task_id: str) -> str:
        """The task path as results name it (relative to the state directory)."""
        return f"tasks/{task_id}.json"

    def _file(self, task_id: str) -> str:
        return os.path.join(self.folder, f"{task_id}.json")

    def write(self, task_id: str, record: Mapping[str, Any]) -> None:
        """Write ``record`` (task_id, task, client_submission_id, request_digest) durably."""
        fd, temp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(dict(record), handle, ensure_ascii=False, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, self._file(task_id))
        directory = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def load(self, task_id: str) -> dict[str, Any] | None:
        try:
            with open(self._file(task_id), encoding="utf-8") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def list_tasks(self) -> dict[str, Any]:
        tasks = []
        for name in sorted(os.listdir(self.folder)):
            if name.startswith(".") or not name.endswith(".json"):
                continue
            record = self.load(name[: -len(".json")])
            if record is None or "task" not in record:
                continue  # removed meanwhile, or a foreign object: no task
            tasks.append(
                {
                    "task_id": record["task_id"],
                    "task_path": self.path(record["task_id"]),
                    "client_submission_id": record.get("client_submission_id"),
                    "request_digest": record["request_digest"],
                }
            )
        return {"tasks": tasks}

    def read_task(self, task_id: str) -> dict[str, Any]:
        record = self.load(task_id) if isinstance(task_id, str) and "/" not in task_id else None
        if record is None or "task" not in record:
            raise ProtocolError("not_found", f"no task {task_id!r}")
        return {
            "task_id": record["task_id"],
            "task": record["task"],
            "client_submission_id": record.get("client_submission_id"),
            "request_digest": record["request_digest"],
        }

    def remove(self, task_id: str) -> None:
        """``tamper remove_task``: the effect vanishes behind the library's back."""
        try:
            os.unlink(self._file(task_id))
        except FileNotFoundError:
            raise ProtocolError("not_found", f"no task {task_id!r}") from None

    def occupy(self, task_id: str) -> None:
        """``tamper occupy_task_path``: a foreign object at a reserved path."""
        self.write(task_id, FOREIGN)


def creation_result(output: Mapping[str, Any], caller: str, client_submission_id: str | None) -> dict[str, Any]:
    """The protocol's creation result for what a library answered. ``output`` is the
    stored effect's record as the library handed it back, ``caller`` the nonce this
    call sent: the library ran this call's effect exactly when the record carries it,
    so ``created`` is the library's own doing, never the harness's decision."""
    created = output["caller"] == caller
    return {
        "disposition": "created" if created else "reused",
        "action_taken": created,
        "task_id": output["task_id"],
        "task_path": output["task_path"],
        "client_submission_id": client_submission_id,
        "request_digest": output["request_digest"],
        # The schema of the digests the harness computes; the libraries record, never read it.
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        "idempotent": client_submission_id is not None,
    }


class StoreListing:
    """``list_tasks`` and ``read_task`` of a bundled harness, answered from the task
    store: the effect itself is the authoritative listing, never the library's records.
    Its ``tamper`` is the one action on the effect alone (``remove_task``); a harness
    whose library keeps receipts it can rewrite offers more in a ``tamper`` of its own."""

    store: TaskStore

    def list_tasks(self) -> Mapping[str, Any]:
        return self.store.list_tasks()

    def read_task(self, task_id: str) -> Mapping[str, Any]:
        return self.store.read_task(task_id)

    def tamper(self, action: str, **args: Any) -> Mapping[str, Any]:
        if action != "remove_task":
            raise ProtocolError("invalid_request", f"unsupported tamper action {action!r}")
        self.store.remove(args["task_id"])
        return {}


def main() -> None:
    """``python -m retryproof.adapters.implementations.task_store``: the effects of the
    state directory ``RETRYPROOF_STATE_DIR`` as JSON, each with its key and stored task,
    for a binding's listing command (the effect itself is the authority)."""
    store = TaskStore(os.environ["RETRYPROOF_STATE_DIR"])
    listed = [{**entry, "task": store.read_task(entry["task_id"])["task"]} for entry in store.list_tasks()["tasks"]]
    print(json.dumps({"tasks": listed}, ensure_ascii=False))


if __name__ == "__main__":
    main()
