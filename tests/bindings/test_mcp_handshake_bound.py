"""An MCP server that never answers ``initialize`` is told the bound it missed, over
either wire: the start timeout as configured, not "no answer in time" (stdio) nor a
socket's "TimeoutError: timed out" (streamable HTTP)."""

from __future__ import annotations

import pytest
from binding_helpers import STDLIB, claim_binding
from kit import failed_start

from retryproof.adapters.binding import parse
from retryproof.adapters.binding.connection import BindingConnection

#: Reads its input until the kit ends it, and never answers.
SILENT_STDIO = "import sys\nsys.stdin.buffer.read()\n"
#: Accepts on its port and reads what comes, and never answers.
SILENT_HTTP = """
import os, socket
server = socket.create_server(("127.0.0.1", int(os.environ["RETRYPROOF_PORT"])))
held = []
while True:
    connection, _ = server.accept()
    held.append(connection)
    connection.recv(65536)
"""


@pytest.mark.parametrize(
    "wire, script", [("mcp-stdio", SILENT_STDIO), ("mcp-http-stdlib", SILENT_HTTP)], ids=["stdio", "streamable-http"]
)
def test_a_handshake_without_an_answer_names_the_start_timeout(tmp_path, wire, script):
    server = tmp_path / "silent.py"
    server.write_text(script)
    document = claim_binding(wire)
    document["start"]["command"] = [*STDLIB, str(server)]
    state = tmp_path / "state"
    state.mkdir()
    failure, _ = failed_start(BindingConnection(parse(document, "silent.yaml"), str(state), start_timeout=0.75))
    assert failure.message == "the server was not ready: initialize: no answer within 0.75s"
