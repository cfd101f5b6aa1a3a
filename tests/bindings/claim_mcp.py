"""The claim store (``claim_store.py``) as an MCP server (official SDK) over streamable
HTTP: tool ``create_task(task, idempotency_key)``, tool ``list_effects``. The waits are
awaits, so calls run side by side, and the one between claim and effect is where the
SDK cancels a call (its caller gone); nothing else cancels it. The store's steps (its
durable writes, the effect's scan of the folder) run in worker threads, as the SDK runs
``list_effects``: on the event loop they held up the listings KILL-NEMESIS places its
kills by, so at load 9-14 its effect -> answer kills came too long after the effect
and were placed again, each a server start: 6-15 kills where 5 do (one run ended in
error). Over stdio the same tools are served by ``claim_stdio.py``, on the standard
library (it says why). RETRYPROOF_STATE_DIR, RETRYPROOF_PORT, RETRYPROOF_DEFECT."""

from __future__ import annotations

import os
from typing import Any, cast

import anyio
import claim_store
from anyio import to_thread
from sdk import CallToolResult, MCPServer, TextContent

server = MCPServer("claim-store")


@server.tool(structured_output=True)
async def create_task(task: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
    """Create one task; a retry with the same idempotency_key answers the first one."""
    with anyio.CancelScope(shield=True):
        answered = await to_thread.run_sync(claim_store.begin, idempotency_key, task)
    if answered is None:
        try:
            await anyio.sleep(claim_store.WORK_S)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(claim_store.abandon, idempotency_key)
            raise
        with anyio.CancelScope(shield=True):  # past the effect nothing cancels the call
            effect = await to_thread.run_sync(claim_store.make, idempotency_key, task)
            await anyio.sleep(claim_store.SETTLE_S)
            answered = await to_thread.run_sync(claim_store.finish, idempotency_key, effect)
    status, body = answered
    if status < 300:
        return {**body, "replayed": status == 200}
    return cast(
        Any, CallToolResult(content=[TextContent(type="text", text=str(body))], structured_content=body, is_error=True)
    )


@server.tool(structured_output=True)
def list_effects() -> dict[str, Any]:
    """Every effect on disk, with the key it was made under."""
    return {"effects": claim_store.effects()}


server.run("streamable-http", host="127.0.0.1", port=int(os.environ["RETRYPROOF_PORT"]), streamable_http_path="/mcp")
