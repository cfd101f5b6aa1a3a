"""retryproof-harness/1 for agent-runloop's human approval on its SQLite run store.

An operation is one agent run: a scripted model proposes the write tool
``apply_change`` once, the loop pauses the run ``awaiting_approval`` in
``SqliteAgentRunStore``; ``execute`` is ``resume_agent(run_id, approved=True)``, which
claims the run with the library's compare-and-set and runs the tool. What ran, what
failed and what recovery does are decided by agent-runloop alone; this file only
translates. See README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import Mapping
from contextlib import closing
from importlib.metadata import version
from typing import Any

from agent_loop import SqliteAgentRunStore, ToolSpec, current_call_id, resume_agent, run_agent
from pydantic import BaseModel

from retryproof.adapters.implementations.approval_effects import EffectStore, checked_proposal, request_digest
from retryproof.adapters.python_host import HostedRuntime, serve_hosted
from retryproof.spec.protocol import ProtocolError

#: Where each armed audit failpoint makes the library's store fail (README: "Faults").
STORE_FAULTS = {
    "approval.audit_approved": "BEFORE INSERT ON approvals",
    "approval.audit_started": "BEFORE UPDATE OF status ON agent_runs WHEN NEW.status = 'resuming'",
    "approval.audit_completed": "BEFORE INSERT ON tool_audit WHEN NEW.status = 'ok'",
}
FAILPOINTS = (*STORE_FAULTS, "approval.after_effect")
#: The run store's lease (``resume_lease_s``; the library's default is 120 s): only how
#: long a claim of a dead process blocks the next claimer, shortened so that recovery in
#: a new process waits seconds, not minutes. No scenario has two live claimers.
LEASE_S = 2.0
TOOL = "apply_change"

#: The runtime this process serves: the tool, a function the library calls, reaches it here.
RUNTIME: RunloopRuntime


class ApplyChange(BaseModel):
    operation_key: str
    request: dict[str, Any]
    executor: str


async def apply_change(args: ApplyChange, trace_id: str) -> dict[str, Any]:
    """The write tool: the executor, under the idempotency key the library hands it."""
    effect_id, deduplicated = RUNTIME.effects.run(args.operation_key, args.executor, current_call_id.get() or "")
    RUNTIME.failpoint("approval.after_effect")
    return {"effect_id": effect_id, "deduplicated": deduplicated}


TOOLS = [ToolSpec(TOOL, "Apply the approved change.", ApplyChange, apply_change, writes=True)]


class ScriptedModel:
    """The model: proposes the operation as one ``apply_change`` call, then answers."""

    model = "scripted"

    async def generate(self, messages, format=None, options=None, trace_id=None) -> str:
        if any(message["role"] == "assistant" for message in messages):
            return json.dumps({"action": "final", "answer": "done"})
        arguments = json.loads(next(m["content"] for m in messages if m["role"] == "user"))
        return json.dumps({"action": "call_tool", "tool": TOOL, "arguments": arguments})


class RunloopRuntime(HostedRuntime):
    implementation = {"name": "agent-runloop", "version": version("agent-runloop"), "language": "python"}
    capabilities = ("approval",)
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        super().__init__(state_dir, failpoints)
        self.path = os.path.join(state_dir, "agent_runs.sqlite")
        self.store = SqliteAgentRunStore(self.path, resume_lease_s=LEASE_S)
        self.effects = EffectStore(state_dir)
        self.model = ScriptedModel()
        with closing(sqlite3.connect(self.path)) as db, db:
            # The application's record of a human's decision (the library has none
            # apart from resume_agent, which also executes): one row per approval.
            db.execute("CREATE TABLE IF NOT EXISTS approvals (run_id TEXT PRIMARY KEY, at REAL NOT NULL)")
            for point, when in STORE_FAULTS.items():
                trigger = "retryproof_fault_" + point.split(".")[1]
                db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                if failpoints.get(point) == "fail":
                    db.execute(f"CREATE TRIGGER {trigger} {when} BEGIN SELECT RAISE(ABORT, 'failpoint {point}'); END")

        global RUNTIME
        RUNTIME = self

    # -- the library's records, read ------------------------------------------------
    def _query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(self.path, timeout=10)) as db:
            return db.execute(sql, params).fetchall()

    def _run(self, operation_id: Any) -> tuple[str, dict[str, Any], float | None]:
        if not isinstance(operation_id, str):
            raise ProtocolError("invalid_request", "operation_id: must be a string")
        rows = self._query("SELECT status, state, lease_until FROM agent_runs WHERE run_id = ?", operation_id)
        if not rows:
            raise ProtocolError("not_found", f"no run {operation_id!r}")
        status, state, lease_until = rows[0]
        return status, json.loads(state), lease_until

    def _approved(self, operation_id: str) -> bool:
        return bool(self._query("SELECT 1 FROM approvals WHERE run_id = ?", operation_id))

    def _state(self, operation_id: str) -> tuple[str, dict[str, Any]]:
        status, state, _ = self._run(operation_id)
        kinds = [step["kind"] for step in state["steps"] if step["tool"] == TOOL]
        if "tool_call" in kinds:
            return "succeeded", state
        if "tool_error" in kinds:
            return "failed", state  # the library's own word: the approved tool failed
        if status == "awaiting_approval":
            return ("approved" if self._approved(operation_id) else "proposed"), state
        return "executing", state  # claimed (resuming) or running, the tool's end unrecorded

    # -- ops --------------------------------------------------------------------------

    def propose(self, operation_key: Any, request: Any, executor: Any) -> Mapping[str, Any]:
        digest = checked_proposal(operation_key, request, executor)
        for run_id, state in self._query("SELECT run_id, state FROM agent_runs"):
            context = json.loads(state)["context"]
            if context.get("operation_key") == operation_key:
                if (context["request_digest"], context["executor"]) != (digest, executor):
                    raise ProtocolError("invalid_request", "operation_key: bound to another request or executor")
                return {"operation_id": run_id, "state": self._state(run_id)[0], "request_digest": digest}
        arguments = {"operation_key": operation_key, "request": request, "executor": executor}
        context = {"operation_key": operation_key, "request_digest": digest, "executor": executor}
        result = asyncio.run(
            run_agent(json.dumps(arguments), "Apply changes.", TOOLS, self.model, run_store=self.store, context=context)
        )
        if result.status != "awaiting_approval":
            raise ProtocolError("internal_error", f"the run did not pause for approval: {result.status}")
        return {"operation_id": result.run_id, "state": "proposed", "request_digest": digest}

    def approve(self, operation_id: Any) -> Mapping[str, Any]:
        state, _ = self._state(operation_id)
        if state == "proposed":
            try:
                with closing(sqlite3.connect(self.path, timeout=10)) as db, db:
                    db.execute(
                        "INSERT OR IGNORE INTO approvals (run_id, at) VALUES (?, ?)", (operation_id, time.time())
                    )
            except sqlite3.Error as exc:
                raise ProtocolError("AUDIT_WRITE_FAILED", f"the approval row failed: {exc}") from None
            state = "approved"
        return {"state": state}

    def execute(self, operation_id: Any) -> Mapping[str, Any]:
        state, _ = self._state(operation_id)
        if state == "proposed":
            raise ProtocolError("NOT_APPROVED", f"run {operation_id} has no approval")
        try:
            result = asyncio.run(resume_agent(operation_id, True, TOOLS, self.store, self.model))
        except RuntimeError as exc:  # the claim was lost: the run is not awaiting approval
            state, _ = self._state(operation_id)
            code = "APPROVAL_ALREADY_CONSUMED" if state == "succeeded" else "NOT_APPROVED"
            raise ProtocolError(code, str(exc)) from None
        except sqlite3.Error as exc:
            raise ProtocolError("AUDIT_WRITE_FAILED", f"the run store failed: {type(exc).__name__}: {exc}") from None
        return self._answered(operation_id, result)

    def _answered(self, operation_id: str, result: Any) -> Mapping[str, Any]:
        """The protocol's answer to what resume_agent returned."""
        for step in result.steps:
            if step.tool == TOOL and step.kind == "tool_error":
                raise ProtocolError("io_error", f"agent-runloop: {TOOL} failed after approval: {step.detail}")
        return {"state": self._state(operation_id)[0]}

    def recover(self, operation_id: Any, request: Any = None) -> Mapping[str, Any]:
        if request is not None:
            request_digest(request)  # the library takes no recalculated request: it is only checked
        status, _, lease_until = self._run(operation_id)
        if status != "resuming":
            # awaiting_approval (resume_agent is the caller's execute) or finished:
            # agent-runloop has no recovery for either.
            return {"outcome": "nothing_to_do", "state": self._state(operation_id)[0]}
        # A claim whose process died: the library's takeover, once the lease expired.
        time.sleep(max(0.0, (lease_until or 0) - time.time()) + 0.05)
        try:
            result = asyncio.run(resume_agent(operation_id, True, TOOLS, self.store, self.model))
        except sqlite3.Error as exc:
            raise ProtocolError("AUDIT_WRITE_FAILED", f"the run store failed: {type(exc).__name__}: {exc}") from None
        answer = self._answered(operation_id, result)
        outputs = [step.output for step in result.steps if step.tool == TOOL and step.kind == "tool_call"]
        outcome = "reconciled" if outputs and outputs[-1]["deduplicated"] else "re_executed"
        return {"outcome": outcome, **answer}

    def get_operation(self, operation_id: Any) -> Mapping[str, Any]:
        state, run = self._state(operation_id)
        context = run["context"]
        if state == "succeeded":
            evidence = "present"
        elif state in ("proposed", "approved"):
            evidence = "absent"
        else:
            evidence = self.effects.evidence(context["operation_key"], context["executor"])
        return {
            "operation_id": operation_id,
            "state": state,
            "audit_pending": False,  # agent-runloop keeps no record of an audit it owes
            "effect_evidence": evidence,
            "request_digest": context["request_digest"],
        }

    def list_effects(self, operation_key: Any) -> Mapping[str, Any]:
        return self.effects.listing(operation_key)

    def list_audit(self, operation_id: Any) -> Mapping[str, Any]:
        status, _, _ = self._run(operation_id)
        events = []
        if self._approved(operation_id):
            events.append({"event": "approved", "state": "approved", "repaired": False})
            if status != "awaiting_approval":  # the claim: the library's record of the start
                events.append({"event": "execution_started", "state": "executing", "repaired": False})
        rows = self._query(
            "SELECT id FROM tool_audit WHERE run_id = ? AND tool = ? AND status = 'ok'", operation_id, TOOL
        )
        events += [{"event": "execution_completed", "state": "succeeded", "repaired": False} for _ in rows]
        return {"events": events}


def main() -> int:
    return serve_hosted(RunloopRuntime, "agent-runloop harness")


if __name__ == "__main__":
    sys.exit(main())
