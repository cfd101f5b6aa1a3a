"""retryproof-harness/1 for holdpoint's durable approval queue on its SQLite store.

An operation is one holdpoint action: a call of a guarded function (one kind per
executor) submitted ``pending``; ``execute`` is ``HoldPoint.approve(..., execute=True)``,
which moves it to ``approved``, claims it under a lease, runs it and records the outcome,
each step a compare-and-set committed with its audit row; ``recover`` is
``HoldPoint.recover()``. What runs, what is recorded and what recovery does are decided
by holdpoint alone; this file only translates. See README.md beside it for every mapping
decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Mapping
from contextlib import closing
from importlib.metadata import version
from typing import Any

from holdpoint import (
    DedupConflictError,
    HoldPoint,
    HoldPointError,
    SQLiteStore,
    StoreError,
    UnknownActionError,
    current_action_id,
)

from retryproof.adapters.implementations.approval_effects import (
    EXECUTORS,
    EffectStore,
    checked_proposal,
    request_digest,
)
from retryproof.adapters.python_host import HostedRuntime, serve_hosted
from retryproof.spec.protocol import ProtocolError

#: The holdpoint audit event each failpoint makes its audit_log refuse (README: "Faults");
#: the approval is the application's own row.
STORE_FAULTS = {
    "approval.audit_started": "execution_started",
    "approval.audit_completed": "executed",
}
FAILPOINTS = ("approval.audit_approved", *STORE_FAULTS, "approval.after_effect")
#: holdpoint's audit events as the protocol's lines: (event, state, repaired).
LINES = {
    "approved": ("approved", "approved", False),
    "execution_started": ("execution_started", "executing", False),
    "recovered": ("execution_started", "executing", False),
    "interrupted_retried": ("execution_started", "executing", False),
    "executed": ("execution_completed", "succeeded", False),
    # recovery confirmed an earlier attempt's effect: a late completion line
    "verified": ("execution_completed", "succeeded", True),
    "interrupted_failed": ("verification_required", "needs_verification", False),
}
ACTOR = "retryproof-operator"
INTERRUPTED = "holdpoint.Interrupted"

#: The runtime this process serves: the tool, a function the library calls, reaches it here.
RUNTIME: HoldpointRuntime


def apply_change(operation_key: str, request: dict[str, Any], executor: str) -> dict[str, Any]:
    """The guarded function: the executor, deduplicating (when it does) by the action."""
    effect_id, deduplicated = RUNTIME.effects.run(operation_key, executor, current_action_id() or "")
    RUNTIME.failpoint("approval.after_effect")
    return {"effect_id": effect_id, "deduplicated": deduplicated}


def verify(payload: Mapping[str, Any], action_id: str) -> bool | None:
    """holdpoint's question after an interrupted execution: did the effect happen?
    Only a plain effect is observable; None leaves the answer to the policy."""
    if payload["executor"] != "plain":
        return None
    return RUNTIME.effects.evidence(payload["operation_key"], "plain") == "present"


def guarded(hold: HoldPoint, executors: tuple[str, ...]) -> dict[str, Any]:
    """One kind per executor: one per tool, as an application registers its tools."""
    return {
        executor: hold.guard(kind=f"apply_{executor}", dedup_key=lambda p: p["operation_key"], verify=verify)(
            apply_change
        )
        for executor in executors
    }


class HoldpointRuntime(HostedRuntime):
    implementation = {"name": "holdpoint", "version": version("holdpoint"), "language": "python"}
    capabilities = ("approval",)
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        super().__init__(state_dir, failpoints)
        self.path = os.path.join(state_dir, "holdpoint.sqlite")
        store = SQLiteStore(self.path)
        self.hold = HoldPoint(store=store)
        self.guards = guarded(self.hold, EXECUTORS)
        # The worker for the idempotent kind: recovery retries only what it registers.
        self.idempotent = HoldPoint(store=store)
        guarded(self.idempotent, ("dedupe",))
        self.effects = EffectStore(state_dir)
        self.outcomes: dict[str, str] = {}
        with closing(sqlite3.connect(self.path)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS approvals (action_id TEXT PRIMARY KEY, at REAL NOT NULL)")
            faults = {"approval.audit_approved": "approvals", **{p: "audit_log" for p in STORE_FAULTS}}
            for point, table in faults.items():
                trigger = "retryproof_fault_" + point.split(".")[1]
                db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                if failpoints.get(point) == "fail":
                    when = f" WHEN NEW.event = '{STORE_FAULTS[point]}'" if point in STORE_FAULTS else ""
                    db.execute(
                        f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table}{when} "
                        f"BEGIN SELECT RAISE(ABORT, 'failpoint {point}'); END"
                    )

        global RUNTIME
        RUNTIME = self

    # -- the library's records, read ------------------------------------------------
    def _action(self, operation_id: Any) -> Any:
        if not isinstance(operation_id, str):
            raise ProtocolError("invalid_request", "operation_id: must be a string")
        try:
            return self.hold.get(operation_id)
        except UnknownActionError:
            raise ProtocolError("not_found", f"no action {operation_id!r}") from None

    def _approved(self, operation_id: str) -> bool:
        with closing(sqlite3.connect(self.path, timeout=10)) as db:
            return bool(db.execute("SELECT 1 FROM approvals WHERE action_id = ?", (operation_id,)).fetchall())

    def _state(self, action: Any) -> str:
        status = action.status.value
        if status == "pending":
            return "approved" if self._approved(action.id) else "proposed"
        if status == "approved":
            return "executing" if action.execution_started_at is not None else "approved"
        if status == "executed":
            return "succeeded"
        if status == "failed" and action.error is not None and action.error.type == INTERRUPTED:
            return "needs_verification"  # holdpoint: "recorded the ambiguity for a human"
        return "failed"

    # -- ops --------------------------------------------------------------------------

    def propose(self, operation_key: Any, request: Any, executor: Any) -> Mapping[str, Any]:
        digest = checked_proposal(operation_key, request, executor)
        try:
            action = self.guards[executor](operation_key=operation_key, request=request, executor=executor)
        except DedupConflictError:
            raise ProtocolError("invalid_request", "operation_key: bound to another request") from None
        return {"operation_id": action.id, "state": self._state(action), "request_digest": digest}

    def approve(self, operation_id: Any) -> Mapping[str, Any]:
        state = self._state(self._action(operation_id))
        if state == "proposed":
            try:
                with closing(sqlite3.connect(self.path, timeout=10)) as db, db:
                    db.execute("INSERT OR IGNORE INTO approvals VALUES (?, ?)", (operation_id, time.time()))
            except sqlite3.Error as exc:
                raise ProtocolError("AUDIT_WRITE_FAILED", f"the approval row failed: {exc}") from None
            state = "approved"
        return {"state": state}

    def execute(self, operation_id: Any) -> Mapping[str, Any]:
        action = self._action(operation_id)
        state = self._state(action)
        if state == "succeeded":
            raise ProtocolError("APPROVAL_ALREADY_CONSUMED", f"action {operation_id} executed")
        if state != "approved" or action.status.value != "pending":
            raise ProtocolError("NOT_APPROVED", f"action {operation_id} is {state} ({action.status.value})")
        try:
            self.hold.approve(operation_id, actor=ACTOR, execute=True)
        except HoldPointError as exc:
            raise self._translated(exc) from None
        return {"state": self._state(self._action(operation_id))}

    @staticmethod
    def _translated(exc: HoldPointError) -> ProtocolError:
        if isinstance(exc, StoreError):  # a transition and its audit row rolled back together
            return ProtocolError("AUDIT_WRITE_FAILED", f"holdpoint's store: {exc}")
        return ProtocolError("io_error", f"holdpoint: {type(exc).__name__}: {exc}")

    def recover(self, operation_id: Any, request: Any = None) -> Mapping[str, Any]:
        if request is not None:
            request_digest(request)  # holdpoint takes no recalculated request: it is only checked
        self._action(operation_id)
        try:
            # A restarted single worker: its predecessor is dead (holdpoint's ignore_leases).
            # The idempotent kind first, retried; then every other kind, interrupted ones
            # verified or left failed for a human.
            reports = [
                self.idempotent.recover(interrupted="retry", ignore_leases=True),
                self.hold.recover(interrupted="fail", ignore_leases=True),
            ]
        except HoldPointError as exc:
            raise self._translated(exc) from None
        for report in reports:
            for action in report.resumed:
                self.outcomes[action.id] = "re_executed"
            for action in report.interrupted:
                self.outcomes[action.id] = self._interrupted_outcome(action)
        state = self._state(self._action(operation_id))
        # An action this process's passes did not touch answers what its record says: a
        # failure left for a human stays one (holdpoint never recovers a failed action).
        standing = "needs_verification" if state == "needs_verification" else "nothing_to_do"
        return {"outcome": self.outcomes.pop(operation_id, standing), "state": state}

    def _interrupted_outcome(self, action: Any) -> str:
        last = self.hold.audit(action.id)[-1].event
        if last == "verified":
            return "reconciled"
        if last == "interrupted_failed":
            return "needs_verification"
        result = action.result
        return "reconciled" if isinstance(result, dict) and result.get("deduplicated") else "re_executed"

    def get_operation(self, operation_id: Any) -> Mapping[str, Any]:
        action = self._action(operation_id)
        state = self._state(action)
        if state == "succeeded":
            evidence = "present"
        elif state in ("proposed", "approved"):
            evidence = "absent"
        else:
            evidence = self.effects.evidence(action.payload["operation_key"], action.payload["executor"])
        return {
            "operation_id": operation_id,
            "state": state,
            "audit_pending": False,  # every holdpoint step commits with its audit row
            "effect_evidence": evidence,
            "request_digest": request_digest(dict(action.payload["request"])),
        }

    def list_effects(self, operation_key: Any) -> Mapping[str, Any]:
        return self.effects.listing(operation_key)

    def list_audit(self, operation_id: Any) -> Mapping[str, Any]:
        self._action(operation_id)
        events = [LINES["approved"]] if self._approved(operation_id) else []
        events += [LINES[entry.event] for entry in self.hold.audit(operation_id) if entry.event in LINES]
        return {"events": [{"event": e, "state": s, "repaired": r} for e, s, r in events]}


def main() -> int:
    return serve_hosted(HoldpointRuntime, "holdpoint harness")


if __name__ == "__main__":
    sys.exit(main())
