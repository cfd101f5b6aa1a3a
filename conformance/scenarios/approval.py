"""Approval recovery: the second field report's four probes and its restart table.

Every count comes from ``list_effects`` (the effect evidence), never from a state an
op returned. Each scenario also puts its rows of the report's two tables into its
evidence (``tables``), beside the field report's figures for the same row, so a
reviewer reads "seed" and "this runtime" side by side.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from conformance.context import Context, Unjudgeable
from conformance.outcome import Call
from conformance.scenarios import scenario
from conformance.scenarios.common import fired
from spec import load_spec

PROBE_TABLE = "Approval probes P0-P3"
PROBE_COLUMNS = ["probe", "fault", "caller (field report)", "caller", "state (field report)", "state", "effects (field report)", "effects"]
# probe -> (fault location, caller's view, persisted state, effects): the field report's figures.
PROBES_SEED = {
    "P0": ("execute again after success", "APPROVAL_ALREADY_CONSUMED", "succeeded", 1),
    "P1": ("approval audit append fails", "error", "approved", 0),
    "P2": ("start audit append fails", "error", "executing", 0),
    "P3": ("completion audit append fails after the effect", "error", "failed", 1),
}
CONTROL_TABLE = "Executor controls: fault, then recovery in a new process"
CONTROL_COLUMNS = [
    "control",
    "effects after fault (field report)",
    "effects after fault",
    "after recovery (field report)",
    "after recovery",
    "calls (field report)",
    "calls",
    "recovery (field report)",
    "recovery",
]
# control -> (effects after fault, after recovery, executor calls, recovery result).
CONTROLS_SEED = {
    "no dedupe, same digest": (1, 2, 2, "succeeded"),
    "dedupe, same digest": (1, 1, 2, "succeeded"),
    "changed digest": (1, 1, 1, "APPROVAL_STALE"),
}

CRASH_TABLE = "Crash after the effect, then recovery in a new process"
CRASH_COLUMNS = ["executor", "effects after crash", "after recovery", "calls", "recovery (spec)", "recovery", "state"]
# executor -> the outcome the spec decides after a crash that follows the effect.
EXPECTED_AFTER_CRASH = {"opaque": "needs_verification", "plain": "reconciled", "dedupe": "reconciled"}
OUTCOME_REASON = {
    "opaque": "an opaque effect cannot be confirmed and the executor cannot deduplicate",
    "plain": "a plain executor's effect is observable and exists",
    "dedupe": "the dedupe executor, called again under the same key, finds its effect",
}

# event -> the state its step sets: every audit line must say it (approval.audit_events).
AUDIT_STATES = load_spec()["approval"]["audit_events"]

AUDIT_APPROVED = "approval.audit_approved"
AUDIT_STARTED = "approval.audit_started"
AUDIT_COMPLETED = "approval.audit_completed"
AFTER_EFFECT = "approval.after_effect"


@dataclass(frozen=True)
class Operation:
    """One proposed operation, as the kit knows it."""

    operation_id: str
    operation_key: str
    request: Mapping[str, Any]
    executor: str


def proposed(ctx: Context, executor: str) -> Operation:
    """A fresh operation with a seeded key and request."""
    suffix = "".join(ctx.rng.choice(string.ascii_lowercase + string.digits) for _ in range(10))
    key = f"rp-{ctx.entry.id.lower()}-{executor}-{suffix}"
    request = {"action": "append-marker", "target": f"repo-{suffix}", "ref": f"release/{ctx.rng.randrange(100)}"}
    result = ctx.expect_ok(ctx.call("propose", {"operation_key": key, "request": request, "executor": executor}), "propose").result
    return Operation(result["operation_id"], key, request, executor)


def approved(ctx: Context, executor: str) -> Operation:
    operation = proposed(ctx, executor)
    ctx.expect_ok(ctx.call("approve", {"operation_id": operation.operation_id}), "approve")
    return operation


def effects(ctx: Context, operation: Operation, label: str) -> tuple[int, int]:
    """``(effects, executor_calls)`` from the runtime's effect evidence, noted as evidence."""
    result = ctx.expect_ok(ctx.call("list_effects", {"operation_key": operation.operation_key}), "list_effects").result
    ids = [str(effect.get("effect_id")) for effect in result["effects"]]
    ctx.check(len(set(ids)) == len(ids), f"list_effects names one effect twice: {ids}")
    ctx.evidence.setdefault("effects", {})[label] = {"effects": len(ids), "effect_ids": ids, "executor_calls": result["executor_calls"]}
    return len(ids), result["executor_calls"]


def operation_view(ctx: Context, operation: Operation, label: str) -> Mapping[str, Any]:
    """``get_operation``, noted as evidence under ``label``."""
    view = ctx.expect_ok(ctx.call("get_operation", {"operation_id": operation.operation_id}), "get_operation").result
    ctx.evidence.setdefault("operations", {})[label] = dict(view)
    return view


def evidence_agrees(ctx: Context, view: Mapping[str, Any], effect_count: int, label: str) -> None:
    """The runtime's effect evidence against the authoritative count: ``absent``
    while an effect exists is the lie that makes a second effect look safe;
    ``present`` with none is a record that invents one."""
    evidence = view["effect_evidence"]
    ctx.check(not (effect_count and evidence == "absent"), f"{label}: effect_evidence says absent, but list_effects holds {effect_count} effect(s)")
    ctx.check(not (not effect_count and evidence == "present"), f"{label}: effect_evidence says present, but list_effects holds none")


def recovered(ctx: Context, operation: Operation, what: str, request: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    args: dict[str, Any] = {"operation_id": operation.operation_id}
    if request is not None:
        args["request"] = dict(request)
    result = ctx.expect_ok(ctx.call("recover", args), what).result
    ctx.evidence.setdefault("recoveries", []).append({"what": what, **result})
    return result


def caller_view(call: Call) -> str:
    """What the caller saw, in the field report's terms."""
    if call.result is not None:
        return f"ok ({call.result.get('state')})"
    if call.code is not None:
        return f"error ({call.code})"
    return "no answer"


def table_row(ctx: Context, title: str, columns: list[str], row: list[Any]) -> None:
    """One row of a report table; writers merge tables that share a title."""
    ctx.evidence.setdefault("tables", []).append({"title": title, "columns": columns, "rows": [row]})


def probe_row(ctx: Context, probe: str, caller: str, state: str, effect_count: int) -> None:
    fault, seed_caller, seed_state, seed_effects = PROBES_SEED[probe]
    table_row(ctx, PROBE_TABLE, PROBE_COLUMNS, [probe, fault, seed_caller, caller, seed_state, state, seed_effects, effect_count])


def control_row(ctx: Context, control: str, after_fault: int, after_recovery: int, calls: int, outcome: str) -> None:
    seed = CONTROLS_SEED[control]
    table_row(ctx, CONTROL_TABLE, CONTROL_COLUMNS, [control, seed[0], after_fault, seed[1], after_recovery, seed[2], calls, seed[3], outcome])



def refused(ctx: Context, call: Call, code: str, what: str) -> None:
    """A typed refusal ``code``; anything else is named in approval terms (the state an
    ``ok`` answered, or the other error)."""
    if not call.answered:
        raise Unjudgeable(f"{what}: no answer ({call.message})")
    ctx.check(call.code == code, f"{what}: expected error {code}, got {caller_view(call)}")


def faulted(ctx: Context, operation: Operation, op: str, failpoint: str, label: str) -> tuple[Call, int, Mapping[str, Any]]:
    """Call ``op`` with ``failpoint=fail`` armed: ``(call, effects, get_operation)`` after it.

    A ``fail`` failpoint fires every time its step is reached in the process
    (protocol_spec.decisions). A success while no audit is pending means it did not
    fire here, so nothing about the window can be judged: the scenario ends in error.
    """
    call = ctx.call(op, {"operation_id": operation.operation_id})
    count, _ = effects(ctx, operation, label)
    view = operation_view(ctx, operation, label)
    if not call.answered:
        raise Unjudgeable(f"{op} ({operation.executor}): no answer with {failpoint}=fail armed ({call.message})")
    if call.kind == "ok" and view["audit_pending"] is False:
        raise Unjudgeable(
            f"{op} ({operation.executor}): the failpoint did not fire: {failpoint}=fail is armed, yet the call answered "
            f"{caller_view(call)} and get_operation shows no audit pending; the window was never tested"
        )
    return call, count, view


def audit_fault_reported(ctx: Context, call: Call, view: Mapping[str, Any], count: int, op: str, label: str) -> None:
    """APR-2: the caller is told (AUDIT_WRITE_FAILED, never a success), and the record
    keeps the owed audit while the step stands. Only an approval rolled back with its
    audit (P1's ``proposed``) owes nothing."""
    ctx.check(call.kind != "ok", f"{label}: {op} answered {caller_view(call)} although its audit append failed; the caller must be told (AUDIT_WRITE_FAILED)")
    refused(ctx, call, "AUDIT_WRITE_FAILED", f"{label}: {op}")
    if view["state"] != "proposed":
        ctx.check(view["audit_pending"] is True, f"{label}: the audit append failed and the operation is {view['state']}, yet get_operation says audit_pending false; the record must keep the owed audit")
    evidence_agrees(ctx, view, count, label)


def audit_log(ctx: Context, operation: Operation, label: str) -> list[Mapping[str, Any]]:
    """``list_audit``, noted as evidence; each line must carry the state its step sets."""
    events = ctx.expect_ok(ctx.call("list_audit", {"operation_id": operation.operation_id}), "list_audit").result["events"]
    ctx.evidence.setdefault("audit", {})[label] = [dict(line) for line in events]
    for line in events:
        expected = AUDIT_STATES[line["event"]]
        ctx.check(line["state"] == expected, f"{label}: the audit line {line['event']} says state {line['state']}, but that step sets {expected}")
    return events


def audit_shows(ctx: Context, operation: Operation, label: str, steps: Sequence[str], late: str | None = None) -> list[str]:
    """The audit log holds every one of ``steps``, first lines in that order; the first
    line of ``late`` (the event whose append failed) is marked repaired. A repeated
    line is allowed, a missing one is the audit loss APR-2 and APR-3 forbid."""
    events = audit_log(ctx, operation, label)
    names = [line["event"] for line in events]
    missing = [step for step in steps if step not in names]
    ctx.check(not missing, f"{label}: the audit log lacks {', '.join(missing)} (it holds {names}); a step that happened lost its audit line")
    firsts = [names.index(step) for step in steps if step in names]
    ctx.check(firsts == sorted(firsts), f"{label}: the audit log holds {names}, not in the order of the steps {list(steps)}")
    if late in names:
        first = events[names.index(late)]
        ctx.check(first["repaired"] is True, f"{label}: the {late} append failed, so the first {late} line is a late one and must be marked repaired true; it says {first['repaired']}")
    return names


def audit_faulted(ctx: Context, probe: str, failpoint: str, op: str) -> tuple[Operation, Mapping[str, Any], int]:
    """P1's and P2's start: a process with ``failpoint=fail``, a plain operation that
    ``op`` is next for, ``op`` faulted, the probe's row and APR-2's checks."""
    ctx.start(failpoints={failpoint: "fail"})
    operation = (proposed if op == "approve" else approved)(ctx, "plain")
    call, count, view = faulted(ctx, operation, op, failpoint, "after the fault")
    probe_row(ctx, probe, caller_view(call), view["state"], count)
    audit_fault_reported(ctx, call, view, count, op, "after the fault")
    return operation, view, count


# -- the probes ----------------------------------------------------------------------


@scenario("P0-CONSUMED")
def consumed(ctx: Context) -> None:
    ctx.start()
    operation = approved(ctx, "plain")
    first = ctx.expect_ok(ctx.call("execute", {"operation_id": operation.operation_id}), "first execute").result
    ctx.check(first.get("state") == "succeeded", f"first execute answered state {first.get('state')}, expected succeeded")
    again = ctx.call("execute", {"operation_id": operation.operation_id})
    refused(ctx, again, "APPROVAL_ALREADY_CONSUMED", "execute after success")
    ctx.check(effects(ctx, operation, "after the second execute") == (1, 1), "executing a succeeded operation again must not call the executor")
    ctx.restart()
    refused(ctx, ctx.call("execute", {"operation_id": operation.operation_id}), "APPROVAL_ALREADY_CONSUMED", "execute after a restart")
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
    ctx.check(view["state"] in ("approved", "proposed"), f"after a failed approval audit the state is {view['state']}, expected approved or proposed")
    ctx.restart()
    execute = ctx.call("execute", {"operation_id": operation.operation_id})
    if view["state"] == "approved":
        ctx.expect_ok(execute, "execute of the operation reported approved, in a new process")
        expected = 1
    else:
        refused(ctx, execute, "NOT_APPROVED", "execute of the operation reported proposed, in a new process")
        expected = 0
    count, _ = effects(ctx, operation, "after execute in a new process")
    ctx.check(count == expected, f"after execute in a new process list_effects holds {count} effects, expected {expected}")
    after = operation_view(ctx, operation, "after execute in a new process")
    # execute appends the approval audit it still owes before it runs anything.
    ctx.check(after["audit_pending"] is False, f"after execute in a new process the operation is {after['state']} with audit_pending true; the owed approval audit must be appended")
    if view["state"] == "approved":
        audit_shows(ctx, operation, "after execute in a new process", ["approved", "execution_started", "execution_completed"], late="approved")
    else:
        names = audit_shows(ctx, operation, "after execute in a new process", [])
        ctx.check("approved" not in names, f"after execute in a new process: the approval was rolled back with its audit, yet the audit log holds {names}")


@scenario("P2-START-AUDIT-FAULT")
def start_audit_fault(ctx: Context) -> None:
    operation, _, count = audit_faulted(ctx, "P2", AUDIT_STARTED, "execute")
    audit_shows(ctx, operation, "after the fault", ["approved"])
    ctx.check(count == 0, f"the start audit failed, yet {count} effect(s) exist: an execution must not go on without its start audit")
    ctx.restart()
    result = recovered(ctx, operation, "recover in a new process")
    count, calls = effects(ctx, operation, "after recovery")
    ctx.check(result["outcome"] == "re_executed", f"the effect of a plain executor is proven absent, so recovery must re-execute; it answered {result['outcome']}")
    ctx.check((count, calls) == (1, 1), f"after recovery: {count} effect(s) from {calls} executor call(s), expected 1 from 1")
    after = operation_view(ctx, operation, "after recovery")
    ctx.check((after["state"], after["audit_pending"]) == ("succeeded", False), f"recovery re-executed, yet the operation is {after['state']} with audit_pending {after['audit_pending']}")
    audit_shows(ctx, operation, "after recovery", ["approved", "execution_started", "execution_completed"], late="execution_started")


@scenario("P3-COMPLETION-AUDIT-FAULT")
def completion_audit_fault(ctx: Context) -> None:
    # Both controls in one faulted process: a fail failpoint fires on every append of
    # its event, and faulted() ends the scenario in error if it did not.
    ctx.start(failpoints={AUDIT_COMPLETED: "fail"})
    controls = {"no dedupe, same digest": approved(ctx, "plain"), "dedupe, same digest": approved(ctx, "dedupe")}
    faults = {control: faulted(ctx, operation, "execute", AUDIT_COMPLETED, f"{operation.executor}: after the fault") for control, operation in controls.items()}
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
        ctx.check(count == 1, f"{operation.executor}: the completion audit follows the effect, yet list_effects holds {count}")
        ctx.check(after == 1, f"{operation.executor}: new-process recovery made the effect count {after}; an audit failure after the effect must never make the operation retry-eligible")
        ctx.check(result["outcome"] == "reconciled", f"{operation.executor}: the effect exists, so recovery must reconcile; it answered {result['outcome']}")
        audit_fault_reported(ctx, call, view, count, "execute", label)
        repaired = operation_view(ctx, operation, f"{operation.executor}: after recovery")
        ctx.check(
            (repaired["state"], repaired["audit_pending"]) == ("succeeded", False),
            f"{operation.executor}: reconciled, yet the operation is {repaired['state']} with audit_pending {repaired['audit_pending']}",
        )
        audit_shows(ctx, operation, f"{operation.executor}: after recovery", ["approved", "execution_started", "execution_completed"], late="execution_completed")
        refused(ctx, ctx.call("execute", {"operation_id": operation.operation_id}), "APPROVAL_ALREADY_CONSUMED", f"{operation.executor}: execute after reconciliation")
        ctx.check(effects(ctx, operation, f"{operation.executor}: after execute again")[0] == 1, f"{operation.executor}: a refused execute made an effect")


# -- recovery outcomes ---------------------------------------------------------------


def changed(operation: Operation) -> dict[str, Any]:
    """The operation's request as recalculated after the approval: another digest."""
    return {**operation.request, "ref": operation.request["ref"] + "-recalculated"}


@scenario("RECOVERY-STALE-REQUEST")
def stale_request(ctx: Context) -> None:
    # Two operations: one stopped before its effect (the start audit failed), one
    # after it (the completion audit failed). Each fault needs its own process: the
    # start audit failing would stop the second before its effect.
    ctx.start(failpoints={AUDIT_STARTED: "fail"})
    before, after_effect = approved(ctx, "plain"), approved(ctx, "plain")
    faulted(ctx, before, "execute", AUDIT_STARTED, "no effect: after the fault")
    ctx.restart(failpoints={AUDIT_COMPLETED: "fail"})
    _, after_fault, at_fault = faulted(ctx, after_effect, "execute", AUDIT_COMPLETED, "effect: after the fault")
    calls_at_fault = effects(ctx, after_effect, "effect: after the fault")[1]
    ctx.restart()
    result = recovered(ctx, after_effect, "effect: recover with a changed request", changed(after_effect))
    after, calls = effects(ctx, after_effect, "effect: after recovery")
    control_row(ctx, "changed digest", after_fault, after, calls, result["outcome"])
    ctx.check(after_fault == 1, f"the completion audit follows the effect, yet list_effects holds {after_fault}")
    ctx.check(result["outcome"] == "stale", f"the recalculated request has another digest, so recovery must answer stale; it answered {result['outcome']}")
    ctx.check(calls == calls_at_fault, f"a stale recovery called the executor {calls - calls_at_fault} more time(s)")
    ctx.check(after == 1, f"a stale recovery changed the effect count to {after}")
    # A succeeded operation keeps succeeded (its effect is a fact); any other becomes stale.
    # What the fault left is P3's to judge, not this scenario's.
    state = operation_view(ctx, after_effect, "effect: after the stale recovery")["state"]
    expected = "succeeded" if at_fault["state"] == "succeeded" else "stale"
    ctx.check(state == expected, f"effect: the operation was {at_fault['state']} and recovery found it stale, so it must be {expected}; it is now {state}")

    # The operation with no effect: the request identity is checked before anything runs.
    result = recovered(ctx, before, "no effect: recover with a changed request", changed(before))
    ctx.check(result["outcome"] == "stale", f"no effect: the recalculated request has another digest, so recovery must answer stale; it answered {result['outcome']}")
    ctx.check(result["state"] == "stale", f"no effect: a stale recovery left state {result['state']}, expected stale")
    ctx.check(effects(ctx, before, "no effect: after recovery") == (0, 0), "no effect: a stale recovery called the executor")
    audit_shows(ctx, before, "no effect: after recovery", ["approved", "execution_started", "marked_stale"], late="execution_started")

    # Later recoveries with the original request run nothing on either operation.
    again = recovered(ctx, before, "no effect: recover again with the original request")
    ctx.check((again["outcome"], again["state"]) == ("stale", "stale"), f"no effect: a stale operation recovered with the original request answered {again['outcome']} ({again['state']}), expected stale")
    ctx.check(effects(ctx, before, "no effect: after a second recovery") == (0, 0), "no effect: a later recovery ran the stale operation")
    refused(ctx, ctx.call("execute", {"operation_id": before.operation_id}), "NOT_APPROVED", "no effect: execute of the stale operation")
    ctx.check(effects(ctx, before, "no effect: after execute") == (0, 0), "no effect: execute ran the stale operation")
    again = recovered(ctx, after_effect, "effect: recover again with the original request")
    # A succeeded operation finished consistently; a stale one stays stale.
    outcome = "nothing_to_do" if expected == "succeeded" else "stale"
    ctx.check((again["outcome"], again["state"]) == (outcome, expected), f"effect: the {expected} operation recovered with the original request answered {again['outcome']} ({again['state']}), expected {outcome} ({expected})")
    ctx.check(effects(ctx, after_effect, "effect: after a second recovery") == (1, calls_at_fault), "effect: a later recovery ran the operation again")


@scenario("RECOVERY-UNKNOWN-EFFECT")
def unknown_effect(ctx: Context) -> None:
    # One crash per executor, each in its own process: SIGKILL ends the process.
    ctx.start(failpoints={AFTER_EFFECT: "crash"})
    operations = {executor: approved(ctx, executor) for executor in EXPECTED_AFTER_CRASH}
    for index, operation in enumerate(operations.values()):
        if index:
            ctx.restart(failpoints={AFTER_EFFECT: "crash"})
        fired(ctx, ctx.call("execute", {"operation_id": operation.operation_id}), AFTER_EFFECT)
    ctx.restart()
    crashed = {executor: (effects(ctx, operation, f"{executor}: after the crash"), operation_view(ctx, operation, f"{executor}: after the crash")) for executor, operation in operations.items()}
    recoveries = {}
    for executor, operation in operations.items():
        result = recovered(ctx, operation, f"{executor}: recover in a new process")
        after, calls = effects(ctx, operation, f"{executor}: after recovery")
        table_row(ctx, CRASH_TABLE, CRASH_COLUMNS, [executor, crashed[executor][0][0], after, calls, EXPECTED_AFTER_CRASH[executor], result["outcome"], result["state"]])
        recoveries[executor] = (result, after, calls)
    # Judged once every row is in the evidence; the effect count first.
    for executor, ((count, calls_at_crash), view) in crashed.items():
        result, after, calls = recoveries[executor]
        ctx.check(count == 1, f"{executor}: the executor's effect was made before the crash, yet list_effects holds {count}")
        ctx.check(after == 1, f"{executor}: recovery after a crash following the effect made the effect count {after}, expected 1")
        outcome = EXPECTED_AFTER_CRASH[executor]
        ctx.check(result["outcome"] == outcome, f"{executor}: {OUTCOME_REASON[executor]}, so recovery must answer {outcome}; it answered {result['outcome']}")
        state = "needs_verification" if outcome == "needs_verification" else "succeeded"
        ctx.check(result["state"] == state, f"{executor}: recovery answered {result['outcome']} with state {result['state']}, expected {state}")
        # Reconciliation repairs the audit too: every step that happened has its line.
        last = "verification_required" if outcome == "needs_verification" else "execution_completed"
        audit_shows(ctx, operations[executor], f"{executor}: after recovery", ["approved", "execution_started", last])
        if executor == "opaque":
            ctx.check(calls == calls_at_crash, f"opaque: recovery called the executor {calls - calls_at_crash} more time(s) although the effect is unknown")
        evidence_agrees(ctx, view, count, f"{executor}: after the crash")

    opaque = operations["opaque"]
    calls = recoveries["opaque"][2]
    ctx.restart()
    # needs_verification persists, and wins over stale while the effect is unknown.
    for attempt, request in (("recover once more in another process", None), ("recover with a changed request", changed(opaque))):
        result = recovered(ctx, opaque, f"opaque: {attempt}", request)
        ctx.check((result["outcome"], result["state"]) == ("needs_verification", "needs_verification"), f"opaque: {attempt}: answered {result['outcome']} ({result['state']}); the effect is still unknown, so it needs verification")
        ctx.check(effects(ctx, opaque, f"opaque: after {attempt}") == (1, calls), f"opaque: {attempt}: recovery executed although the effect is unknown")
    refused(ctx, ctx.call("execute", {"operation_id": opaque.operation_id}), "NOT_APPROVED", "opaque: execute of an operation that needs verification")
    ctx.check(effects(ctx, opaque, "opaque: after execute") == (1, calls), "opaque: execute ran an operation that needs verification")
