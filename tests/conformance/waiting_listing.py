"""The listing of ``still-starting.yaml``: the effects its server lists, asked over HTTP
and, like a listing that must wait for its server to come up, retried while the
connection is refused, for up to ``WAIT_S``. ``python waiting_listing.py PORT``."""

import sys
import time
import urllib.error
import urllib.request

WAIT_S = 10.0
deadline = time.monotonic() + WAIT_S
while True:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/tasks", timeout=5) as response:
            sys.stdout.write(response.read().decode())
            break
    except urllib.error.URLError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
