"""One submission, judged on its own: creation, digests, normalization, input checks."""

from __future__ import annotations

from conformance.scenarios import Context, scenario
from conformance.scenarios.common import expect_created, expect_identity
from spec.digest import canonical_task


@scenario("WT-CREATE")
def create(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    result = expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    listed = expect_identity(ctx, result, after, submission_id, "first call")
    ctx.check(listed.get("request_digest") == result["request_digest"], "list_tasks holds another request_digest than the result")
    stored = ctx.expect_ok(ctx.call("read_task", {"task_id": result["task_id"]}), "read_task").result
    ctx.check(stored.get("task_id") == result["task_id"], "read_task answered another task_id")
    ctx.check(canonical_task(stored.get("task")) == canonical_task(task), "the stored task is not the submitted task (canonically compared)")
    ctx.check(stored.get("request_digest") == result["request_digest"], "read_task holds another request_digest than the result")
