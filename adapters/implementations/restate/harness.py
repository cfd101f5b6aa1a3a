"""retryproof-harness/1 for Restate, over its HTTP ingress: starts ``serve.py`` (the
Restate server and the service of ``service.py``) and translates every op into
requests to the ingress (``http_service``): ``POST /tasks/create`` with the task as the
body and the client_submission_id in Restate's ``idempotency-key`` header.

Run with this folder's environment (``./setup install``)::

    .venv/bin/python harness.py
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from importlib.metadata import version
from typing import Any

from retryproof.adapters.implementations.http_service import START_TIMEOUT_S, HttpServiceRuntime
from retryproof.adapters.python_host import serve_hosted

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # serve.py beside this file: this folder is not a package
from serve import ports  # noqa: E402  (the runtime's ports, kept per state directory)


def server_version() -> str:
    with open(os.path.join(HERE, "node_modules", "@restatedev", "restate-server", "package.json")) as handle:
        return json.load(handle)["version"]


class RestateRuntime(HttpServiceRuntime):
    implementation = {
        "name": "restate",
        "version": f"server {server_version()}, sdk-python {version('restate-sdk')}",
        "language": "python",
    }
    failpoints = (
        "write_task.after_reserve",
        "write_task.after_task_write",
        "write_task.after_task_created",
        "write_task.after_commit",
    )
    path = "/tasks/create"

    def __init__(self, state_dir: str, failpoints: Mapping[str, str]):
        self.ports = ports(state_dir)
        command = [sys.executable, os.path.join(HERE, "serve.py")]
        super().__init__(state_dir, failpoints, command, HERE, port=int(self.ports["INGRESS_PORT"]))

    def request_headers(self, task: Any, client_submission_id: str | None) -> dict[str, str]:
        """Restate's idempotency-key header, and the key again in X-Retryproof-Key:
        Restate does not pass its own header on to the handler, which records the key
        with the effect so that the listing can name it. Restate never reads the copy."""
        headers = super().request_headers(task, client_submission_id)
        if client_submission_id is not None:
            headers["X-Retryproof-Key"] = client_submission_id
        return headers

    @contextlib.contextmanager
    def _serving(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.close()

    def _await_service(self) -> None:
        """The ingress listens before the service is registered; serve only once the
        server knows it (bounded), so no call meets a 404 of a starting server."""
        super()._await_service()
        deadline = time.monotonic() + START_TIMEOUT_S
        url = f"http://127.0.0.1:{self.ports['ADMIN_PORT']}/services/tasks"
        while time.monotonic() < deadline and self.service.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        self.service.kill()
        raise RuntimeError("the Restate server did not list the service 'tasks'")


def main() -> int:
    return serve_hosted(RestateRuntime, "restate harness")


if __name__ == "__main__":
    sys.exit(main())
