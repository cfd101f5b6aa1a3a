"""The reference behind a listing that pages and never says so: ``list_tasks`` answers
its first ``PAGE`` tasks only (argv[1]; argv[2:]: the reference's command). Alone, a scenario that lists fewer tasks than a
page passes; on a shared server that earlier scenarios filled past a page, it loses its
own tasks from the listing (test_server_sharing.py)."""

import json
import subprocess
import sys
import threading

PAGE = int(sys.argv[1])
runtime = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
listings: set[object] = set()


def answer() -> None:
    assert runtime.stdout is not None
    for line in runtime.stdout:
        message = json.loads(line)
        if message.get("id") in listings and message.get("ok"):
            listings.discard(message["id"])
            message["result"]["tasks"] = message["result"]["tasks"][:PAGE]
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


threading.Thread(target=answer, daemon=True).start()
assert runtime.stdin is not None
for line in sys.stdin:
    request = json.loads(line)
    if isinstance(request, dict) and request.get("op") == "list_tasks":
        listings.add(request.get("id"))
    runtime.stdin.write(line.encode())
    runtime.stdin.flush()
runtime.stdin.close()
runtime.wait()
