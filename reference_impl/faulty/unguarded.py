"""The one shortcut several variants share: create a task with no receipt at all."""

from __future__ import annotations

from retryproof.reference_impl import durable
from retryproof.reference_impl.faulty import Any
from retryproof.reference_impl.runtime import Runtime


def create_unguarded(runtime: Runtime, submission_id: str, task: Any, digest: str) -> dict[str, Any]:
    """Write a new task under a new number and answer ``created``: what a runtime
    without a durable submission ledger does on every call it does not recognize.

    It keeps the failpoints the runtime declares where its one durable step puts them
    (the reservation, which it lacks, before the write; the rest after it), so the
    crash scenarios judge what it does rather than end in error at a point it skips."""
    runtime._failpoint("write_task.after_reserve")
    task_id = f"TASK-{runtime._allocate_number():06d}"
    task_path = f"tasks/{task_id}.json"
    record = runtime._task_record(task_id, submission_id, task, digest)
    durable.create_new(runtime._state_path(task_path), durable.dump(record), runtime._fsync_directory)
    for point in ("write_task.after_task_write", "write_task.after_task_created", "write_task.after_commit"):
        runtime._failpoint(point)
    return {
        **runtime._legacy_result(task_id, task_path, digest),
        "client_submission_id": submission_id,
        "idempotent": True,
    }
