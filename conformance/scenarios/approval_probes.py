"""Approval probes P0-P3: the second field report's four faults, replayed.

Every count comes from ``list_effects``, never from a state an op returned."""

from __future__ import annotations

from retryproof.conformance.context import Context
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.approval_steps import (
    AFTER_CRASH,
    AUDIT_APPROVED,
    AUDIT_COMPLETED,
    AUDIT_STARTED,
    approved,
    audit_fault_reported,
    audit_faulted,
    audit_shows,
    caller_view,
    control_row,
    effects,
    evidence_agrees,
    faulted,
    operation_view,
    probe_row,
    recovered,
    refused,
)


@scenario("P0-CONSUMED")
def consumed(ctx: Context) -> None:
    ctx.start()
    operation = approved(ctx, "plain")
    first = ctx.expect_ok(ctx.call("execute", {"operation_id": operation.operation_id}), "first execute")
    ctx.check(
        first.get("state") == "succeeded", f"first execute answered state {first.get('state')}, expected succeeded"
    )
    again = ctx.call("execute", {"operation_id": operation.operation_id})
    refused(ctx, again, "APPROVAL_ALREADY_CONSUMED", "execute after success")
    ctx.check(
        effects(ctx, operation, "after the second execute") == (1, 1),
        "executing a succeeded operation again must not call the executor",
    )
    ctx.restart()
    refused(
        ctx,
        ctx.call("execute", {"operation_id": operation.operation_id}),
        "APPROVAL_ALREADY_CONSUMED",
        "execute after a restart",
    )
    count, _ = effects(ctx, operation, "after the restart")
    ctx.check(count == 1, f"list_effects holds {count} effects after the restart, expected 1")
    view = operation_view(ctx, operation, "after the restart")
    probe_row(ctx, "P0", again.code or caller_view(again), view["state"], count)
    evidence_agrees(ctx, view, count, "after the restart")


@scenario("P1-APPROVAL-AUDIT-FAULT")
def approval_audit_fault(ctx: Context) -> None:
    operation, view, count, _ = audit_faulted(ctx, "P1", AUDIT_APPROVED, "approve")
    ctx.check(count == 0, f"approving made {count} effect(s)")
    # The state the runtime reports must be the truth: approved executes, proposed
    # (an approval rolled back with its audit) is refused. The error alone says neither.
    ctx.check(
        view["state"] in ("approved", "proposed"),
        f"after a failed approval audit the state is {view['state']}, expected approved or proposed",
    )
    ctx.restart()
    execute = ctx.call("execute", {"operation_id": operation.operation_id})
    if view["state"] == "approved":
        ctx.expect_ok(execute, "execute of the operation reported approved, in a new process")
        expected = 1
    else:
        refused(ctx, execute, "NOT_APPROVED", "execute of the operation reported proposed, in a new process")
        expected = 0
    count, _ = effects(ctx, operation, "after execute in a new process")
    ctx.check(
        count == expected, f"after execute in a new process list_effects holds {count} effects, expected {expected}"
    )
    after = operation_view(ctx, operation, "after execute in a new process")
    # execute appends the approval audit it still owes before it runs anything.
    ctx.check(
        after["audit_pending"] is False,
        f"after execute in a new process the operation is {after['state']} with audit_pending true; the owed approval audit must be appended",
    )
    if view["state"] == "approved":
        audit_shows(
            ctx,
            operation,
            "after execute in a new process",
            ["approved", "execution_started", "execution_completed"],
            late="approved",
        )
    else:
        names = audit_shows(ctx, operation, "after execute in a new process", [])
        ctx.check(
            "approved" not in names,
            f"after execute in a new process: the approval was rolled back with its audit, yet the audit log holds {names}",
        )


@scenario("P2-START-AUDIT-FAULT")
def start_audit_fault(ctx: Context) -> None:
    operation, _, count, undone = audit_faulted(ctx, "P2", AUDIT_STARTED, "execute")
    names = audit_shows(ctx, operation, "after the fault", ["approved"])
    ctx.check(
        count == 0,
        f"the start audit failed, yet {count} effect(s) exist: an execution must not go on without its start audit",
    )
    if undone:
        # APPROVAL-R27: the start rolled back with its line; the operation is approved.
        ctx.check(
            "execution_started" not in names,
            f"after the fault: the operation is approved with no audit pending (the start rolled back), yet the audit log holds {names}",
        )
    ctx.restart()
    result = recovered(ctx, operation, "recover in a new process")
    if undone:
        ctx.check(
            (result["outcome"], result["state"]) == ("nothing_to_do", "approved"),
            f"the start rolled back, so the operation is approved and executing it is the caller's decision: recovery must "
            f"answer nothing_to_do (approved); it answered {result['outcome']} ({result['state']})",
        )
        ctx.check(effects(ctx, operation, "after recovery") == (0, 0), "recovery of an approved operation ran it")
        ctx.expect_ok(
            ctx.call("execute", {"operation_id": operation.operation_id}), "execute of the approved operation"
        )
        label = "after execute in a new process"
    else:
        ctx.check(
            result["outcome"] == "re_executed",
            f"the effect of a plain executor is proven absent, so recovery must re-execute; it answered {result['outcome']}",
        )
        label = "after recovery"
    count, calls = effects(ctx, operation, label)
    ctx.check((count, calls) == (1, 1), f"{label}: {count} effect(s) from {calls} executor call(s), expected 1 from 1")
    after = operation_view(ctx, operation, label)
    ctx.check(
        (after["state"], after["audit_pending"]) == ("succeeded", False),
        f"{label}: the operation is {after['state']} with audit_pending {after['audit_pending']}, expected succeeded with no audit owed",
    )
    # A start that stood while its append failed owes a repaired line; a rolled-back
    # one left nothing to repair, and the new attempt's lines are its own (APPROVAL-R29).
    audit_shows(
        ctx,
        operation,
        label,
        ["approved", "execution_started", "execution_completed"],
        late=None if undone else "execution_started",
    )


# Each executor of the spec, in the order of the field report's controls (plain, dedupe)
# and then opaque; the two controls also fill its table.
P3_EXECUTORS = {"plain": "no dedupe, same digest", "dedupe": "dedupe, same digest", "opaque": None}


@scenario("P3-COMPLETION-AUDIT-FAULT")
def completion_audit_fault(ctx: Context) -> None:
    # Every executor in one faulted process: a fail failpoint fires on every append of
    # its event, and faulted() ends the scenario in error if it did not.
    ctx.start(failpoints={AUDIT_COMPLETED: "fail"})
    operations = {executor: approved(ctx, executor) for executor in P3_EXECUTORS}
    faults = {
        executor: faulted(ctx, operation, "execute", AUDIT_COMPLETED, f"{executor}: after the fault")
        for executor, operation in operations.items()
    }
    call, count, _, view = faults["plain"]
    probe_row(ctx, "P3", caller_view(call), view["state"], count)
    for executor, operation in operations.items():
        audit_shows(ctx, operation, f"{executor}: after the fault", ["approved", "execution_started"])

    ctx.restart()
    recoveries = {}
    for executor, operation in operations.items():
        result = recovered(ctx, operation, f"{executor}: recover in a new process")
        after, calls = effects(ctx, operation, f"{executor}: after recovery")
        control = P3_EXECUTORS[executor]
        if control:
            control_row(ctx, control, faults[executor][1], after, calls, result["outcome"])
        recoveries[executor] = (result, after, calls)
    # Judged once every row is in the evidence, so a failure still shows the table;
    # the effect count first, because a second effect is the harm.
    for executor, operation in operations.items():
        (call, count, calls_at_fault, view), (result, after, calls) = faults[executor], recoveries[executor]
        ctx.check(count == 1, f"{executor}: the completion audit follows the effect, yet list_effects holds {count}")
        ctx.check(
            after == 1,
            f"{executor}: new-process recovery made the effect count {after}; an audit failure after the effect must never make the operation retry-eligible",
        )
        if audit_fault_reported(ctx, call, view, count, "execute", f"{executor}: after the fault", "executing"):
            # APPROVAL-R28: the completion rolled back with its line, so the effect is
            # made and not recorded, as after a crash: recovery must treat it as unknown.
            outcome, why = AFTER_CRASH[executor]["outcome"], AFTER_CRASH[executor]["reason"]
            ctx.check(
                result["outcome"] == outcome,
                f"{executor}: the completion rolled back with its line after the effect, and {why}, so recovery must "
                f"answer {outcome}; it answered {result['outcome']}",
            )
            again = 1 if executor == "dedupe" else 0  # only a deduplicating executor may be called again
            ctx.check(
                calls - calls_at_fault <= again,
                f"{executor}: recovery called the executor {calls - calls_at_fault} more time(s) after a completion "
                f"rolled back with its line; at most {again} is safe",
            )
        else:
            outcome = "reconciled"
            ctx.check(
                result["outcome"] == outcome,
                f"{executor}: the record keeps the effect, so recovery must reconcile; it answered {result['outcome']}",
            )
        state = "needs_verification" if outcome == "needs_verification" else "succeeded"
        repaired = operation_view(ctx, operation, f"{executor}: after recovery")
        ctx.check(
            (repaired["state"], repaired["audit_pending"]) == (state, False),
            f"{executor}: recovery answered {result['outcome']}, yet the operation is {repaired['state']} with audit_pending {repaired['audit_pending']}",
        )
        last = "verification_required" if state == "needs_verification" else "execution_completed"
        # The completion line repairs the first attempt's only when recovery called no
        # executor; a dedupe executor called again appends its own (APPROVAL-R29).
        audit_shows(
            ctx,
            operation,
            f"{executor}: after recovery",
            ["approved", "execution_started", last],
            late="execution_completed" if last == "execution_completed" and calls == calls_at_fault else None,
        )
