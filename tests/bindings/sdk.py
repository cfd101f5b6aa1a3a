"""The official MCP SDK's names the SDK servers here use (claim_mcp.py,
mcp_memory_dedup.py, mcp_plain_text_errors.py), imported with the garbage collector
paused. The suite starts these servers dozens of times, and each start is mostly the
SDK's import, during which the collector walked the heap of objects the import builds
again and again: a start of claim_mcp.py until its port accepts took 0.64 CPU-s
instead of 0.74 (eight each, alternating, 2 CPUs, load 7.5), and frozen, that heap
is not walked again while the server runs. The reference's server does the same."""

import gc

gc.disable()
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp_types import CallToolResult, TextContent  # noqa: E402

gc.freeze()  # what the import left lives as long as the server: no collection walks it
gc.enable()

__all__ = ["CallToolResult", "Context", "MCPServer", "TextContent", "ToolError"]
