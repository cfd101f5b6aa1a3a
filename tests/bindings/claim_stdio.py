"""The claim store (``claim_store.py``) as an MCP server over stdio, on the standard
library: tool ``create_task(task, idempotency_key)``, tool ``list_effects``, as
``claim_mcp.py`` serves them over streamable HTTP with the official SDK (and
``claim_streamable.py`` with this module's tools, on the standard library).

Why not the SDK here: its import costs 0.5-1 CPU-s at every start, and the fault
scenarios start this server dozens of times (every kill, every cut over a pipe). The
kit's stdio client is proven against the SDK by the reference's server
(test_binding_mcp.py) and the SDK servers of test_tool_shapes.py; what this one is
for is the claim store's windows. What those need of a stdio server this does as the
SDK's does: calls run side by side, and once its input closes (the caller went away)
the calls still between claim and effect are cancelled, the others finish, and the
server exits. RETRYPROOF_STATE_DIR, RETRYPROOF_DEFECT."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time

import claim_store

TYPE_CHECKING = False  # not typing's: importing typing costs each start of this -S service 3-4 ms of CPU
if TYPE_CHECKING:
    from typing import Any

#: Set once the input closes: every call still waiting before its effect is cancelled.
LEFT = threading.Event()
WRITE = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with WRITE, contextlib.suppress(BrokenPipeError):  # a caller gone: nobody to answer
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def result(structured: dict[str, Any], error: bool = False) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
        "isError": error,
    }


def create_task(arguments: dict[str, Any], cancelled: threading.Event) -> dict[str, Any] | None:
    """One task; a retry with the same key answers the first. None: ``cancelled`` was
    set while the call waited between claim and effect."""
    key = arguments["idempotency_key"]
    answered = claim_store.begin(key, arguments["task"])
    if answered is None:
        if cancelled.wait(claim_store.WORK_S):
            claim_store.abandon(key)
            return None
        effect = claim_store.make(key, arguments["task"])
        time.sleep(claim_store.SETTLE_S)  # past the effect nothing cancels the call
        answered = claim_store.finish(key, effect)
    status, body = answered
    return result({**body, "replayed": status == 200}) if status < 300 else result(body, error=True)


def call(request_id: Any, params: dict[str, Any], cancelled: threading.Event) -> dict[str, Any] | None:
    """The answer to a ``tools/call`` (None: cancelled, nothing to answer)."""
    name = params.get("name")
    if name == "list_effects":
        answer: dict[str, Any] | None = result({"effects": claim_store.effects()})
    elif name == "create_task":
        answer = create_task(params.get("arguments") or {}, cancelled)
    else:  # as the SDK answers a tool it does not have: at once, never a silent call
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"Unknown tool: {name}"}}
    return None if answer is None else {"jsonrpc": "2.0", "id": request_id, "result": answer}


def reply(message: dict[str, Any]) -> dict[str, Any]:
    """The answer to a request other than ``tools/call``: ``initialize``, ``ping``."""
    answer: dict[str, Any] = {"result": {}}  # ping
    if message["method"] == "initialize":
        version = (message.get("params") or {}).get("protocolVersion")
        info = {"name": "claim-store", "version": "1"}
        answer = {"result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}}
    elif message["method"] != "ping":
        answer = {"error": {"code": -32601, "message": f"no method {message['method']}"}}
    return {"jsonrpc": "2.0", "id": message["id"], **answer}


def _call_and_send(request_id: Any, params: dict[str, Any]) -> None:
    if (answer := call(request_id, params, LEFT)) is not None:
        send(answer)


def main() -> None:
    calls = []
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method is None or request_id is None:  # a notification, or an answer to nothing we asked
            continue
        if method == "tools/call":
            calls.append(threading.Thread(target=_call_and_send, args=(request_id, message.get("params") or {})))
            calls[-1].start()
            continue
        send(reply(message))
    LEFT.set()
    for thread in calls:
        thread.join()


if __name__ == "__main__":  # claim_streamable.py serves the same tools over streamable HTTP
    main()
