"""A task API that says it is ready (its port accepts) while it goes on starting: a
thread appends start-up records to ``startup.log`` in its state directory, each
fsynced, every 20 ms from its start for ``OPENING_S`` before the port accepts and
``TAIL_S`` after, as a server's storage opens its files across its ready. Effects
are kept durably under their caller's key (a temporary file, fsynced, renamed, the
folder fsynced); a replay answers exactly as the creation did, so the kit reads the
listing (``waiting_listing.py``) before each write. With ``--log-listings`` it also
appends a line to ``listings.log``, fsynced, for each listing it answers, as a server
that records its admin calls durably does: a listing's calls, not a write's.

A request that comes while it is still starting (from a kit that did not wait for it to
settle) keeps it starting until a write has been answered, and that write's answer
waits for one more start-up record: the write's recorded calls then hold start-up ones
however late within the tail that kit came (without this, a kit that did not settle
passed test_crash_points_bindings' write-point checks in 1 of 3 runs at load 14).
RETRYPROOF_STATE_DIR, RETRYPROOF_PORT."""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# The effects are kept as every tool-shape test service keeps them (tests/bindings).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings"))
from keyed_store import LOCK, STATE, add, effects, find  # noqa: E402

#: The tail past the ready is what the kit must see and settle; 0.4 s leaves room for a
#: kit stalled a tenth of a second or two on a loaded machine. Each start waits out both
#: (six traced in test_crash_points_bindings.py): 0.4 s and 0.6 s took 0.4 s more a start.
OPENING_S, TAIL_S = 0.2, 0.4
#: The longest it goes on starting for a request that came early.
EARLY_BOUND_S = 10.0

RECORDED = threading.Condition()  # notified at each start-up record and at the end
STARTUP = {"records": 0, "ended": False}
EARLY, ANSWERED = threading.Event(), threading.Event()


def go_on_starting() -> None:
    fd = os.open(os.path.join(STATE, "startup.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    began = time.monotonic()
    while (now := time.monotonic()) < began + OPENING_S + TAIL_S or (
        EARLY.is_set() and not ANSWERED.is_set() and now < began + EARLY_BOUND_S
    ):
        os.write(fd, b"opening\n")
        os.fsync(fd)
        with RECORDED:
            STARTUP["records"] += 1
            RECORDED.notify_all()
        time.sleep(0.02)
    os.close(fd)
    with RECORDED:
        STARTUP["ended"] = True
        RECORDED.notify_all()


def still_starting() -> bool:
    """Whether a request came while it was still starting (it then goes on until a write
    has been answered)."""
    with RECORDED:
        if not STARTUP["ended"]:
            EARLY.set()
        return not STARTUP["ended"]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        fields = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        key = self.headers.get("Idempotency-Key")
        starting = still_starting()
        with LOCK:
            effect = find(key) or add(key, fields)
        if starting:  # one more start-up record inside this write
            with RECORDED:
                after = STARTUP["records"]
                RECORDED.wait_for(lambda: STARTUP["records"] > after or STARTUP["ended"], EARLY_BOUND_S)
        self.answer(200, effect)
        ANSWERED.set()

    def do_GET(self) -> None:  # noqa: N802
        still_starting()
        if "--log-listings" in sys.argv:
            with open(os.path.join(STATE, "listings.log"), "a", encoding="utf-8") as log:
                log.write("listed\n")
                log.flush()
                os.fsync(log.fileno())
        self.answer(200, effects())

    def answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


threading.Thread(target=go_on_starting, daemon=True).start()
time.sleep(OPENING_S)
server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["RETRYPROOF_PORT"])), Handler)
server.serve_forever()
