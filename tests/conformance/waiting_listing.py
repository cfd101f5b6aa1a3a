"""The listing of ``still-starting.yaml``: the effects its server lists, asked over HTTP
and, like a listing that must wait for its server to come up, retried while the
connection is refused (or the answer is not a success), for up to ``WAIT_S``.
``python waiting_listing.py PORT``.

It asks with one HTTP/1.0 GET on a socket, read to the server's close, not with
urllib: the kit runs a listing before each write, and importing urllib.request
(http.client, email, ssl) cost each run of this command more CPU than the rest of it."""

import socket
import sys
import time

WAIT_S = 10.0
deadline = time.monotonic() + WAIT_S
while True:
    try:
        with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as connection:
            connection.sendall(b"GET /tasks HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b"".join(iter(lambda: connection.recv(65536), b""))
        head, _, body = answer.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if status[:7] == b"HTTP/1." and status[9:10] == b"2":
            sys.stdout.write(body.decode())
            break
        failure = f"the listing answered {status.decode('iso-8859-1')!r}"
    except ConnectionRefusedError as exc:
        failure = str(exc)
    if time.monotonic() > deadline:
        raise SystemExit(f"waiting_listing.py: {failure}")
    time.sleep(0.1)
