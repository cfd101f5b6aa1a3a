"""A harness that stops reading its input can fill the pipe; the kit's calls must
still end within their timeout instead of blocking on the write."""

import sys
import textwrap
import threading

from retryproof.adapters.connection import Lost
from retryproof.adapters.process import ProcessConnection

# Answers hello, then never reads again.
DEAF = textwrap.dedent(
    """
    import json, sys, time
    request = json.loads(sys.stdin.readline())
    sys.stdout.write(json.dumps({"id": request["id"], "ok": True, "result": {"protocol": "retryproof-harness/1"}}) + "\\n")
    sys.stdout.flush()
    time.sleep(60)
    """
)


def test_calls_to_a_harness_that_stopped_reading_end_as_lost(tmp_path):
    connection = ProcessConnection(
        [sys.executable, "-S", "-c", DEAF], str(tmp_path), call_timeout=0.5, start_timeout=10
    )
    connection.start()
    replies = []
    try:
        # Far more than a pipe buffer holds: a write on the caller's thread would block.
        caller = threading.Thread(
            target=lambda: replies.extend(
                connection.wait(connection.submit("echo", {"pad": "x" * 65536})) for _ in range(8)
            ),
            daemon=True,
        )
        caller.start()
        caller.join(30)
        assert not caller.is_alive(), "a call blocked on writing to the harness"
    finally:
        connection.kill()
    assert len(replies) == 8 and all(isinstance(reply, Lost) for reply in replies)
