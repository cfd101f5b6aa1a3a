"""Paths that must keep their old behaviour: legacy calls and write_report dedup."""

from __future__ import annotations

from retryproof.conformance.scenarios import Context, scenario
from retryproof.conformance.scenarios.common import expect_created


# Its calls carry no key, yet it may share: a turn holds the server alone, so the tasks
# its listing after holds beyond its listing before are its own calls' doing.
@scenario("LEGACY-NO-ID", shares_server=True)
def legacy(ctx: Context) -> None:
    ctx.start()
    before = ctx.tasks("before")
    task = ctx.task()
    ids = []
    for attempt in ("first legacy call", "second legacy call"):
        result = ctx.expect_disposition(ctx.write_task(None, task), "created", attempt)
        ctx.check(result.get("idempotent") is False, f"{attempt}: the legacy path must say idempotent false")
        ctx.check(
            result.get("action_taken") is True and result.get("client_submission_id") is None,
            f"{attempt}: a legacy result says action_taken true and client_submission_id null",
        )
        ids.append(result["task_id"])
    ctx.check(ids[0] != ids[1], "two legacy calls answered one task id")
    submission_id = ctx.submission_id()
    expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "the id path beside it")
    ctx.check_tasks(before, ctx.tasks("after"), new=3)


@scenario("WRITE-REPORT-DEDUP")
def write_report(ctx: Context) -> None:
    ctx.start()
    submission_id, task = ctx.submission_id(), ctx.task()
    task_id = expect_created(ctx, ctx.write_task(submission_id, task), submission_id, task, "write_task")["task_id"]
    report = {"client_submission_id": ctx.submission_id(), "task_id": task_id, "content": f"done: {task['subject']}"}
    first = ctx.expect_ok(ctx.call("write_report", report), "first write_report")
    ctx.check(first.get("deduplicated") is False, "the first write_report says deduplicated")
    for attempt, restart in (("retry", False), ("retry after SIGKILL", True)):
        if restart:
            ctx.restart()
        again = ctx.expect_ok(ctx.call("write_report", report), attempt)
        ctx.check(again.get("deduplicated") is True, f"{attempt}: write_report did not deduplicate")
        ctx.check(
            again.get("report_id") == first.get("report_id"),
            f"{attempt}: answered report {again.get('report_id')}, first was {first.get('report_id')}",
        )
    # The id is bound to its first report: another task or content under it is
    # invalid_request, and a task that does not exist is not_found; neither writes.
    other_id, other_task = ctx.submission_id(), ctx.task()
    other_task_id = expect_created(
        ctx, ctx.write_task(other_id, other_task), other_id, other_task, "a second write_task"
    )["task_id"]
    rebound = (
        (
            "the same report id with other content",
            {**report, "content": report["content"] + " (edited)"},
            "invalid_request",
        ),
        ("the same report id on another task", {**report, "task_id": other_task_id}, "invalid_request"),
        (
            "a report on a task that does not exist",
            {**report, "client_submission_id": ctx.submission_id(), "task_id": "TASK-999999999"},
            "not_found",
        ),
    )
    for what, args, code in rebound:
        ctx.expect_error(ctx.call("write_report", args), code, what)
    # Deduplication is by id, never by content: the same report under a new id is a
    # new intent and a new report.
    second = ctx.expect_ok(
        ctx.call("write_report", {**report, "client_submission_id": ctx.submission_id()}),
        "the same report under a new id",
    )
    ctx.check(
        second.get("deduplicated") is False,
        "the same content under a new id was deduplicated: reports are deduplicated by content, not by id",
    )
    ctx.check(
        second.get("report_id") != first.get("report_id"),
        f"a new id answered the first report {first.get('report_id')}",
    )
    reports = ctx.expect_ok(ctx.call("list_reports"), "list_reports").get("reports", [])
    ctx.note("reports", len(reports))
    listed = sorted(str(item.get("report_id")) for item in reports)
    expected = sorted(str(item.get("report_id")) for item in (first, second))
    ctx.check(
        listed == expected,
        f"list_reports holds {listed}, expected exactly {expected}: a rejected write_report wrote, or a report is missing",
    )
