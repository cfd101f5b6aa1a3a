"""An MCP stdio server that writes lines that are no JSON-RPC message on stdout (a log
line where a client reads only messages) is told so: the failed handshake counts them
and quotes the first, escaped and cut short. They used to be dropped silently, and the
handshake ended "no answer within 0.99993s" (the time left of the start timeout, not
the bound)."""

import pytest
from binding_helpers import STDLIB, claim_binding

from retryproof.adapters.binding import parse
from retryproof.adapters.binding.connection import BindingConnection
from retryproof.adapters.connection import HarnessStartError

#: The first line: a coloured banner far longer than what is quoted of it.
BANNER = "\x1b[1mtask server\x1b[0m starting on stdio " + "." * 200
#: Never answers initialize: writes the banner, a plain line, a JSON number and a blank
#: line (not counted), then reads its input until the kit ends it.
CHATTY = f"""
import sys
sys.stdout.write({BANNER!r} + "\\nready\\n42\\n\\n")
sys.stdout.flush()
sys.stdin.buffer.read()
"""


def test_lines_that_are_no_json_rpc_message_are_counted_and_the_first_quoted(tmp_path):
    server = tmp_path / "chatty.py"
    server.write_text(CHATTY)
    document = claim_binding("mcp-stdio")
    document["start"] = {"command": [*STDLIB, str(server)]}
    state = tmp_path / "state"
    state.mkdir()
    connection = BindingConnection(parse(document, "chatty.yaml"), str(state), start_timeout=1)
    try:
        with pytest.raises(HarnessStartError) as raised:
            connection.start()
    finally:
        connection.kill()
    quoted = repr(BANNER.encode()[:120])
    assert raised.value.message == (
        "the server was not ready: initialize: no answer within 1s; the server wrote 3 line(s) on stdout that are"
        f" no JSON-RPC message, the first: {quoted}..."
    ), raised.value.message
