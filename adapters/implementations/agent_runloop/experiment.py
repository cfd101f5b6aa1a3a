"""agent-runloop's two approval failures, shown without the kit.

Run with this folder's interpreter: ``.venv/bin/python experiment.py``. Each part uses
only agent_loop, sqlite3 and a marker file per effect in a temporary directory.

1. The completion audit fails after the effect (the tool_audit table refuses the row):
   resume_agent reports the approved tool as failed, and no audit row says it ran.
2. The process dies after the effect, before the run is saved: once the claim's lease
   expires, resume_agent claims the run again and runs the tool a second time.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

from agent_loop import SqliteAgentRunStore, ToolSpec, resume_agent, run_agent
from pydantic import BaseModel


class Change(BaseModel):
    target: str


class Model:
    async def generate(self, messages, format=None, options=None, trace_id=None):
        if any(m["role"] == "assistant" for m in messages):
            return json.dumps({"action": "final", "answer": "done"})
        return json.dumps({"action": "call_tool", "tool": "apply", "arguments": {"target": "repo-1"}})


def tools(folder: str, die_after_effect: bool = False) -> list[ToolSpec]:
    async def apply(args: Change, trace_id: str):
        with open(os.path.join(folder, "effects.log"), "a") as log:
            log.write(args.target + "\n")
            log.flush()
            os.fsync(log.fileno())
        if die_after_effect:
            os.kill(os.getpid(), signal.SIGKILL)
        return "applied"

    return [ToolSpec("apply", "Apply a change.", Change, apply, writes=True)]


def effects(folder: str) -> int:
    try:
        with open(os.path.join(folder, "effects.log")) as log:
            return len(log.readlines())
    except FileNotFoundError:
        return 0


def paused_run(folder: str, lease_s: float = 120.0) -> tuple[SqliteAgentRunStore, str]:
    store = SqliteAgentRunStore(os.path.join(folder, "runs.sqlite"), resume_lease_s=lease_s)
    result = asyncio.run(run_agent("apply the change", "", tools(folder), Model(), run_store=store))
    assert result.status == "awaiting_approval", result.status
    return store, result.run_id


def completion_audit_fails() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store, run_id = paused_run(folder)
        with sqlite3.connect(store.path) as db:  # the audit destination refuses the row
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON tool_audit BEGIN SELECT RAISE(ABORT, 'audit down'); END")
        result = asyncio.run(resume_agent(run_id, True, tools(folder), store, Model()))
        with sqlite3.connect(store.path) as db:
            audit = db.execute("SELECT status FROM tool_audit WHERE run_id = ?", (run_id,)).fetchall()
        print("1. completion audit fails after the effect")
        print(f"   run status: {result.status}; steps: {[step.kind for step in result.steps]}")
        print(f"   what the model and caller are told: {[s.detail for s in result.steps if s.kind == 'tool_error']}")
        print(f"   effects: {effects(folder)}; tool_audit rows: {audit}")


def crash_after_effect() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store, run_id = paused_run(folder, lease_s=1.0)
        child = subprocess.run([sys.executable, __file__, "--approve-and-die", folder, run_id], timeout=60)
        with sqlite3.connect(store.path) as db:
            status = db.execute("SELECT status FROM agent_runs WHERE run_id = ?", (run_id,)).fetchone()[0]
        print("2. the process dies after the effect")
        print(f"   approving process exit: {child.returncode}; run status: {status}; effects: {effects(folder)}")
        time.sleep(1.1)  # the claim's lease expires
        result = asyncio.run(resume_agent(run_id, True, tools(folder), store, Model()))
        print(f"   resume_agent in a new process: {result.status}; effects: {effects(folder)}")


def approve_and_die(folder: str, run_id: str) -> None:
    store = SqliteAgentRunStore(os.path.join(folder, "runs.sqlite"), resume_lease_s=1.0)
    asyncio.run(resume_agent(run_id, True, tools(folder, die_after_effect=True), store, Model()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--approve-and-die"]:
        approve_and_die(*sys.argv[2:4])
    else:
        completion_audit_fails()
        crash_after_effect()
