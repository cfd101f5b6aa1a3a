"""The reference's HTTP API (``--http``) as a client meets it: its own HTTP/1.1 framing
(reference_impl/http_service.py says why it is not ``http.server``'s) keeps connections
as HTTP/1.1 says, refuses what it cannot read with a status and a closed connection, and
loads none of ``http.server``'s imports at start."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import time

import pytest

from retryproof.adapters.loopback import free_port
from retryproof.conformance.options import REFERENCE_COMMAND

#: What ``http.server`` would load, and argparse: none of it at the start of ``--http``.
NOT_AT_START = ("http.server", "http.client", "email", "ssl", "urllib", "argparse", "typing")


def started(state_dir, *python_options: str) -> tuple[int, subprocess.Popen[str]]:
    """The reference over HTTP, started as the kit starts it, once it listens: its port and process."""
    port = free_port()
    python, *arguments = REFERENCE_COMMAND
    process = subprocess.Popen(
        [python, *python_options, *arguments, "--http"],
        env={**os.environ, "RETRYPROOF_STATE_DIR": str(state_dir), "RETRYPROOF_PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            return port, process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                ended(process)
                raise AssertionError(
                    f"the service did not listen: {process.stderr.read() if process.stderr else ''}"
                ) from None
            time.sleep(0.02)


def ended(process: subprocess.Popen[str]) -> int:
    """``process`` ended by SIGTERM (SIGKILL if it outstays 30 s); its exit status."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.wait()


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    """One service for the framing tests (each uses keys of its own): one start, not one a test."""
    port, process = started(tmp_path_factory.mktemp("http-service"))
    yield port
    ended(process)


def exchange(port: int, raw: bytes) -> bytes:
    """Everything the service sends for ``raw`` until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(raw)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass  # closed with what was sent unread: what came before the reset is the answer
    return received


def post(connection: http.client.HTTPConnection, body: bytes, key: str | None) -> http.client.HTTPResponse:
    headers = {"Content-Type": "application/json", **({"Idempotency-Key": key} if key else {})}
    connection.request("POST", "/tasks", body=body, headers=headers)
    return connection.getresponse()


def test_one_kept_connection_creates_replays_conflicts_and_lists(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    created = post(connection, b'{"subject": "Fix login"}', "key-1")
    first = json.loads(created.read())
    assert (created.status, created.getheader("Idempotent-Replayed")) == (201, None)
    assert created.getheader("Content-Type") == "application/json" and created.getheader("Date")
    replayed = post(connection, b'{"subject": "Fix login"}', "key-1")
    assert (replayed.status, replayed.getheader("Idempotent-Replayed")) == (200, "true")
    assert json.loads(replayed.read())["task_id"] == first["task_id"]
    conflict = post(connection, b'{"subject": "Other"}', "key-1")
    assert conflict.status == 422 and conflict.read()
    legacy = post(connection, b'{"subject": "Fix login"}', None)
    assert legacy.status == 201 and json.loads(legacy.read())["task_id"] != first["task_id"]
    connection.request("GET", "/tasks")
    listing = connection.getresponse()
    tasks = json.loads(listing.read())["tasks"]
    assert listing.status == 200 and listing.getheader("Idempotent-Replayed") is None
    assert [task["task_id"] for task in tasks if task["client_submission_id"] == "key-1"] == [first["task_id"]]
    connection.close()


def test_bad_bodies_and_paths_are_answered_and_the_connection_stays(port):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    bad = post(connection, b'{"subject": "a", "subject": "b"}', "key-2")
    assert bad.status == 400 and json.loads(bad.read())["error"]["code"] == "invalid_request"
    bad_key = post(connection, b'{"subject": "a"}', " ")
    assert bad_key.status == 400 and json.loads(bad_key.read())["error"]["code"] == "invalid_submission_id"
    connection.request("POST", "/elsewhere", body=b"{}")
    missing = connection.getresponse()
    assert missing.status == 404 and json.loads(missing.read())["error"]["code"] == "not_found"
    after = post(connection, b'{"subject": "a"}', "key-2")
    assert after.status == 201 and after.read()
    connection.close()


def test_an_http_1_1_connection_stays_open_for_the_next_request(port):
    # Two requests on one socket: a service that closed after the first answer sends one.
    answer = exchange(port, b"GET /tasks HTTP/1.1\r\n\r\nGET /tasks HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2


@pytest.mark.parametrize("space", [b"\xa0", b"\x0b", b"\x85", b"\x1f"])
def test_a_key_is_stripped_of_spaces_and_tabs_only_so_other_white_space_keeps_it_invalid(port, space):
    body = b'{"subject": "a"}'
    answer = exchange(
        port,
        b"POST /tasks HTTP/1.1\r\nIdempotency-Key: \t key-4%s \r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
        % (space, len(body), body),
    )
    head, _, text = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and json.loads(text)["error"]["code"] == "invalid_submission_id"


def test_http_1_0_and_connection_close_end_the_connection_after_the_answer(port):
    body = b'{"subject": "Old client"}'
    old = exchange(port, b"POST /tasks HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert old.startswith(b"HTTP/1.1 201 Created\r\n") and b"\r\nConnection: close\r\n" in old
    closing = exchange(port, b"GET /tasks HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert closing.startswith(b"HTTP/1.1 200 OK\r\n") and closing.count(b"HTTP/1.1 ") == 1
    assert {"subject": "Old client"} in [
        task["task"] for task in json.loads(closing.partition(b"\r\n\r\n")[2])["tasks"]
    ]


def test_a_client_expecting_100_continue_gets_it_before_sending_the_body(port):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        body = b'{"subject": "Large"}'
        connection.sendall(b"POST /tasks HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert connection.recv(25) == b"HTTP/1.1 100 Continue\r\n\r\n"
        connection.sendall(body)
        assert connection.recv(65536).startswith(b"HTTP/1.1 201 Created\r\n")


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"garbage\r\n\r\n", 400),
        (b"POST /tasks HTTP/2.0\r\n\r\n", 505),
        (b"PUT /tasks HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 501),
        (b"POST /tasks HTTP/1.1\r\nContent-Length: ten\r\n\r\n", 400),
        (b"POST /tasks HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % ((1 << 20) + 1), 413),
        (b"GET /" + b"x" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /tasks HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431),
        (b"GET /tasks HTTP/1.1\r\nno colon here\r\n\r\n", 400),
        (b"POST /tasks HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n", 400),
        (b"POST /tasks HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", 400),
        (b"POST /tasks HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
        (b"POST /tasks HTTP/1.1\r\nIdempotency-Key: k1\r\nIdempotency-Key: k2\r\nContent-Length: 2\r\n\r\n{}", 400),
    ],
    ids=[
        "request-line",
        "version",
        "method",
        "length",
        "too-large",
        "long-line",
        "many-headers",
        "header-line",
        "superscript-length",
        "huge-length",
        "two-lengths",
        "two-keys",
    ],
)
def test_what_cannot_be_read_is_refused_with_a_status_and_a_closed_connection(port, request_bytes, status):
    answer = exchange(port, request_bytes + b"GET /tasks HTTP/1.1\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 %d " % status) and b"\r\nConnection: close" in head
    assert json.loads(body)["error"]["code"] == "invalid_request" and answer.count(b"HTTP/1.1 ") == 1


def test_the_service_loads_nothing_of_http_server_at_start_and_sigterm_ends_it(tmp_path):
    port, process = started(tmp_path, "-X", "importtime")
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        assert post(connection, b'{"subject": "a"}', "key-3").status == 201
        connection.close()
    finally:
        assert ended(process) == 0
    assert process.stderr is not None
    imported = {
        line.rpartition("|")[2].strip() for line in process.stderr.read().splitlines() if "import time:" in line
    }
    assert "retryproof.reference_impl.http_service" in imported
    assert sorted(name for name in imported if name.partition(".")[0] in NOT_AT_START or name in NOT_AT_START) == []
