"""One id bound to other facts: every conflict creates nothing, changes nothing,
overwrites nothing, and says why."""

from __future__ import annotations

from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.scenarios.common import expect_created, stalled_reservation
from retryproof.conformance.variants import changed
from retryproof.spec.digest import DIGEST_SCHEMA_VERSION, request_digest

AFTER_RESERVE = "write_task.after_reserve"


def _created_task(ctx: Context):
    """Start, create one task, and return (before, submission id, task, result, stored)."""
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    result = expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    stored = ctx.expect_ok(ctx.call("read_task", {"task_id": result["task_id"]}), "read_task")
    return before, submission_id, task, result, stored


def _unchanged(ctx: Context, result, stored) -> None:
    again = ctx.expect_ok(ctx.call("read_task", {"task_id": result["task_id"]}), "read_task after the conflict")
    ctx.check(again == stored, "the original task changed after the conflicting call")


@scenario("CONFLICT-DIGEST", shares_server=True)
def conflict_digest(ctx: Context) -> None:
    before, submission_id, task, result, stored = _created_task(ctx)
    other = changed(task)
    conflict = ctx.expect_conflict(ctx.write_task(submission_id, other), "digest_mismatch", "same id, different task")
    ctx.check(conflict.get("action_taken") is False, "a conflict must say action_taken false")
    ctx.check(
        conflict.get("request_digest") == request_digest(other),
        "the conflict's request_digest is not the digest of the conflicting task",
    )
    ctx.check(
        conflict["conflict"].get("receipt_request_digest") == result["request_digest"],
        "the conflict does not name the digest bound to the id",
    )
    ctx.check(
        (conflict.get("task_id"), conflict.get("task_path")) == (result["task_id"], result["task_path"]),
        "the conflict does not name the identity bound to the id",
    )
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    _unchanged(ctx, result, stored)
    ctx.expect_disposition(ctx.write_task(submission_id, task), "reused", "the original request after the conflict")


@scenario("CONFLICT-SCHEMA", shares_server=True)
def conflict_schema(ctx: Context) -> None:
    before, submission_id, task, result, stored = _created_task(ctx)
    older = "write-task-v0"
    tamper = {"action": "set_receipt_schema", "client_submission_id": submission_id, "digest_schema_version": older}
    ctx.expect_ok(ctx.call("tamper", tamper), "tamper set_receipt_schema")
    conflict = ctx.expect_conflict(
        ctx.write_task(submission_id, task), "digest_schema_mismatch", "the same request against an older receipt"
    )
    ctx.check(
        conflict["conflict"].get("receipt_digest_schema_version") == older,
        "the conflict does not name the receipt's digest schema version",
    )
    ctx.check(
        conflict.get("digest_schema_version") == DIGEST_SCHEMA_VERSION,
        f"the conflict's digest_schema_version is not {DIGEST_SCHEMA_VERSION}",
    )
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    _unchanged(ctx, result, stored)


# Not shares_server, though it would save a start: it deletes a task from under the
# runtime (tamper), so each later user of a shared server would be judged on a state no
# sequence of calls makes, a committed receipt whose task is gone.
@scenario("TASK-MISSING-CONFLICT")
def task_missing(ctx: Context) -> None:
    before, submission_id, task, result, _ = _created_task(ctx)
    ctx.expect_ok(ctx.call("tamper", {"action": "remove_task", "task_id": result["task_id"]}), "tamper remove_task")
    ctx.receipt(submission_id, "after the task was removed")
    for attempt in ("retry", "second retry"):
        conflict = ctx.expect_conflict(
            ctx.write_task(submission_id, task), "task_missing", f"{attempt} after the task vanished"
        )
        ctx.check(
            conflict.get("task_id") == result["task_id"], f"{attempt}: the conflict does not name the vanished task"
        )
    after = ctx.tasks("after")
    ctx.check(not after.for_submission(submission_id), "the vanished task was created again")
    ctx.check_tasks(before, after, new=0)  # the tamper call in the history removed it on purpose


@scenario("PATH-OCCUPIED-CONFLICT")
def path_occupied(ctx: Context) -> None:
    submission_id, task, _, _ = stalled_reservation(ctx, AFTER_RESERVE)
    ctx.receipt(submission_id, "reserved")
    ctx.expect_ok(
        ctx.call("tamper", {"action": "occupy_task_path", "client_submission_id": submission_id}),
        "tamper occupy_task_path",
    )
    for attempt in ("retry", "second retry"):
        ctx.expect_conflict(
            ctx.write_task(submission_id, task), "task_path_occupied", f"{attempt} against a foreign object"
        )
    after = ctx.tasks("after")
    ctx.check(
        not after.for_submission(submission_id),
        "a task was written for the id although its path holds a foreign object",
    )
    # Only diagnose can see the foreign object (its form is the runtime's choice), so
    # the scenario needs diagnose: without it "not overwritten" could not be judged.
    receipt = ctx.diagnose(submission_id, "after the conflicts")
    ctx.check(
        receipt.get("task_exists") is True and receipt.get("digest_matches") is False,
        "the foreign object at the reserved path was overwritten or removed",
    )
