"""The claim store (``claim_store.py``) as an MCP server over streamable HTTP, on the
standard library: ``claim_stdio.py``'s tools, one JSON-RPC message per POST, each
request answered in JSON, as ``claim_mcp.py`` serves them with the official SDK.

Why not the SDK here: KILL-NEMESIS SIGKILLs its server five times and starts it again
each time, and an SDK start costs its import, 0.6-0.8 CPU-s (claim_mcp.py's run of it
started the SDK server seven times). A SIGKILL of an SDK server and the kit's new
session on the new one are the reference's (test_binding_mcp.py's
A2-CRASH-BEFORE-RESPONSE); what this one is for is the claim store's windows on this
wire, and a cut's cancel (A2-RESPONSE-LOSS, passed here; failed by claim_mcp.py's
``cancel-leaves-claim``). What those need of a streamable HTTP
server this does as the SDK's does: calls run side by side; ``initialize`` answers a
session id that every later message must carry, and that a server started again no
longer knows (404: a client must begin a new session); ``notifications/cancelled``
cancels its call while it waits between claim and effect, and the call then answers
nothing. RETRYPROOF_STATE_DIR, RETRYPROOF_PORT, RETRYPROOF_DEFECT."""

from __future__ import annotations

import json
import os
import threading

import claim_stdio
from json_service import JsonHandler, serve

TYPE_CHECKING = False  # not typing's: importing typing costs each start of this -S service 3-4 ms of CPU
if TYPE_CHECKING:
    from typing import Any

#: The sessions ``initialize`` began in this process, and each one's cancels by request id.
SESSIONS: dict[str, dict[Any, threading.Event]] = {}
LOCK = threading.Lock()


class Handler(JsonHandler):
    def do_POST(self) -> None:  # noqa: N802
        message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize":
            session = os.urandom(16).hex()
            SESSIONS[session] = {}
            return self.answer(200, claim_stdio.reply(message), fields=(f"Mcp-Session-Id: {session}",))
        cancels = SESSIONS.get(self.headers.get("mcp-session-id", ""))
        if cancels is None:
            error = {"code": -32600, "message": "Session not found"}
            return self.answer(404, {"jsonrpc": "2.0", "id": request_id, "error": error})
        if request_id is None:  # a notification: accepted, and a cancel acted on
            if method == "notifications/cancelled":
                self._cancelled(cancels, message["params"]["requestId"]).set()
            return self.answer(202, None)
        if method != "tools/call":
            return self.answer(200, claim_stdio.reply(message))
        answer = claim_stdio.call(request_id, message.get("params") or {}, self._cancelled(cancels, request_id))
        if answer is None:  # cancelled
            self.close_connection = True
            return None
        return self.answer(200, answer)

    @staticmethod
    def _cancelled(cancels: dict[Any, threading.Event], request_id: Any) -> threading.Event:
        with LOCK:
            return cancels.setdefault(request_id, threading.Event())


serve(Handler)
