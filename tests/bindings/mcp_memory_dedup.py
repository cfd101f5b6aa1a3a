"""An MCP server (official SDK) whose write tool deduplicates in process memory: each
effect is a durable file, but which key made which effect lives only in a dict, so a
restart forgets it and the retry makes a second effect. The tool takes its own
argument names (``title``, ``description``, ...) and its key in the request's
``_meta`` (``idempotencyKey``); a resource lists the effects with their keys.
``python mcp_memory_dedup.py`` serves stdio."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from sdk import Context, MCPServer

STATE = os.environ["RETRYPROOF_STATE_DIR"]
LOCK = threading.Lock()
SEEN: dict[str, str] = {}
server = MCPServer("memory-dedup")


def effects() -> list[dict[str, Any]]:
    found = []
    for name in sorted(os.listdir(STATE)):
        if name.endswith(".tmp"):
            continue
        with open(os.path.join(STATE, name), encoding="utf-8") as handle:
            found.append(json.load(handle))
    return found


@server.tool(structured_output=True)
def create_ticket(
    title: str | None = None,
    description: str | None = None,
    author: str | None = None,
    assignee: str | None = None,
    priority: str | None = None,
    thread: str | None = None,
    links: list[str] | None = None,
    ctx: Context | None = None,
) -> dict[str, Any]:
    """Open a ticket; a repeated idempotencyKey in _meta answers the first ticket (while this process lives)."""
    idempotencyKey = ((ctx.request_context.meta if ctx else None) or {}).get("idempotencyKey")  # noqa: N806
    fields = {"title": title, "description": description, "author": author, "assignee": assignee}
    fields |= {"priority": priority, "thread": thread, "links": links}
    with LOCK:
        if idempotencyKey in SEEN:
            return {"ticket": SEEN[idempotencyKey], "replayed": True}
        ticket = f"TCK-{len(effects()) + 1}"
        path = os.path.join(STATE, ticket)
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"ticket": ticket, "key": idempotencyKey, "fields": fields}, handle)
        os.replace(path + ".tmp", path)
        if idempotencyKey is not None:
            SEEN[idempotencyKey] = ticket
    return {"ticket": ticket, "replayed": False}


@server.resource("tickets://all", mime_type="application/json")
def all_tickets() -> str:
    return json.dumps({"tickets": effects()})


server.run("stdio")
