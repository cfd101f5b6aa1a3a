"""Approval recovery: a changed request is stale; an effect that may exist is never re-executed.

Every count comes from ``list_effects``, never from a state an op returned."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retryproof.conformance.context import Context, ScenarioFailed
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.approval_steps import (
    AFTER_CRASH,
    AFTER_EFFECT,
    AUDIT_COMPLETED,
    AUDIT_STARTED,
    CRASH_COLUMNS,
    CRASH_TABLE,
    Operation,
    approved,
    audit_log,
    audit_shows,
    control_row,
    effects,
    evidence_agrees,
    faulted,
    operation_view,
    recovered,
    refused,
    rolled_back,
    table_row,
)
from retryproof.conformance.scenarios.common import fired

# -- recovery outcomes ---------------------------------------------------------------


def changed(operation: Operation) -> dict[str, Any]:
    """The operation's request as recalculated after the approval: another digest."""
    return {**operation.request, "ref": operation.request["ref"] + "-recalculated"}


@scenario("RECOVERY-STALE-REQUEST", long=2)
def stale_request(ctx: Context) -> None:
    # Two operations: one stopped before its effect (the start audit failed), one
    # after it (the completion audit failed). Each fault needs its own process: the
    # start audit failing would stop the second before its effect.
    ctx.start(failpoints={AUDIT_STARTED: "fail"})
    before, after_effect = approved(ctx, "plain"), approved(ctx, "plain")
    *_, stopped = faulted(ctx, before, "execute", AUDIT_STARTED, "no effect: after the fault")
    # A start rolled back with its line leaves no execution_started line (APPROVAL-R27).
    start_undone = rolled_back(stopped, "approved")
    ctx.restart(failpoints={AUDIT_COMPLETED: "fail"})
    _, after_fault, calls_at_fault, at_fault = faulted(
        ctx, after_effect, "execute", AUDIT_COMPLETED, "effect: after the fault"
    )
    ctx.restart()
    result = recovered(ctx, after_effect, "effect: recover with a changed request", changed(after_effect))
    after, calls = effects(ctx, after_effect, "effect: after recovery")
    control_row(ctx, "changed digest", after_fault, after, calls, result["outcome"])
    ctx.check(after_fault == 1, f"the completion audit follows the effect, yet list_effects holds {after_fault}")
    ctx.check(
        result["outcome"] == "stale",
        f"the recalculated request has another digest, so recovery must answer stale; it answered {result['outcome']}",
    )
    ctx.check(calls == calls_at_fault, f"a stale recovery called the executor {calls - calls_at_fault} more time(s)")
    ctx.check(after == 1, f"a stale recovery changed the effect count to {after}")
    # A succeeded operation keeps succeeded (its effect is a fact); any other becomes stale.
    # What the fault left is P3's to judge, not this scenario's.
    state = operation_view(ctx, after_effect, "effect: after the stale recovery")["state"]
    expected = "succeeded" if at_fault["state"] == "succeeded" else "stale"
    ctx.check(
        state == expected,
        f"effect: the operation was {at_fault['state']} and recovery found it stale, so it must be {expected}; it is now {state}",
    )
    # marked_stale records the step that sets stale; a succeeded operation took none (APPROVAL-R13).
    logged = [line["event"] for line in audit_log(ctx, after_effect, "effect: after the stale recovery")]
    ctx.check(
        ("marked_stale" in logged) == (expected == "stale"),
        f"effect: the operation is {expected}, so its audit log must {'' if expected == 'stale' else 'not '}"
        f"hold marked_stale; it holds {logged}",
    )

    # The operation with no effect: the request identity is checked before anything runs.
    result = recovered(ctx, before, "no effect: recover with a changed request", changed(before))
    ctx.check(
        result["outcome"] == "stale",
        f"no effect: the recalculated request has another digest, so recovery must answer stale; it answered {result['outcome']}",
    )
    ctx.check(result["state"] == "stale", f"no effect: a stale recovery left state {result['state']}, expected stale")
    ctx.check(
        effects(ctx, before, "no effect: after recovery") == (0, 0), "no effect: a stale recovery called the executor"
    )
    audit_shows(
        ctx,
        before,
        "no effect: after recovery",
        ["approved", "marked_stale"] if start_undone else ["approved", "execution_started", "marked_stale"],
        late=None if start_undone else "execution_started",
    )

    # Later recoveries with the original request run nothing on either operation.
    again = recovered(ctx, before, "no effect: recover again with the original request")
    ctx.check(
        (again["outcome"], again["state"]) == ("stale", "stale"),
        f"no effect: a stale operation recovered with the original request answered {again['outcome']} ({again['state']}), expected stale",
    )
    ctx.check(
        effects(ctx, before, "no effect: after a second recovery") == (0, 0),
        "no effect: a later recovery ran the stale operation",
    )
    refused(
        ctx,
        ctx.call("execute", {"operation_id": before.operation_id}),
        "NOT_APPROVED",
        "no effect: execute of the stale operation",
    )
    ctx.check(effects(ctx, before, "no effect: after execute") == (0, 0), "no effect: execute ran the stale operation")
    again = recovered(ctx, after_effect, "effect: recover again with the original request")
    # A succeeded operation finished consistently; a stale one stays stale.
    outcome = "nothing_to_do" if expected == "succeeded" else "stale"
    ctx.check(
        (again["outcome"], again["state"]) == (outcome, expected),
        f"effect: the {expected} operation recovered with the original request answered {again['outcome']} ({again['state']}), expected {outcome} ({expected})",
    )
    ctx.check(
        effects(ctx, after_effect, "effect: after a second recovery") == (1, calls_at_fault),
        "effect: a later recovery ran the operation again",
    )


@scenario("RECOVERY-UNKNOWN-EFFECT", long=5)
def unknown_effect(ctx: Context) -> None:
    # One crash per executor, each in its own process: SIGKILL ends the process.
    ctx.start(failpoints={AFTER_EFFECT: "crash"})
    operations = {executor: approved(ctx, executor) for executor in AFTER_CRASH}
    for index, operation in enumerate(operations.values()):
        if index:
            ctx.restart(failpoints={AFTER_EFFECT: "crash"})
        fired(ctx, ctx.call("execute", {"operation_id": operation.operation_id}), AFTER_EFFECT)
    ctx.restart()
    crashed = {
        executor: (
            effects(ctx, operation, f"{executor}: after the crash"),
            operation_view(ctx, operation, f"{executor}: after the crash"),
        )
        for executor, operation in operations.items()
    }
    recoveries = {}
    for executor, operation in operations.items():
        result = recovered(ctx, operation, f"{executor}: recover in a new process")
        after, calls = effects(ctx, operation, f"{executor}: after recovery")
        table_row(
            ctx,
            CRASH_TABLE,
            CRASH_COLUMNS,
            [
                executor,
                crashed[executor][0][0],
                after,
                calls,
                AFTER_CRASH[executor]["outcome"],
                result["outcome"],
                result["state"],
            ],
        )
        recoveries[executor] = (result, after, calls)
    # Judged once every row is in the evidence, each executor on its own, so the reason
    # names every executor that failed; within one, the effect count first.
    problems = []
    for executor, ((count, calls_at_crash), view) in crashed.items():
        try:
            _judge_after_crash(ctx, operations[executor], count, calls_at_crash, view, recoveries[executor])
        except ScenarioFailed as exc:
            problems.append(str(exc))
    ctx.check(not problems, "; ".join(problems))

    opaque = operations["opaque"]
    calls = recoveries["opaque"][2]
    ctx.restart()
    # needs_verification persists, and wins over stale while the effect is unknown.
    for attempt, request in (
        ("recover once more in another process", None),
        ("recover with a changed request", changed(opaque)),
    ):
        result = recovered(ctx, opaque, f"opaque: {attempt}", request)
        ctx.check(
            (result["outcome"], result["state"]) == ("needs_verification", "needs_verification"),
            f"opaque: {attempt}: answered {result['outcome']} ({result['state']}); the effect is still unknown, so it needs verification",
        )
        ctx.check(
            effects(ctx, opaque, f"opaque: after {attempt}") == (1, calls),
            f"opaque: {attempt}: recovery executed although the effect is unknown",
        )
    refused(
        ctx,
        ctx.call("execute", {"operation_id": opaque.operation_id}),
        "NOT_APPROVED",
        "opaque: execute of an operation that needs verification",
    )
    ctx.check(
        effects(ctx, opaque, "opaque: after execute") == (1, calls),
        "opaque: execute ran an operation that needs verification",
    )


def _judge_after_crash(
    ctx: Context,
    operation: Operation,
    count: int,
    calls_at_crash: int,
    view: Mapping[str, Any],
    recovery: tuple[Mapping[str, Any], int, int],
) -> None:
    """One executor's recovery after a crash that followed its effect (approval.after_crash)."""
    executor = operation.executor
    result, after, calls = recovery
    ctx.check(
        count == 1, f"{executor}: the executor's effect was made before the crash, yet list_effects holds {count}"
    )
    ctx.check(
        after == 1,
        f"{executor}: recovery after a crash following the effect made the effect count {after}, expected 1",
    )
    outcome = AFTER_CRASH[executor]["outcome"]
    ctx.check(
        result["outcome"] == outcome,
        f"{executor}: {AFTER_CRASH[executor]['reason']}, so recovery must answer {outcome}; it answered {result['outcome']}",
    )
    state = "needs_verification" if outcome == "needs_verification" else "succeeded"
    ctx.check(
        result["state"] == state,
        f"{executor}: recovery answered {result['outcome']} with state {result['state']}, expected {state}",
    )
    # Reconciliation repairs the audit too: every step that happened has its line.
    last = "verification_required" if outcome == "needs_verification" else "execution_completed"
    audit_shows(ctx, operation, f"{executor}: after recovery", ["approved", "execution_started", last])
    if executor == "opaque":
        ctx.check(
            calls == calls_at_crash,
            f"opaque: recovery called the executor {calls - calls_at_crash} more time(s) although the effect is unknown",
        )
    evidence_agrees(ctx, view, count, f"{executor}: after the crash")
