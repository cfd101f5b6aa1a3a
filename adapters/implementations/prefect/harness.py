"""retryproof-harness/1 for Prefect 3: a task made idempotent with a cache key.

A task creation is one run of the Prefect task ``create_task``, whose cache policy
keys it by the client_submission_id, with Prefect's strictest settings for a shared
key: results persisted to local storage, the SERIALIZABLE isolation level with a
file-system lock manager (Prefect's docs, "Isolate cache access"). Prefect runs the
task inside a transaction on that key: a committed record is returned instead of
running the task again. Records, locks and results live under the state directory;
the API is the local Prefect server ``./setup start`` runs (on SQLite), named by
``--api-url``. Prefect alone decides whether the task runs; this file only
translates. See README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``)::

    .venv/bin/python harness.py --api-url http://127.0.0.1:4290/api
"""

from __future__ import annotations

import os
import sys

# Prefect reads its settings when it is imported: what it keeps of a task goes to the
# kit's state directory, and its API is the server named on the command line.
if len(sys.argv) != 3 or sys.argv[1] != "--api-url":
    sys.exit("usage: harness.py --api-url URL")
os.environ.update(
    PREFECT_HOME=os.path.join(os.environ.get("RETRYPROOF_STATE_DIR", ""), "prefect"),
    PREFECT_API_URL=sys.argv[2],
    PREFECT_LOGGING_LEVEL="WARNING",
)

import uuid  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from importlib.metadata import version  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from prefect import task  # noqa: E402
from prefect.cache_policies import NO_CACHE, CacheKeyFnPolicy  # noqa: E402
from prefect.locking.filesystem import FileSystemLockManager  # noqa: E402

from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result  # noqa: E402
from retryproof.adapters.python_host import HostedRuntime, serve_hosted  # noqa: E402
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest  # noqa: E402

FAILPOINTS = ("write_task.after_task_write", "write_task.after_commit")

RUNTIME: PrefectRuntime


@task(persist_result=True)
def create_task(task: dict[str, Any], client_submission_id: str | None, caller: str) -> dict[str, Any]:
    task_id = TaskStore.new_id()
    digest = request_digest(task)
    record = {"task_id": task_id, "task": task, "client_submission_id": client_submission_id, "request_digest": digest}
    RUNTIME.store.write(task_id, record)
    RUNTIME.failpoint("write_task.after_task_write")
    return {
        "task_id": task_id,
        "task_path": RUNTIME.store.path(task_id),
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        # Which call ran the task: tells "this call wrote it" from a cached result.
        "caller": caller,
    }


def submission_key(context: Any, parameters: Mapping[str, Any]) -> str | None:
    """The cache key: the caller's idempotency key, nothing else of the request."""
    return parameters["client_submission_id"]


class PrefectRuntime(StoreListing, HostedRuntime):
    implementation = {"name": "prefect", "version": version("prefect"), "language": "python"}
    capabilities = ("write_task", "legacy", "tamper", "multiprocess")
    tamper_actions = ("remove_task",)
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        global RUNTIME
        super().__init__(state_dir, failpoints)
        RUNTIME = self  # the module-level task reaches the runtime here
        self.store = TaskStore(state_dir)
        prefect = os.path.join(state_dir, "prefect")
        policy = CacheKeyFnPolicy(cache_key_fn=submission_key).configure(
            key_storage=os.path.join(prefect, "cache-keys"),
            lock_manager=FileSystemLockManager(lock_files_directory=Path(prefect, "locks")),
            isolation_level="SERIALIZABLE",
        )
        # Results go to Prefect's default local storage, <PREFECT_HOME>/storage.
        self.keyed = create_task.with_options(cache_policy=policy)
        # Without a key a call is not cached at all: every run runs.
        self.unkeyed = create_task.with_options(cache_policy=NO_CACHE)

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        request_digest(task)  # the application validates its request before Prefect sees it
        caller = uuid.uuid4().hex
        if client_submission_id is None:
            output = self.unkeyed(task, None, caller)
        else:
            check_submission_id(client_submission_id)
            output = self.keyed(task, client_submission_id, caller)
        self.failpoint("write_task.after_commit")
        return creation_result(output, caller, client_submission_id)


def main() -> int:
    return serve_hosted(PrefectRuntime, "prefect harness")


if __name__ == "__main__":
    sys.exit(main())
