"""retryproof-harness/1 for DBOS Transact on a SQLite system database.

A task creation is one DBOS workflow whose workflow id is the client_submission_id:
step ``reserve_task_id`` allocates the task id, step ``write_task_file`` writes the task
object, the workflow returns the identity. Whether a call is new, a retry or a
duplicate is decided by DBOS alone (the workflow id); this file only translates. See
README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Mapping
from importlib.metadata import version
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID
from dbos._serialization import DefaultSerializer

from retryproof.adapters.implementations.dbos_startup import await_startup_recovery
from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result
from retryproof.adapters.python_host import HostedRuntime, check_armed, handlers_for
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, check_submission_id, request_digest
from retryproof.spec.protocol import ABSENT_DIAGNOSIS, ProtocolError, parse_failpoints, serve

FAILPOINTS = (
    "write_task.after_reserve",
    "write_task.after_task_write",
    "write_task.after_task_created",
    "write_task.after_commit",
)

# DBOS registers workflows and steps at import time, so they are module functions that
# reach the one runtime of this process through this name.
RUNTIME: DbosRuntime


@DBOS.step()
def reserve_task_id() -> str:
    return TaskStore.new_id()


@DBOS.step()
def write_task_file(task_id: str, record: dict[str, Any]) -> None:
    RUNTIME.store.write(task_id, record)
    RUNTIME.failpoint("write_task.after_task_write")


@DBOS.workflow()
def create_task(task: dict[str, Any], client_submission_id: str | None, digest: str, caller: str) -> dict[str, Any]:
    task_id = reserve_task_id()
    RUNTIME.failpoint("write_task.after_reserve")
    write_task_file(
        task_id,
        {"task_id": task_id, "task": task, "client_submission_id": client_submission_id, "request_digest": digest},
    )
    RUNTIME.failpoint("write_task.after_task_created")
    return {
        "task_id": task_id,
        "task_path": RUNTIME.store.path(task_id),
        "request_digest": digest,
        "digest_schema_version": DIGEST_SCHEMA_VERSION,
        # Which call ran the body: the one way to tell "this call wrote it" from
        # "DBOS returned an earlier run's output" without a check of our own.
        "caller": caller,
    }


class DbosRuntime(StoreListing, HostedRuntime):
    implementation = {"name": "dbos-transact", "version": version("dbos"), "language": "python"}
    capabilities = ("write_task", "legacy", "diagnose", "tamper", "multiprocess")
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        super().__init__(state_dir, failpoints)
        self.store = TaskStore(state_dir)
        self.database = os.path.join(state_dir, "dbos.sqlite")
        config: DBOSConfig = {
            "name": "retryproof-dbos",
            "system_database_url": f"sqlite:///{self.database}",
            "log_level": "WARNING",
        }
        DBOS(config=config)

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        # The application validates its request (the task schema is the contract's);
        # the digest is reported, never compared here.
        digest = request_digest(task)
        caller = uuid.uuid4().hex
        if client_submission_id is None:
            output = create_task(task, None, digest, caller)
        else:
            check_submission_id(client_submission_id)
            with SetWorkflowID(client_submission_id):
                output = create_task(task, client_submission_id, digest, caller)
        self.failpoint("write_task.after_commit")
        return creation_result(output, caller, client_submission_id)

    def _reserved_task_id(self, workflow_id: str) -> str | None:
        """The task id the workflow's first step recorded, if it ran."""
        for step in DBOS.list_workflow_steps(workflow_id):
            if step["function_name"].endswith("reserve_task_id") and step["error"] is None:
                return step["output"]
        return None

    def diagnose(self, client_submission_id: str, stale_after_s: float) -> Mapping[str, Any]:
        """DBOS's own records, read: the workflow status and its recorded steps."""
        status = DBOS.get_workflow_status(client_submission_id)
        task_id = self._reserved_task_id(client_submission_id) if status is not None else None
        if status is None or task_id is None:
            return {**ABSENT_DIAGNOSIS, "dbos_status": status.status if status else None}
        steps = {step["function_name"].rsplit(".", 1)[-1] for step in DBOS.list_workflow_steps(client_submission_id)}
        state = (
            "committed" if status.status == "SUCCESS" else "task_created" if "write_task_file" in steps else "reserved"
        )
        record = self.store.load(task_id)
        receipt_digest = status.input["args"][2] if status.input else None
        age_s = max(0.0, time.time() - (status.updated_at or status.created_at or 0) / 1000)
        return {
            "state": state,
            "task_id": task_id,
            "task_path": self.store.path(task_id),
            "task_exists": record is not None,
            "digest_matches": None if record is None else record.get("request_digest") == receipt_digest,
            "age_s": age_s,
            "stalled": state != "committed" and age_s >= stale_after_s,
            "dbos_status": status.status,
        }

    def tamper(self, action: str, **args: Any) -> Mapping[str, Any]:
        if action == "remove_task":
            self.store.remove(args["task_id"])
        elif action == "occupy_task_path":
            task_id = self._reserved_task_id(args["client_submission_id"])
            if task_id is None:
                raise ProtocolError("not_found", "no reserved task id for this submission")
            self.store.occupy(task_id)
        elif action == "set_receipt_schema":
            self._rewrite_recorded_output(args["client_submission_id"], args["digest_schema_version"])
        else:
            raise ProtocolError("invalid_request", f"unknown tamper action {action!r}")
        return {}

    def _rewrite_recorded_output(self, workflow_id: str, schema_version: str) -> None:
        """As if an older application version had recorded the workflow: its stored
        output (DBOS's default pickle serializer) names another digest schema."""
        status = DBOS.get_workflow_status(workflow_id)
        if status is None or status.status != "SUCCESS":
            raise ProtocolError("not_found", "no completed workflow for this submission")
        output = dict(status.output, digest_schema_version=schema_version)
        with sqlite3.connect(self.database) as connection:
            connection.execute(
                "UPDATE workflow_output SET output = ? WHERE workflow_uuid = ?",
                (DefaultSerializer().serialize(output), workflow_id),
            )


def main() -> int:
    global RUNTIME
    try:
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        check_armed(armed, FAILPOINTS)
        RUNTIME = DbosRuntime(os.environ["RETRYPROOF_STATE_DIR"], armed)
    except (ValueError, KeyError) as exc:
        print(f"dbos harness: {exc}", file=sys.stderr)
        return 2
    DBOS.launch()  # recovers this executor's PENDING workflows, as a restarted app would
    await_startup_recovery()
    try:
        serve(handlers_for(RUNTIME))
    finally:
        DBOS.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
