"""retryproof-harness/1 for LangGraph's human-in-the-loop on the SQLite checkpointer.

An operation is one graph thread: node ``approval`` calls ``interrupt()`` before node
``tool`` makes the effect, and ``Command(resume=True)`` continues it. The audit log is
the application's sink, fed from the graph's own update stream. What runs, when, and
what a resumed thread does again are decided by LangGraph alone; this file only
translates. See README.md beside it for every mapping decision.

Run with the interpreter of this folder's virtual environment (``./setup``).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from typing import Any, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from retryproof.adapters.implementations.approval_effects import EffectStore, checked_proposal, request_digest
from retryproof.adapters.implementations.versions import stack_version
from retryproof.adapters.python_host import HostedRuntime, serve_hosted
from retryproof.spec.protocol import ProtocolError

#: The audit event each failpoint makes the application's sink refuse (README: "Faults").
SINK_FAULTS = {
    "approval.audit_approved": "approved",
    "approval.audit_started": "execution_started",
    "approval.audit_completed": "execution_completed",
}
FAILPOINTS = (*SINK_FAULTS, "approval.after_effect")
#: The audit line each node's update in the graph's stream is written as.
NODE_EVENTS = {"approval": ("execution_started", "executing"), "tool": ("execution_completed", "succeeded")}
#: Every checkpoint is written before the next step starts (LangGraph's strongest mode).
DURABILITY = "sync"

#: The runtime this process serves: the tool, a function the library calls, reaches it here.
RUNTIME: LangGraphRuntime


class Operation(TypedDict, total=False):
    operation_key: str
    request: dict[str, Any]
    executor: str
    request_digest: str
    approved: bool
    effect: dict[str, Any]


def approval(state: Operation) -> Operation:
    return {"approved": bool(interrupt({"operation_key": state["operation_key"], "request": state["request"]}))}


def tool(state: Operation) -> Operation:
    """The executor, deduplicating (when it does) by the thread: one per operation."""
    thread = get_config()["configurable"]["thread_id"]
    effect_id, deduplicated = RUNTIME.effects.run(state["operation_key"], state["executor"], thread)
    RUNTIME.failpoint("approval.after_effect")
    return {"effect": {"effect_id": effect_id, "deduplicated": deduplicated}}


def graph() -> StateGraph:
    builder = StateGraph(Operation)
    builder.add_node("approval", approval)
    builder.add_node("tool", tool)
    builder.add_edge(START, "approval")
    builder.add_edge("approval", "tool")
    builder.add_edge("tool", END)
    return builder


class AuditSink:
    """The application's audit log: one SQLite row per line, written as events arrive."""

    def __init__(self, path: str, failpoints: Mapping[str, str]):
        self.path = path
        with closing(sqlite3.connect(path)) as db, db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS audit (seq INTEGER PRIMARY KEY AUTOINCREMENT, operation_id TEXT NOT NULL, "
                "event TEXT NOT NULL, state TEXT NOT NULL, repaired INTEGER NOT NULL)"
            )
            for point, event in SINK_FAULTS.items():
                trigger = "retryproof_fault_" + event
                db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
                if failpoints.get(point) == "fail":
                    db.execute(
                        f"CREATE TRIGGER {trigger} BEFORE INSERT ON audit WHEN NEW.event = '{event}' "
                        f"BEGIN SELECT RAISE(ABORT, 'failpoint {point}'); END"
                    )

    def append(self, operation_id: str, event: str, state: str) -> None:
        try:
            with closing(sqlite3.connect(self.path, timeout=10)) as db, db:
                db.execute(
                    "INSERT INTO audit (operation_id, event, state, repaired) VALUES (?, ?, ?, 0)",
                    (operation_id, event, state),
                )
        except sqlite3.Error as exc:
            raise ProtocolError("AUDIT_WRITE_FAILED", f"the audit sink refused {event}: {exc}") from None

    def lines(self, operation_id: str) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.path, timeout=10)) as db:
            rows = db.execute(
                "SELECT event, state, repaired FROM audit WHERE operation_id = ? ORDER BY seq", (operation_id,)
            ).fetchall()
        return [{"event": event, "state": state, "repaired": bool(repaired)} for event, state, repaired in rows]


class LangGraphRuntime(HostedRuntime):
    implementation = {
        "name": "langgraph-interrupt",
        "version": stack_version("langgraph", "langgraph-checkpoint-sqlite"),
        "language": "python",
    }
    capabilities = ("approval",)
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        super().__init__(state_dir, failpoints)
        connection = sqlite3.connect(os.path.join(state_dir, "checkpoints.sqlite"), check_same_thread=False)
        self.graph = graph().compile(checkpointer=SqliteSaver(connection))
        self.sink = AuditSink(os.path.join(state_dir, "audit.sqlite"), failpoints)
        self.effects = EffectStore(state_dir)
        global RUNTIME
        RUNTIME = self

    @staticmethod
    def _config(operation_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": operation_id}}

    def _snapshot(self, operation_id: Any) -> Any:
        if not isinstance(operation_id, str):
            raise ProtocolError("invalid_request", "operation_id: must be a string")
        snapshot = self.graph.get_state(self._config(operation_id))
        if not snapshot.values:
            raise ProtocolError("not_found", f"no thread {operation_id!r}")
        return snapshot

    def _state(self, operation_id: str) -> tuple[str, Any]:
        snapshot = self._snapshot(operation_id)
        if "effect" in snapshot.values:
            return "succeeded", snapshot
        if snapshot.next == ("approval",):
            approved = any(line["event"] == "approved" for line in self.sink.lines(operation_id))
            return ("approved" if approved else "proposed"), snapshot
        return "executing", snapshot  # the approval consumed, the tool's end unrecorded

    def _stream(self, operation_id: str, command: Any) -> list[dict[str, Any]]:
        """Run the thread on; each node's update is written to the sink as it arrives.
        The outputs of ``tool`` that ran."""
        ran = []
        updates = self.graph.stream(command, self._config(operation_id), stream_mode="updates", durability=DURABILITY)
        with closing(updates):
            for update in updates:
                for node, values in update.items():
                    if node in NODE_EVENTS:
                        self.sink.append(operation_id, *NODE_EVENTS[node])
                    if node == "tool":
                        ran.append(values["effect"])
        return ran

    # -- ops --------------------------------------------------------------------------

    def propose(self, operation_key: Any, request: Any, executor: Any) -> Mapping[str, Any]:
        digest = checked_proposal(operation_key, request, executor)
        operation_id = "op-" + hashlib.sha256(operation_key.encode("utf-8")).hexdigest()[:32]
        existing = self.graph.get_state(self._config(operation_id)).values
        if existing:
            if (existing["request_digest"], existing["executor"]) != (digest, executor):
                raise ProtocolError("invalid_request", "operation_key: bound to another request or executor")
        else:
            start = {"operation_key": operation_key, "request": request, "executor": executor, "request_digest": digest}
            self._stream(operation_id, start)
        return {"operation_id": operation_id, "state": self._state(operation_id)[0], "request_digest": digest}

    def approve(self, operation_id: Any) -> Mapping[str, Any]:
        state, _ = self._state(operation_id)
        if state == "proposed":
            self.sink.append(operation_id, "approved", "approved")
            state = "approved"
        return {"state": state}

    def execute(self, operation_id: Any) -> Mapping[str, Any]:
        state, _ = self._state(operation_id)
        if state in ("proposed", "executing"):
            raise ProtocolError("NOT_APPROVED", f"thread {operation_id} is {state}")
        if not self._stream(operation_id, Command(resume=True)):
            # LangGraph answers a resume of a finished thread by running nothing.
            code = "APPROVAL_ALREADY_CONSUMED" if self._state(operation_id)[0] == "succeeded" else "NOT_APPROVED"
            raise ProtocolError(code, f"resuming thread {operation_id} ran no node")
        return {"state": self._state(operation_id)[0]}

    def recover(self, operation_id: Any, request: Any = None) -> Mapping[str, Any]:
        if request is not None:
            request_digest(request)  # LangGraph takes no recalculated request: it is only checked
        state, _ = self._state(operation_id)
        if state != "executing":
            return {"outcome": "nothing_to_do", "state": state}
        # LangGraph's recovery: invoked with None, the thread runs its pending node again.
        ran = self._stream(operation_id, None)
        outcome = "reconciled" if ran and ran[-1]["deduplicated"] else "re_executed"
        return {"outcome": outcome, "state": self._state(operation_id)[0]}

    def get_operation(self, operation_id: Any) -> Mapping[str, Any]:
        state, snapshot = self._state(operation_id)
        values = snapshot.values
        if state == "succeeded":
            evidence = "present"
        elif state in ("proposed", "approved"):
            evidence = "absent"
        else:
            evidence = self.effects.evidence(values["operation_key"], values["executor"])
        return {
            "operation_id": operation_id,
            "state": state,
            "audit_pending": False,  # neither LangGraph nor its stream keeps an event owed
            "effect_evidence": evidence,
            "request_digest": values["request_digest"],
        }

    def list_effects(self, operation_key: Any) -> Mapping[str, Any]:
        return self.effects.listing(operation_key)

    def list_audit(self, operation_id: Any) -> Mapping[str, Any]:
        self._snapshot(operation_id)
        return {"events": self.sink.lines(operation_id)}


def main() -> int:
    return serve_hosted(LangGraphRuntime, "langgraph harness")


if __name__ == "__main__":
    sys.exit(main())
