"""What MCP's two wires share: JSON-RPC 2.0 messages, the ``tools/call`` of the bound
tool (the key as an argument or in ``_meta``), the listing by tool or resource, and
the parts of an answer.

The MCP client is written here, on the standard library, rather than taken from the
``mcp`` SDK: the kit must own every wait (bounded by its own timeouts, on its own
threads), the server process (its own process group, SIGKILLed at will) and the
connection (its answer withheld or the call cut by the kit's proxy, ``proxy.py``, to
lose a response for real). The SDK
is what the servers under test are built with; the kit only speaks the protocol.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from typing import Any

from retryproof.adapters.binding.transports.base import Gone, Transport, parse_json

#: The MCP revision the kit asks for; a server may answer another it supports.
MCP_PROTOCOL_VERSION = "2025-06-18"


def jsonrpc_request(request_id: int, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}


def initialize_params() -> dict[str, Any]:
    return {
        "protocolVersion": MCP_PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "retryproof", "version": "1"},
    }


def mcp_answer(message: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a JSON-RPC response to a ``tools/call`` or ``resources/read``."""
    if "error" in message:
        return {"error": message["error"]}
    result = message.get("result")
    if not isinstance(result, Mapping):
        raise Gone(f"a JSON-RPC response without a result object: {str(message)[:200]}")
    text = None
    blocks = result.get("content") or result.get("contents") or []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, Mapping) and isinstance(block.get("text"), str):
            text = parse_json(block["text"].encode("utf-8"))
            break
    return {"result": result.get("structuredContent"), "text": text, "isError": bool(result.get("isError"))}


class Mcp(Transport):
    """An MCP server; its wire sends one JSON-RPC request and returns the response."""

    answer_roots = ("result", "text", "isError", "error")
    call_needs = (("tool",), "an mcp call needs the tool name")
    foreign = {"call": ("method", "path"), "call.key": ("header",), "listing": ("get",)}

    @abstractmethod
    def request(self, method: str, params: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """The JSON-RPC response to one request; ``Gone`` when none comes."""

    def tool_call(self, arguments: dict[str, Any], key: str | None) -> dict[str, Any]:
        """The ``tools/call`` parameters of the bound call."""
        kind, name = self.binding.key
        params: dict[str, Any] = {"name": self.binding.tool, "arguments": arguments}
        if key is not None and kind == "argument":
            arguments[name] = key
        elif key is not None:
            params["_meta"] = {name: key}
        return params

    def call(self, arguments: dict[str, Any], key: str | None, timeout: float) -> dict[str, Any]:
        return mcp_answer(self.request("tools/call", self.tool_call(arguments, key), timeout))

    def listing(self, timeout: float) -> tuple[dict[str, Any], str | None]:
        listing = self.binding.listing
        if "tool" in listing:
            message = self.request("tools/call", {"name": listing["tool"], "arguments": {}}, timeout)
        else:
            message = self.request("resources/read", {"uri": listing["resource"]}, timeout)
        answer = mcp_answer(message)
        failed = answer.get("error") is not None or answer.get("isError")
        return answer, "the listing answered an error:" if failed else None
