"""``python -m retryproof.reference_impl --mcp stdio|http``: the reference runtime as an
MCP server, built with the official ``mcp`` SDK (the optional extra ``retryproof[mcp]``).

Tool ``write_task(task, idempotency_key?)`` answers the creation result as structured
content; a conflict or a rejection is an error result whose structured content is the
conflict result or ``{"error": {code, message}}`` (``served.submit``). Tool
``list_tasks`` lists every task on disk. Over http it serves streamable HTTP at
``/mcp`` on 127.0.0.1 at ``RETRYPROOF_PORT``.
"""

from __future__ import annotations

import gc
from typing import Any, cast

from retryproof.reference_impl import served
from retryproof.reference_impl.runtime import Runtime


def serve(runtime: Runtime, transport: str, port: int | None, name: str) -> None:
    # The SDK's import leaves a heap of long-lived objects (its types and schemas) that
    # the collector need never walk: not while they pile up (collections during the
    # import took a tenth of its CPU), not at each full collection, and not at exit,
    # where walking them took longer than serving (0.6-0.9 s after stdin closed).
    gc.disable()
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp_types import CallToolResult, TextContent
    finally:
        gc.freeze()
        gc.enable()

    server = MCPServer(name)

    @server.tool(structured_output=True)
    def write_task(task: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        """Create one task; a retry with the same idempotency_key answers the first task."""
        status, body = served.submit(runtime, task, idempotency_key)
        if status < 300:
            return body
        # An error result the SDK passes through as it is, structured content included.
        return cast(
            Any,
            CallToolResult(content=[TextContent(type="text", text=str(body))], structured_content=body, is_error=True),
        )

    @server.tool(structured_output=True)
    def list_tasks() -> dict[str, Any]:
        """Every task on disk, with the key it was created under."""
        return served.listing(runtime)

    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=port or 0, streamable_http_path="/mcp")
