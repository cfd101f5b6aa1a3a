"""The listing of ``binding.yaml``: every task object of the state directory, with the
idempotency key of the Restate invocation that wrote it.

The handler records its invocation id with the effect (Restate does not hand it the
key); the key is Restate's own record, read from the server's ``sys_invocation`` table
through the admin API's SQL endpoint. Read-only. Run with this folder's environment
and ``RETRYPROOF_STATE_DIR``; prints ``{"tasks": [{task_id, client_submission_id, task}]}``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request

from retryproof.adapters.implementations.task_store import TaskStore

QUERY = "SELECT id, idempotency_key FROM sys_invocation"


#: The SQL endpoint answers 500 for a moment after the server starts: retried, bounded.
QUERY_WAIT_S = 10.0


def invocation_keys(admin_port: str) -> dict[str, str | None]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin_port}/query",
        data=json.dumps({"query": QUERY}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        method="POST",
    )
    deadline = time.monotonic() + QUERY_WAIT_S
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return {row["id"]: row["idempotency_key"] for row in json.load(response)["rows"]}
        except (urllib.error.HTTPError, urllib.error.URLError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> None:
    state_dir = os.environ["RETRYPROOF_STATE_DIR"]
    with open(os.path.join(state_dir, "restate-ports.json")) as handle:
        keys = invocation_keys(json.load(handle)["ADMIN_PORT"])
    store, tasks = TaskStore(state_dir), []
    for entry in store.list_tasks()["tasks"]:
        record = store.load(entry["task_id"]) or {}
        key = keys.get(record.get("invocation_id", ""))
        tasks.append({"task_id": entry["task_id"], "client_submission_id": key, "task": record.get("task")})
    print(json.dumps({"tasks": tasks}, ensure_ascii=False))


if __name__ == "__main__":
    main()
