"""Approval probes P0-P3: the second field report's four faults, replayed.

Every count comes from ``list_effects``, never from a state an op returned."""

from __future__ import annotations

from retryproof.conformance.context import Context
from retryproof.conformance.scenarios import scenario
from retryproof.conformance.scenarios.approval_steps import (
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
    operation, view, count = audit_faulted(ctx, "P1", AUDIT_APPROVED, "approve")
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
    operation, _, count = audit_faulted(ctx, "P2", AUDIT_STARTED, "execute")
    audit_shows(ctx, operation, "after the fault", ["approved"])
    ctx.check(
        count == 0,
        f"the start audit failed, yet {count} effect(s) exist: an execution must not go on without its start audit",
    )
    ctx.restart()
    result = recovered(ctx, operation, "recover in a new process")
    count, calls = effects(ctx, operation, "after recovery")
    ctx.check(
        result["outcome"] == "re_executed",
        f"the effect of a plain executor is proven absent, so recovery must re-execute; it answered {result['outcome']}",
    )
    ctx.check(
        (count, calls) == (1, 1), f"after recovery: {count} effect(s) from {calls} executor call(s), expected 1 from 1"
    )
    after = operation_view(ctx, operation, "after recovery")
    ctx.check(
        (after["state"], after["audit_pending"]) == ("succeeded", False),
        f"recovery re-executed, yet the operation is {after['state']} with audit_pending {after['audit_pending']}",
    )
    audit_shows(
        ctx,
        operation,
        "after recovery",
        ["approved", "execution_started", "execution_completed"],
        late="execution_started",
    )


@scenario("P3-COMPLETION-AUDIT-FAULT")
def completion_audit_fault(ctx: Context) -> None:
    # Both controls in one faulted process: a fail failpoint fires on every append of
    # its event, and faulted() ends the scenario in error if it did not.
    ctx.start(failpoints={AUDIT_COMPLETED: "fail"})
    controls = {"no dedupe, same digest": approved(ctx, "plain"), "dedupe, same digest": approved(ctx, "dedupe")}
    faults = {
        control: faulted(ctx, operation, "execute", AUDIT_COMPLETED, f"{operation.executor}: after the fault")
        for control, operation in controls.items()
    }
    call, count, view = faults["no dedupe, same digest"]
    probe_row(ctx, "P3", caller_view(call), view["state"], count)
    for operation in controls.values():
        audit_shows(ctx, operation, f"{operation.executor}: after the fault", ["approved", "execution_started"])

    ctx.restart()
    recoveries = {}
    for control, operation in controls.items():
        result = recovered(ctx, operation, f"{operation.executor}: recover in a new process")
        after, calls = effects(ctx, operation, f"{operation.executor}: after recovery")
        control_row(ctx, control, faults[control][1], after, calls, result["outcome"])
        recoveries[control] = (result, after)
    # Judged once both rows are in the evidence, so a failure still shows the table;
    # the effect count first, because a second effect is the harm.
    for control, operation in controls.items():
        (call, count, view), (result, after) = faults[control], recoveries[control]
        label = f"{operation.executor}: after the fault"
        ctx.check(
            count == 1, f"{operation.executor}: the completion audit follows the effect, yet list_effects holds {count}"
        )
        ctx.check(
            after == 1,
            f"{operation.executor}: new-process recovery made the effect count {after}; an audit failure after the effect must never make the operation retry-eligible",
        )
        ctx.check(
            result["outcome"] == "reconciled",
            f"{operation.executor}: the effect exists, so recovery must reconcile; it answered {result['outcome']}",
        )
        audit_fault_reported(ctx, call, view, count, "execute", label)
        repaired = operation_view(ctx, operation, f"{operation.executor}: after recovery")
        ctx.check(
            (repaired["state"], repaired["audit_pending"]) == ("succeeded", False),
            f"{operation.executor}: reconciled, yet the operation is {repaired['state']} with audit_pending {repaired['audit_pending']}",
        )
        audit_shows(
            ctx,
            operation,
            f"{operation.executor}: after recovery",
            ["approved", "execution_started", "execution_completed"],
            late="execution_completed",
        )
