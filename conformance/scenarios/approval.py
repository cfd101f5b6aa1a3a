"""Approval recovery: the second field report's four probes and its restart table.

Every count comes from ``list_effects`` (the effect evidence), never from a state an
op returned. Each scenario also puts its rows of the report's two tables into its
evidence (``tables``), beside the field report's figures for the same row, so a
reviewer reads "seed" and "this runtime" side by side.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Mapping

from conformance.context import Context, Unjudgeable
from conformance.outcome import Call
from conformance.scenarios import scenario
from conformance.scenarios.common import fired

PROBE_TABLE = "Approval probes P0-P3"
PROBE_COLUMNS = ["probe", "fault", "caller (seed)", "caller", "state (seed)", "state", "effects (seed)", "effects"]
# probe -> (fault location, caller's view, persisted state, effects): the seed's figures.
PROBES_SEED = {
    "P0": ("execute again after success", "APPROVAL_ALREADY_CONSUMED", "succeeded", 1),
    "P1": ("approval audit append fails", "error", "approved", 0),
    "P2": ("start audit append fails", "error", "executing", 0),
    "P3": ("completion audit append fails after the effect", "error", "failed", 1),
}
CONTROL_TABLE = "Executor controls: fault, then recovery in a new process"
CONTROL_COLUMNS = [
    "control",
    "effects after fault (seed)",
    "effects after fault",
    "after recovery (seed)",
    "after recovery",
    "calls (seed)",
    "calls",
    "recovery (seed)",
    "recovery",
]
# control -> (effects after fault, after recovery, executor calls, recovery result).
CONTROLS_SEED = {
    "no dedupe, same digest": (1, 2, 2, "succeeded"),
    "dedupe, same digest": (1, 1, 2, "succeeded"),
    "changed digest": (1, 1, 1, "APPROVAL_STALE"),
}

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


def probe_audit_fault(ctx: Context, probe: str, operation: Operation, op: str, failpoint: str) -> tuple[int, Mapping[str, Any]]:
    """Call ``op`` with its audit append failing; note the probe's row, then judge.

    The failure must reach the caller: a success would hide it (APR-2), and no
    answer leaves nothing to judge. Answers ``(effects, get_operation)`` after it.
    """
    call = ctx.call(op, {"operation_id": operation.operation_id})
    count, _ = effects(ctx, operation, "after the fault")
    view = operation_view(ctx, operation, "after the fault")
    probe_row(ctx, probe, caller_view(call), view["state"], count)
    if not call.answered:
        raise Unjudgeable(f"{op}: no answer with {failpoint}=fail armed ({call.message})")
    ctx.check(call.kind != "ok", f"{op}: answered success although its audit append failed ({failpoint}=fail); the caller must be told")
    ctx.expect_error(call, "AUDIT_WRITE_FAILED", op)
    evidence_agrees(ctx, view, count, "after the fault")
    return count, view


# -- the probes ----------------------------------------------------------------------


@scenario("P0-CONSUMED")
def consumed(ctx: Context) -> None:
    ctx.start()
    operation = approved(ctx, "plain")
    first = ctx.expect_ok(ctx.call("execute", {"operation_id": operation.operation_id}), "first execute").result
    ctx.check(first.get("state") == "succeeded", f"first execute answered state {first.get('state')}, expected succeeded")
    again = ctx.call("execute", {"operation_id": operation.operation_id})
    ctx.expect_error(again, "APPROVAL_ALREADY_CONSUMED", "execute after success")
    ctx.check(effects(ctx, operation, "after the second execute") == (1, 1), "executing a succeeded operation again must not call the executor")
    ctx.restart()
    ctx.expect_error(ctx.call("execute", {"operation_id": operation.operation_id}), "APPROVAL_ALREADY_CONSUMED", "execute after a restart")
    count, _ = effects(ctx, operation, "after the restart")
    ctx.check(count == 1, f"list_effects holds {count} effects after the restart, expected 1")
    view = operation_view(ctx, operation, "after the restart")
    probe_row(ctx, "P0", again.code or caller_view(again), view["state"], count)
    evidence_agrees(ctx, view, count, "after the restart")


@scenario("P1-APPROVAL-AUDIT-FAULT")
def approval_audit_fault(ctx: Context) -> None:
    ctx.start(failpoints={AUDIT_APPROVED: "fail"})
    operation = proposed(ctx, "plain")
    count, view = probe_audit_fault(ctx, "P1", operation, "approve", AUDIT_APPROVED)
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
        ctx.expect_error(execute, "NOT_APPROVED", "execute of the operation reported proposed, in a new process")
        expected = 0
    count, _ = effects(ctx, operation, "after execute in a new process")
    ctx.check(count == expected, f"after execute in a new process list_effects holds {count} effects, expected {expected}")


@scenario("P2-START-AUDIT-FAULT")
def start_audit_fault(ctx: Context) -> None:
    ctx.start(failpoints={AUDIT_STARTED: "fail"})
    operation = approved(ctx, "plain")
    count, _ = probe_audit_fault(ctx, "P2", operation, "execute", AUDIT_STARTED)
    ctx.check(count == 0, f"the start audit failed, yet {count} effect(s) exist: an execution must not go on without its start audit")
    ctx.restart()
    result = recovered(ctx, operation, "recover in a new process")
    count, calls = effects(ctx, operation, "after recovery")
    ctx.check(result["outcome"] == "re_executed", f"the effect of a plain executor is proven absent, so recovery must re-execute; it answered {result['outcome']}")
    ctx.check((count, calls) == (1, 1), f"after recovery: {count} effect(s) from {calls} executor call(s), expected 1 from 1")
    ctx.check(result["state"] == "succeeded", f"recovery re-executed but left state {result['state']}")


@scenario("P3-COMPLETION-AUDIT-FAULT")
def completion_audit_fault(ctx: Context) -> None:
    ctx.start(failpoints={AUDIT_COMPLETED: "fail"})
    controls = {"no dedupe, same digest": approved(ctx, "plain"), "dedupe, same digest": approved(ctx, "dedupe")}
    faulted: dict[str, tuple[Call, int, Mapping[str, Any]]] = {}
    for control, operation in controls.items():
        call = ctx.call("execute", {"operation_id": operation.operation_id})
        if not call.answered:
            raise Unjudgeable(f"execute ({operation.executor}): no answer with {AUDIT_COMPLETED}=fail armed ({call.message})")
        count, _ = effects(ctx, operation, f"{operation.executor}: after the fault")
        ctx.check(count == 1, f"{operation.executor}: the completion audit follows the effect, yet list_effects holds {count}")
        faulted[control] = (call, count, operation_view(ctx, operation, f"{operation.executor}: after the fault"))
    call, count, view = faulted["no dedupe, same digest"]
    probe_row(ctx, "P3", caller_view(call), view["state"], count)
    for control, (_, count, view) in faulted.items():
        evidence_agrees(ctx, view, count, f"{controls[control].executor}: after the fault")

    ctx.restart()
    recovered_rows = {}
    for control, operation in controls.items():
        result = recovered(ctx, operation, f"{operation.executor}: recover in a new process")
        after, calls = effects(ctx, operation, f"{operation.executor}: after recovery")
        control_row(ctx, control, faulted[control][1], after, calls, result["outcome"])
        recovered_rows[control] = (result, after)
    # Judged once both rows are in the evidence, so a failure still shows the table.
    for control, operation in controls.items():
        result, after = recovered_rows[control]
        ctx.check(after == 1, f"{operation.executor}: new-process recovery made the effect count {after}; an audit failure after the effect must never make the operation retry-eligible")
        ctx.check(result["outcome"] == "reconciled", f"{operation.executor}: the effect exists, so recovery must reconcile; it answered {result['outcome']}")
        repaired = operation_view(ctx, operation, f"{operation.executor}: after recovery")
        ctx.check(
            (repaired["state"], repaired["audit_pending"]) == ("succeeded", False),
            f"{operation.executor}: reconciled, yet state {repaired['state']} with audit_pending {repaired['audit_pending']}",
        )
        again = ctx.call("execute", {"operation_id": operation.operation_id})
        ctx.expect_error(again, "APPROVAL_ALREADY_CONSUMED", f"{operation.executor}: execute after reconciliation")
        ctx.check(effects(ctx, operation, f"{operation.executor}: after execute again")[0] == 1, f"{operation.executor}: a refused execute made an effect")


# -- recovery outcomes ---------------------------------------------------------------


@scenario("RECOVERY-STALE-REQUEST")
def stale_request(ctx: Context) -> None:
    ctx.start(failpoints={AUDIT_COMPLETED: "fail"})
    operation = approved(ctx, "plain")
    ctx.call("execute", {"operation_id": operation.operation_id})
    after_fault, calls_at_fault = effects(ctx, operation, "after the fault")
    ctx.check(after_fault == 1, f"the completion audit follows the effect, yet list_effects holds {after_fault}")
    ctx.restart()
    changed = {**operation.request, "ref": operation.request["ref"] + "-recalculated"}
    result = recovered(ctx, operation, "recover with a changed request", changed)
    after, calls = effects(ctx, operation, "after recovery")
    control_row(ctx, "changed digest", after_fault, after, calls, result["outcome"])
    ctx.check(result["outcome"] == "stale", f"the recalculated request has another digest, so recovery must answer stale; it answered {result['outcome']}")
    ctx.check(calls == calls_at_fault, f"a stale recovery called the executor {calls - calls_at_fault} more time(s)")
    ctx.check(after == 1, f"a stale recovery changed the effect count to {after}")
    # Nothing may run on the stale approval afterwards, whatever state it now reports.
    recovered(ctx, operation, "recover again with the original request")
    ctx.check(effects(ctx, operation, "after a second recovery") == (1, calls_at_fault), "a later recovery ran the stale operation")


@scenario("RECOVERY-UNKNOWN-EFFECT")
def unknown_effect(ctx: Context) -> None:
    ctx.start(failpoints={AFTER_EFFECT: "crash"})
    operation = approved(ctx, "opaque")
    fired(ctx, ctx.call("execute", {"operation_id": operation.operation_id}), AFTER_EFFECT)
    ctx.restart()
    count, calls = effects(ctx, operation, "after the crash")
    ctx.check(count == 1, f"the executor's effect was made before the crash, yet list_effects holds {count}")
    evidence_agrees(ctx, operation_view(ctx, operation, "after the crash"), count, "after the crash")

    def needs_verification(attempt: str) -> None:
        result = recovered(ctx, operation, attempt)
        ctx.check(result["outcome"] == "needs_verification", f"{attempt}: an opaque effect cannot be confirmed and the executor cannot deduplicate, so recovery must answer needs_verification; it answered {result['outcome']}")
        ctx.check(result["state"] == "needs_verification", f"{attempt}: answered state {result['state']}, expected needs_verification")
        ctx.check(effects(ctx, operation, f"after {attempt}") == (1, calls), f"{attempt}: recovery executed although the effect is unknown")

    needs_verification("recover in a new process")
    ctx.restart()
    needs_verification("recover once more in another process")
    refused = ctx.call("execute", {"operation_id": operation.operation_id})
    ctx.check(refused.kind == "fail", f"execute of an operation that needs verification must be refused; got {caller_view(refused)}")
    ctx.check(effects(ctx, operation, "after execute") == (1, calls), "execute ran an operation that needs verification")
