"""Retries of one submission: response loss (A2), races (A4), restarts."""

from __future__ import annotations

from retryproof.conformance.context import TaskSet
from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.scenarios.common import (
    expect_created,
    expect_one_creation,
    expect_reuse_of,
    fired,
)

AFTER_COMMIT = "write_task.after_commit"


@scenario("A2-RESPONSE-LOSS")
def response_loss(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    lost = ctx.lose_response(submission_id, task)
    if lost is None:
        # The caller never sees this answer: the kit reads it only as evidence and
        # judges the retry against durable state, not against it.
        ctx.expect_ok(ctx.write_task(submission_id, task), "first call")
    else:
        _after_real_loss(ctx, before, submission_id, task)
        return
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    ctx.check_tasks(before, after, new=1)
    expect_reuse_of(ctx, retry, after, submission_id, "retry after the lost response")


def _after_real_loss(ctx: Context, before: TaskSet, submission_id: str, task: dict) -> None:
    """The connection closed before the answer was read (or the caller left): the
    first call may have made the effect or not. If durable state shows it within a
    call timeout, the retry must reuse it; if not, the runtime dropped the call with
    its connection, and the retry must create the one effect. Either way, one task."""
    if not ctx.conn.alive:  # over MCP stdio the server ends with its caller's input
        ctx.start()
    first = ctx.effect_of(submission_id, ctx.call_timeout)
    ctx.note("first_call_effect", None if first is None else first.get("task_id"))
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    if first is None:
        expect_created(ctx, retry, submission_id, task, "retry after a call the runtime dropped with its connection")
    else:
        expect_reuse_of(ctx, retry, after, submission_id, "retry after the lost response")
    ctx.check_tasks(before, after, new=1)


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


#: Races per A4 scenario, each with a fresh id: a runtime whose lock is skipped only
#: now and then (``sometimes-unlocked`` in the kit's own tests) often survives one
#: race of eight callers, and a lock table warmed by the first id survives any single
#: race; a race costs tens of milliseconds, so five are cheap.
A4_ROUNDS = 5


@scenario("A4-CONCURRENT", alone=True)
def concurrent(ctx: Context) -> None:
    ctx.start()
    state = ctx.tasks("before")
    with ctx.alone():
        for round_number in range(1, A4_ROUNDS + 1):
            submission_id, task = ctx.submission_id(), ctx.task()
            calls = ctx.concurrently([("write_task", ctx.write_task_args(submission_id, task))] * ctx.concurrency)
            state = expect_one_creation(
                ctx, state, calls, submission_id, f"round {round_number}: {ctx.concurrency} pipelined calls"
            )


@scenario("A4-MULTIPROCESS", alone=True)
def multiprocess(ctx: Context) -> None:
    ctx.start()
    state = ctx.tasks("before")
    processes = ctx.spawn(ctx.concurrency)
    with ctx.alone():
        for round_number in range(1, A4_ROUNDS + 1):
            submission_id, task = ctx.submission_id(), ctx.task()
            calls = ctx.in_parallel(processes, "write_task", ctx.write_task_args(submission_id, task))
            state = expect_one_creation(
                ctx,
                state,
                calls,
                submission_id,
                f"round {round_number}: {ctx.concurrency} processes on one state directory",
            )


@scenario("RESTART-REUSE")
def restart_reuse(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    for graceful in (True, False):
        ctx.restart(graceful=graceful)
        retry = ctx.write_task(submission_id, task)
        state = ctx.tasks("after graceful restart" if graceful else "after SIGKILL restart")
        expect_reuse_of(
            ctx, retry, state, submission_id, "retry after a graceful restart" if graceful else "retry after SIGKILL"
        )
    ctx.check_tasks(before, state, new=1)


@scenario("REUSE-EARLIER-ID")
def reuse_earlier_id(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    submission_id, task = ctx.submission_id(), ctx.task()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "first call")
    for number in (1, 2):
        later_id, later_task = ctx.submission_id(), ctx.task()
        expect_created(
            ctx, ctx.write_task(later_id, later_task), later_id, later_task, f"later creation {number} (another id)"
        )
    retry = ctx.write_task(submission_id, task)
    after = ctx.tasks("after")
    # The answer's task must be the one list_tasks holds for this id, not the newest.
    expect_reuse_of(ctx, retry, after, submission_id, "retry of the earliest id after two later creations")
    ctx.check_tasks(before, after, new=3)
