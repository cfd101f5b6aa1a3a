"""The harness side of an HTTP ``Idempotency-Key`` library: real requests to the real
service, translated into ``retryproof-harness/1``.

The service (a Django or Express app around the library under test) is started by the
harness as a child process on a free loopback port, with the kit's
``RETRYPROOF_STATE_DIR`` and ``RETRYPROOF_FAILPOINTS``; it dies with the harness
(``PR_SET_PDEATHSIG``), so a SIGKILL of the harness is a SIGKILL of the runtime. Its
route (``path``: ``POST /tasks`` unless a harness names another) creates a task in the
shared ``task_store`` format, which the harness reads for ``list_tasks`` and ``read_task`` (the authoritative state, never
what the service answered).

Translation, the same for every library:

* ``write_task`` -> ``POST <path>`` with the task as the JSON body and the
  submission id in the ``Idempotency-Key`` header (no header on the legacy path),
  plus ``X-Retryproof-Call``, a fresh nonce the app echoes into its response. A
  response naming this call's nonce was produced by this call (``created``); one
  naming another nonce is a stored response the library replayed (``reused``).
* A status the library answers with for a request it refuses is passed on as the
  error code its library names (each harness's ``STATUS_CODES``); 400 from the app's
  own validation is ``invalid_request``; a 5xx is ``io_error`` (the app failed, the
  effect may have happened).
* The service died during a call (a ``crash`` failpoint inside it): the harness
  SIGKILLs itself too, as the whole runtime would have died.
"""

from __future__ import annotations

import ctypes
import http.client
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result
from retryproof.adapters.loopback import PortTaken, await_accepting, start_on_free_port
from retryproof.adapters.python_host import HostedRuntime
from retryproof.spec.digest import check_submission_id
from retryproof.spec.protocol import ProtocolError, crash_now

#: Bounds: the service's start-up, and one request (the kit's own call timeout is longer).
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 20.0
CALL_HEADER = "X-Retryproof-Call"
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the service's process, before exec: SIGKILL it when the harness dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class HttpServiceRuntime(StoreListing, HostedRuntime):
    """A hosted runtime whose ops are HTTP requests to a child service."""

    capabilities = ("write_task", "legacy", "tamper")
    #: HTTP status -> protocol error code, for statuses the library itself answers with.
    status_codes: Mapping[int, str] = {}
    #: The route that creates a task.
    path = "/tasks"

    def __init__(
        self,
        state_dir: str,
        failpoints: Mapping[str, str],
        command: Sequence[str],
        cwd: str,
        environment: Mapping[str, str] | None = None,
        port: int | None = None,
    ):
        super().__init__(state_dir, failpoints)
        self.store = TaskStore(state_dir)
        self._command, self._cwd = list(command), cwd
        self._environment = dict(os.environ, **(environment or {}))
        try:
            start_on_free_port(self._start_service, self._port_taken, port)
        except PortTaken as exc:
            raise RuntimeError(f"the service did not start: {exc}") from None

    def _start_service(self, port: int) -> None:
        """One start of the service on ``port``, waited for until it is ready (``_await_service``)."""
        self.port = port
        self.service = subprocess.Popen(
            self._command,
            cwd=self._cwd,
            env={**self._environment, "PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            preexec_fn=_die_with_parent,
        )
        self._await_service()

    def _await_service(self) -> None:
        problem = await_accepting(self.service, self.port, time.monotonic() + START_TIMEOUT_S)
        if problem:
            self.service.kill()
            raise RuntimeError(f"the service did not start: {problem}")

    def _port_taken(self, _: PortTaken) -> None:
        self.service.kill()
        self.service.wait()

    def close(self) -> None:
        self.service.terminate()
        try:
            self.service.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.service.kill()
            self.service.wait()

    def _post(self, body: bytes, headers: Mapping[str, str]) -> tuple[int, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT_S)
        try:
            connection.request("POST", self.path, body=body, headers={"Content-Type": "application/json", **headers})
            response = connection.getresponse()
            status, text = response.status, response.read()
        except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            if self._service_died():
                crash_now()
            raise OSError(5, f"the service failed the request: {type(exc).__name__}: {exc}") from None
        finally:
            connection.close()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, {"raw": text.decode("utf-8", "replace")[:500]}

    def _service_died(self) -> bool:
        try:
            self.service.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return False
        return True

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        caller = uuid.uuid4().hex
        headers = {CALL_HEADER: caller, **self.request_headers(task, client_submission_id)}
        # ASCII JSON: a lone surrogate (an invalid task) travels as an escape for the app to refuse.
        status, answer = self._post(json.dumps(task).encode("ascii"), headers)
        if isinstance(answer, dict) and "task_id" in answer and "caller" in answer:
            self.failpoint("write_task.after_commit")
            return {**creation_result(answer, caller, client_submission_id), "http_status": status}
        detail = f"HTTP {status}: {json.dumps(answer)[:300]}"
        if status in self.status_codes:
            raise ProtocolError(self.status_codes[status], detail)
        if status == 400:
            raise ProtocolError("invalid_request", detail)
        if status >= 500:
            raise OSError(5, detail)
        raise ProtocolError("internal_error", f"unexpected answer {detail}")

    def request_headers(self, task: Any, client_submission_id: str | None) -> dict[str, str]:
        """The headers of a creation besides the call nonce: the key, if any."""
        if client_submission_id is None:
            return {}
        return {"Idempotency-Key": check_submission_id(client_submission_id)}

    def tamper(self, action: str, **args: Any) -> Mapping[str, Any]:
        if action == "remove_task":
            self.store.remove(args["task_id"])
        elif action == "set_receipt_schema":
            # The library's record holds no digest schema version: one an older app
            # version wrote is exactly what this one writes, so there is nothing to change.
            pass
        else:
            raise ProtocolError("invalid_request", f"tamper action {action!r} has no counterpart in this library")
        return {}
