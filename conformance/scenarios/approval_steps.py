"""The steps the approval scenarios share: propose and approve an operation, count its
effects, read its audit log, fault a step, and put rows into the report's two tables.

Every count comes from ``list_effects`` (the effect evidence), never from a state an
op returned. Each scenario also puts its rows of the report's two tables into its
evidence (``tables``), beside the field report's figures for the same row, so a
reviewer reads "seed" and "this runtime" side by side.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from retryproof.conformance.context import Context, Unjudgeable
from retryproof.conformance.outcome import Call
from retryproof.spec import load_spec

PROBE_TABLE = "Approval probes P0-P3"
PROBE_COLUMNS = [
    "probe",
    "fault",
    "caller (field report)",
    "caller",
    "state (field report)",
    "state",
    "effects (field report)",
    "effects",
]
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
# executor -> {outcome, reason}: what recovery owes after a crash that follows the
# effect, and why (approval.after_crash).
AFTER_CRASH: dict[str, dict[str, str]] = load_spec()["approval"]["after_crash"]

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
    result = ctx.expect_ok(
        ctx.call("propose", {"operation_key": key, "request": request, "executor": executor}), "propose"
    )
    return Operation(result["operation_id"], key, request, executor)


def approved(ctx: Context, executor: str) -> Operation:
    operation = proposed(ctx, executor)
    ctx.expect_ok(ctx.call("approve", {"operation_id": operation.operation_id}), "approve")
    return operation


def effects(ctx: Context, operation: Operation, label: str) -> tuple[int, int]:
    """``(effects, executor_calls)`` from the runtime's effect evidence, noted as evidence."""
    result = ctx.expect_ok(ctx.call("list_effects", {"operation_key": operation.operation_key}), "list_effects")
    ids = [str(effect.get("effect_id")) for effect in result["effects"]]
    ctx.check(len(set(ids)) == len(ids), f"list_effects names one effect twice: {ids}")
    ctx.evidence.setdefault("effects", {})[label] = {
        "effects": len(ids),
        "effect_ids": ids,
        "executor_calls": result["executor_calls"],
    }
    return len(ids), result["executor_calls"]


def operation_view(ctx: Context, operation: Operation, label: str) -> Mapping[str, Any]:
    """``get_operation``, noted as evidence under ``label``."""
    view = ctx.expect_ok(ctx.call("get_operation", {"operation_id": operation.operation_id}), "get_operation")
    ctx.evidence.setdefault("operations", {})[label] = dict(view)
    return view


def evidence_agrees(ctx: Context, view: Mapping[str, Any], effect_count: int, label: str) -> None:
    """The runtime's effect evidence against the authoritative count: ``absent``
    while an effect exists is the lie that makes a second effect look safe;
    ``present`` with none is a record that invents one."""
    evidence = view["effect_evidence"]
    ctx.check(
        not (effect_count and evidence == "absent"),
        f"{label}: effect_evidence says absent, but list_effects holds {effect_count} effect(s)",
    )
    ctx.check(
        not (not effect_count and evidence == "present"),
        f"{label}: effect_evidence says present, but list_effects holds none",
    )


def recovered(
    ctx: Context, operation: Operation, what: str, request: Mapping[str, Any] | None = None
) -> Mapping[str, Any]:
    args: dict[str, Any] = {"operation_id": operation.operation_id}
    if request is not None:
        args["request"] = dict(request)
    result = ctx.expect_ok(ctx.call("recover", args), what)
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
    table_row(
        ctx,
        PROBE_TABLE,
        PROBE_COLUMNS,
        [probe, fault, seed_caller, caller, seed_state, state, seed_effects, effect_count],
    )


def control_row(ctx: Context, control: str, after_fault: int, after_recovery: int, calls: int, outcome: str) -> None:
    seed = CONTROLS_SEED[control]
    table_row(
        ctx,
        CONTROL_TABLE,
        CONTROL_COLUMNS,
        [control, seed[0], after_fault, seed[1], after_recovery, seed[2], calls, seed[3], outcome],
    )


def refused(ctx: Context, call: Call, code: str, what: str) -> None:
    """A typed refusal ``code``; anything else is named in approval terms (the state an
    ``ok`` answered, or the other error)."""
    if not call.answered:
        raise Unjudgeable(f"{what}: no answer ({call.message})")
    ctx.check(call.code == code, f"{what}: expected error {code}, got {caller_view(call)}")


def faulted(
    ctx: Context, operation: Operation, op: str, failpoint: str, label: str
) -> tuple[Call, int, int, Mapping[str, Any]]:
    """Call ``op`` with ``failpoint=fail`` armed: ``(call, effects, executor calls,
    get_operation)`` after it.

    A ``fail`` failpoint fires every time its step is reached in the process
    (PROTOCOL-R14, PROTOCOL-R17). A success while no audit is pending means it did not
    fire here, so nothing about the window can be judged: the scenario ends in error.
    """
    call = ctx.call(op, {"operation_id": operation.operation_id})
    count, calls = effects(ctx, operation, label)
    view = operation_view(ctx, operation, label)
    if not call.answered:
        raise Unjudgeable(f"{op} ({operation.executor}): no answer with {failpoint}=fail armed ({call.message})")
    if call.kind == "ok" and view["audit_pending"] is False:
        raise Unjudgeable(
            f"{op} ({operation.executor}): the failpoint did not fire: {failpoint}=fail is armed, yet the call answered "
            f"{caller_view(call)} and get_operation shows no audit pending; the window was never tested"
        )
    return call, count, calls, view


def rolled_back(view: Mapping[str, Any], before: str) -> bool:
    """Whether a faulted step rolled back with its audit line (APPROVAL-R26): the
    operation shows the state before the step and owes no audit."""
    return view["state"] == before and view["audit_pending"] is False


def audit_fault_reported(
    ctx: Context, call: Call, view: Mapping[str, Any], count: int, op: str, label: str, before: str
) -> bool:
    """APR-2: the caller is told (AUDIT_WRITE_FAILED, never a success), and no step is
    hidden. Either the step stands and the record owes its audit (write-ahead,
    APPROVAL-R21), or the step rolled back with its line to ``before``, the state
    before it, and nothing is owed (APPROVAL-R26). Answers whether it rolled back."""
    ctx.check(
        call.kind != "ok",
        f"{label}: {op} answered {caller_view(call)} although its audit append failed; the caller must be told (AUDIT_WRITE_FAILED)",
    )
    refused(ctx, call, "AUDIT_WRITE_FAILED", f"{label}: {op}")
    undone = rolled_back(view, before)
    ctx.check(
        undone or view["audit_pending"] is True,
        f"{label}: the audit append failed and the operation is {view['state']}, yet get_operation says audit_pending false; "
        f"either the step stands and the record keeps the owed audit, or it rolls back with its line to {before}",
    )
    evidence_agrees(ctx, view, count, label)
    return undone


def audit_log(ctx: Context, operation: Operation, label: str) -> list[Mapping[str, Any]]:
    """``list_audit``, noted as evidence; each line must carry the state its step sets."""
    events = ctx.expect_ok(ctx.call("list_audit", {"operation_id": operation.operation_id}), "list_audit")["events"]
    ctx.evidence.setdefault("audit", {})[label] = [dict(line) for line in events]
    for line in events:
        expected = AUDIT_STATES[line["event"]]
        ctx.check(
            line["state"] == expected,
            f"{label}: the audit line {line['event']} says state {line['state']}, but that step sets {expected}",
        )
    return events


def audit_shows(
    ctx: Context, operation: Operation, label: str, steps: Sequence[str], late: str | None = None
) -> list[str]:
    """The audit log holds every one of ``steps``, first lines in that order; the first
    line of ``late`` (the event whose append failed) is marked repaired. A repeated
    line is allowed, a missing one is the audit loss APR-2 and APR-3 forbid."""
    events = audit_log(ctx, operation, label)
    names = [line["event"] for line in events]
    missing = [step for step in steps if step not in names]
    ctx.check(
        not missing,
        f"{label}: the audit log lacks {', '.join(missing)} (it holds {json.dumps(names)}); a step that happened lost its audit line",
    )
    firsts = [names.index(step) for step in steps if step in names]
    ctx.check(
        firsts == sorted(firsts),
        f"{label}: the audit log holds {json.dumps(names)}, not in the order of the steps {json.dumps(list(steps))}",
    )
    if late in names:
        first = events[names.index(late)]
        ctx.check(
            first["repaired"] is True,
            f"{label}: the {late} append failed, so the first {late} line is a late one and must be marked repaired true; it says {json.dumps(first['repaired'])}",
        )
    return names


def audit_faulted(ctx: Context, probe: str, failpoint: str, op: str) -> tuple[Operation, Mapping[str, Any], int, bool]:
    """P1's and P2's start: a process with ``failpoint=fail``, a plain operation that
    ``op`` is next for, ``op`` faulted, the probe's row and APR-2's checks; the last
    item says whether the step rolled back with its line."""
    ctx.start(failpoints={failpoint: "fail"})
    before = "proposed" if op == "approve" else "approved"
    operation = (proposed if op == "approve" else approved)(ctx, "plain")
    call, count, _, view = faulted(ctx, operation, op, failpoint, "after the fault")
    probe_row(ctx, probe, caller_view(call), view["state"], count)
    undone = audit_fault_reported(ctx, call, view, count, op, "after the fault", before)
    return operation, view, count, undone


# -- the probes ----------------------------------------------------------------------
