"""An MCP server (official SDK) whose refusals are plain text, as the SDK renders any
ToolError: ``Error executing tool create_task: <message>``, with isError true and no
structured content. A key reused with another payload, a key whose first call is
still running (it does not wait), and a malformed key each have their own message;
only a pattern on the text tells them apart. The tool takes its own names (summary,
details, owner, urgency) and its key as the argument ``request_key``; a resource
lists the effects. ``python mcp_plain_text_errors.py`` serves stdio; with ``--defect
replays-any-payload`` a reused key answers its first task whatever the payload, and
CONFLICT-DIGEST must fail it."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import keyed_store as store
from sdk import MCPServer, ToolError

PENDING: set[str] = set()
REPLAYS_ANY_PAYLOAD = sys.argv[1:] == ["--defect", "replays-any-payload"]
server = MCPServer("plain-text-errors")


@server.tool(structured_output=True)
async def create_task(
    summary: str, details: str, owner: str, urgency: str | None = None, request_key: str | None = None
) -> dict[str, Any]:
    """Create a task; a repeated request_key answers the first task."""
    if not store.valid_key(request_key):
        raise ToolError(f"invalid request key {request_key!r}")
    fields = {"summary": summary, "details": details, "owner": owner, "urgency": urgency}
    with store.LOCK:
        first = store.find(request_key)
        if first is None and request_key in PENDING:
            raise ToolError("this request key is still being processed; retry later")
        PENDING.update([request_key] if first is None and request_key else [])
    if first is not None:
        if first["fields"] != fields and not REPLAYS_ANY_PAYLOAD:
            raise ToolError("this request key was already used for a different task")
        return {"task": first["id"], "existing": True}
    await anyio.sleep(0.05)  # the work: a concurrent duplicate arrives while it runs
    with store.LOCK:
        effect = store.add(request_key, fields)
        PENDING.discard(request_key or "")
    return {"task": effect["id"], "existing": False}


@server.resource("tasks://all", mime_type="application/json")
def all_tasks() -> str:
    return json.dumps({"tasks": store.effects()})


server.run("stdio")
