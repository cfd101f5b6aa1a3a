"""A tiny protocol client for the reference harness, knowing only ``spec``.

The tests drive the harness as a real OS process, started as the kit starts it (``python -S
reference_impl/launch.py``: the same ``main`` as ``python -m retryproof.reference_impl``, less
the ``site`` module's start cost; test_startup_imports.py holds the two alike), so what they
prove holds for the harness a vendor would read. Every success is
validated against its op's result schema on arrival: a shape error fails the test that
provoked it, whatever that test asserts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any

from retryproof.spec import validator
from retryproof.spec.protocol import (
    PROTOCOL,
    Failure,
    Request,
    Success,
    decode_response,
    encode,
    format_failpoints,
)

RESPONSE_TIMEOUT_S = 20.0

#: Where the harness's launcher is: found, not imported (this client knows only ``spec``).
LAUNCHER = os.path.join(os.path.dirname(importlib.util.find_spec("retryproof.reference_impl").origin), "launch.py")


class HarnessDied(Exception):
    """The harness exited (or closed stdout) before answering."""


class Harness:
    """One running reference harness and its connection."""

    def __init__(self, state_dir: os.PathLike[str] | str, failpoints: Mapping[str, str] | None = None, *options: str):
        env = {**os.environ, "RETRYPROOF_STATE_DIR": str(state_dir)}
        env.pop("RETRYPROOF_FAILPOINTS", None)
        if failpoints:
            env["RETRYPROOF_FAILPOINTS"] = format_failpoints(failpoints)
        self.process = subprocess.Popen(
            [sys.executable, "-S", LAUNCHER, *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, as the kit starts it
        )
        self._next_id = 0
        self._responses: dict[int | None, list[Success | Failure]] = {}
        self._arrived = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            response = decode_response(line)
            with self._arrived:
                self._responses.setdefault(response.id, []).append(response)
                self._arrived.notify_all()
        with self._arrived:
            self._closed = True
            self._arrived.notify_all()

    # -- sending

    def send(self, op: str, args: Mapping[str, Any] | None = None) -> int:
        """Send one request without waiting (pipelining); returns its id."""
        with self._arrived:
            self._next_id += 1
            request_id = self._next_id
        request = Request(request_id, op, dict(args or {}))
        try:
            line = encode(request)
        except UnicodeEncodeError:  # a lone surrogate, sent on purpose: only a \u escape carries it
            line = json.dumps(request.to_json()).encode("ascii") + b"\n"
        self.send_line(line)
        return request_id

    def send_line(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def wait(self, request_id: int | None, op: str | None = None) -> Success | Failure:
        """The response to ``request_id`` (``None``: the next id-less one)."""
        with self._arrived:
            arrived = self._arrived.wait_for(
                lambda: self._responses.get(request_id) or self._closed, RESPONSE_TIMEOUT_S
            )
            if not self._responses.get(request_id):
                stderr = self.stderr() if self._closed else ""
                raise HarnessDied(f"no response to {request_id} ({'closed' if arrived else 'timeout'}): {stderr}")
            response = self._responses[request_id].pop(0)
        if isinstance(response, Success) and op is not None:
            errors = sorted(
                validator(f"harness-response#/$defs/{op}_result").iter_errors(dict(response.result)), key=str
            )
            assert not errors, f"{op} result breaks its schema: {errors[0].message} in {dict(response.result)}"
        return response

    def request(self, op: str, **args: Any) -> Success | Failure:
        return self.wait(self.send(op, args), op)

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """A call that must succeed; its result."""
        response = self.request(op, **args)
        assert isinstance(response, Success), f"{op} failed: {response}"
        return dict(response.result)

    def error(self, op: str, **args: Any) -> str:
        """A call that must fail; its error code."""
        response = self.request(op, **args)
        assert isinstance(response, Failure), f"{op} unexpectedly succeeded: {response}"
        return response.code

    def hello(self) -> dict[str, Any]:
        return self.call("hello", protocol=PROTOCOL)

    # -- ending

    def shutdown(self) -> int:
        self.call("shutdown")
        return self.process.wait(RESPONSE_TIMEOUT_S)

    def kill(self) -> None:
        """SIGKILL the whole process group, as the kit does between restarts."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(RESPONSE_TIMEOUT_S)

    def wait_exit(self) -> int:
        return self.process.wait(RESPONSE_TIMEOUT_S)

    def stderr(self) -> str:
        assert self.process.stderr is not None
        return self.process.stderr.read().decode("utf-8", "replace") if self.process.poll() is not None else ""

    def close(self) -> None:
        self.kill()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def snapshot(directory: os.PathLike[str] | str) -> dict[str, bytes | None]:
    """Every path under ``directory`` with its bytes (``None`` for a directory): two
    equal snapshots mean nothing was created, changed or removed."""
    tree: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            tree[os.path.relpath(os.path.join(root, name), directory)] = None
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                tree[os.path.relpath(path, directory)] = handle.read()
    return tree
