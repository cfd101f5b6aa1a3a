"""MCP over streamable HTTP: one POST per JSON-RPC message; the answer is JSON or a
server-sent event stream carrying it. The session id of ``initialize`` is sent with
every later message."""

from __future__ import annotations

import copy
import http.client
import itertools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from retryproof.adapters.binding.transports.base import (
    MAX_ANSWER_BYTES,
    Gone,
    Server,
    Transport,
    json_bytes,
    parse_json,
)
from retryproof.adapters.binding.transports.mcp import MCP_PROTOCOL_VERSION, Mcp, initialize_params, jsonrpc_request

if TYPE_CHECKING:
    from retryproof.adapters.binding.transports.base import BoundPath


class _NoAnswer(Gone):
    """The time ran out before the answer came (not a refusal, nor a garbled answer)."""


class McpStreamableHttp(Mcp):
    label = "mcp over streamable HTTP"
    listens = True

    def __init__(self, binding: BoundPath, server: Server):
        super().__init__(binding, server)
        self.url = server.base_url or ""
        self.session: str | None = None
        self.version = MCP_PROTOCOL_VERSION
        self._ids = itertools.count(1)
        self._last_id: int | None = None

    def ready(self, bound_s: float) -> None:
        deadline = time.monotonic() + bound_s
        self.accepting(deadline)
        timeout = max(0.1, deadline - time.monotonic())
        try:
            answer = self.request("initialize", initialize_params(), timeout)
        except _NoAnswer:
            # What was left of the bound ran out: named, it read like a bound of 9.99591 s.
            raise _NoAnswer(f"initialize: no answer within {bound_s:g}s") from None
        if "result" not in answer:
            raise Gone(f"initialize answered {str(answer)[:200]}")
        self.version = str(answer["result"].get("protocolVersion") or MCP_PROTOCOL_VERSION)
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout)

    def request(self, method: str, params: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        request_id = self._last_id = next(self._ids)
        answer = self._post(jsonrpc_request(request_id, method, params), timeout)
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise Gone(f"{method}: an answer for another request: {str(answer)[:200]}")
        return answer

    def through(self, url: str) -> Transport:
        """The same session (its id, its request ids) sent to ``url``."""
        aimed = copy.copy(self)
        aimed.url = url
        return aimed

    def abandon(self, timeout: float) -> None:
        """A caller that gives up says so (``notifications/cancelled``); the SDK then
        cancels the call, as it does when a stdio caller's input ends."""
        if self._last_id is not None:
            params = {"requestId": self._last_id, "reason": "the caller gave up"}
            self._post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}, timeout)

    def _post(self, message: Mapping[str, Any], timeout: float) -> Any:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": self.version,
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        try:
            connection.request("POST", parts.path or "/", body=json_bytes(message), headers=headers)
            response = connection.getresponse()
            self.session = response.getheader("mcp-session-id") or self.session
            if response.status == 202:
                return None
            if response.status >= 400:
                raise Gone(f"HTTP {response.status}: {response.read(2000).decode('utf-8', 'replace')}")
            if (response.getheader("content-type") or "").startswith("text/event-stream"):
                return _from_event_stream(response, message.get("id"))
            return parse_json(response.read(MAX_ANSWER_BYTES))
        except TimeoutError:
            raise _NoAnswer(f"{message.get('method')}: no answer within {timeout:g}s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise Gone(f"{message.get('method')}: {type(exc).__name__}: {exc}") from None
        finally:
            connection.close()


def _from_event_stream(response: http.client.HTTPResponse, request_id: Any) -> Any:
    """The JSON-RPC response with ``request_id`` among the stream's events."""
    data: list[str] = []
    while True:
        line = response.readline(MAX_ANSWER_BYTES + 1)
        if not line:
            raise Gone("the event stream ended without the answer")
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        if text.startswith("data:"):
            data.append(text[5:].lstrip(" "))
        elif not text and data:
            message = parse_json("\n".join(data).encode("utf-8"))
            data = []
            if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
                return message
