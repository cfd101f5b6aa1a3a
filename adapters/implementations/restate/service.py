"""The Restate service: one handler, ``tasks/create``, whose effect is a task object.

Written as Restate's docs write a side-effecting handler: every non-deterministic or
side-effecting step is a journaled ``ctx.run`` -- ``reserve`` draws the task id,
``write`` writes the task object with the shared task store -- and the handler returns
the identity. Idempotency is Restate's: a request to the ingress with an
``idempotency-key`` header is one invocation per key (per service and handler), and a
retry gets that invocation's result. This file makes no idempotency decision.

Served by hypercorn (``serve.py``); the task store is ``$RETRYPROOF_STATE_DIR/tasks``.
The handler also echoes the ``X-Retryproof-Call`` header it was invoked with (Restate
passes the ingress request's headers on): a retry that Restate answers from the first
invocation carries the first call's value, which is how the harness tells a replayed
result from a new one. Failpoints (``RETRYPROOF_FAILPOINTS``) sit between the steps.
"""

from __future__ import annotations

import os
from typing import Any

import restate

from retryproof.adapters.implementations.task_store import TaskStore
from retryproof.spec.digest import ContractError, request_digest
from retryproof.spec.protocol import crash_now, parse_failpoints

store = TaskStore(os.environ["RETRYPROOF_STATE_DIR"])
armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
tasks = restate.Service("tasks")


def failpoint(name: str) -> None:
    """``crash`` kills this process (the Restate server dies with it, then the
    harness); ``fail`` raises the native I/O error, which Restate retries."""
    action = armed.get(name)
    if action == "crash":
        crash_now()
    elif action == "fail":
        raise OSError(5, f"failpoint {name}")


def write(task_id: str, record: dict[str, Any]) -> None:
    store.write(task_id, record)
    failpoint("write_task.after_task_write")


@tasks.handler()
async def create(ctx: restate.Context, task: Any) -> dict[str, Any]:
    try:
        digest = request_digest(task)
    except ContractError as exc:
        # Terminal: Restate records it as the invocation's outcome and does not retry.
        raise restate.TerminalError(f"invalid_request: {exc}", status_code=400) from None
    # Restate passes the ingress request's headers on, but not idempotency-key (nor, with
    # server 1.7.12, Request.idempotency_key): the harness repeats the key in
    # X-Retryproof-Key; a binding's listing finds it by the invocation id (listing.py).
    headers = {name.lower(): value for name, value in ctx.request().headers.items()}
    key = headers.get("x-retryproof-key")
    task_id = await ctx.run_typed("reserve", TaskStore.new_id)
    failpoint("write_task.after_reserve")
    record = {"task_id": task_id, "task": task, "client_submission_id": key, "request_digest": digest}
    record["invocation_id"] = ctx.request().id
    await ctx.run_typed("write", write, task_id=task_id, record=record)
    failpoint("write_task.after_task_created")
    return {
        "task_id": task_id,
        "task_path": store.path(task_id),
        "request_digest": digest,
        "caller": headers.get("x-retryproof-call"),
    }


app = restate.app([tasks])
