"""Retries of one submission: response loss (A2), races (A4), restarts."""

from __future__ import annotations

from conformance.scenarios import Context, scenario
from conformance.scenarios.common import expect_created, expect_reuse_of, fired

AFTER_COMMIT = "write_task.after_commit"


@scenario("A2-RESPONSE-LOSS")
def response_loss(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    # The caller never sees this answer: the kit reads it only as evidence and
    # judges the retry against durable state, not against it.
    ctx.expect_ok(ctx.write_task(submission_id, task), "first call")
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    expect_reuse_of(ctx, retry, after, submission_id, "retry after the lost response")


@scenario("A2-CRASH-BEFORE-RESPONSE")
def crash_before_response(ctx: Context) -> None:
    ctx.start(failpoints={AFTER_COMMIT: "crash"})
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    fired(ctx, ctx.write_task(submission_id, task), AFTER_COMMIT)
    ctx.restart()
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    expect_reuse_of(ctx, retry, after, submission_id, "retry after the crash")
    ctx.receipt(submission_id, "after retry")
