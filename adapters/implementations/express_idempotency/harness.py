"""retryproof-harness/1 for express-idempotency (Node, Express), over HTTP: starts
``server.js`` (the Express app, Redis data adapter) and translates every op into
requests to it (``http_service``).

Run with this folder's environment (``./setup install``; Redis from ``./setup start``)::

    .venv/bin/python harness.py --redis-url redis://127.0.0.1:6391
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from retryproof.adapters.implementations.http_service import HttpServiceRuntime
from retryproof.adapters.implementations.namespace import state_namespace
from retryproof.adapters.python_host import check_armed, handlers_for
from retryproof.spec.digest import request_digest
from retryproof.spec.protocol import parse_failpoints, serve

HERE = os.path.dirname(os.path.abspath(__file__))


def _installed(package: str) -> str:
    with open(os.path.join(HERE, "node_modules", package, "package.json"), encoding="utf-8") as handle:
        return json.load(handle)["version"]


def library_version() -> str:
    """The library's version, then its Redis adapter's and Express's, as installed."""
    others = ("express-idempotency-redis-adapter", "express")
    return ", ".join([_installed("express-idempotency"), *(f"{name} {_installed(name)}" for name in others)])


class ExpressIdempotency(HttpServiceRuntime):
    # The route runs after the middleware stored the request; a crash there leaves the
    # record without a response (the library's in-progress state). No separate
    # reservation step exists to stop at, so only these two are offered. Both are
    # server.js's: after_commit is in the route just before the answer is sent (armed
    # there, node dies before the answer reaches this harness, whose own point after
    # it is then never reached).
    failpoints = ("write_task.after_task_write", "write_task.after_commit")
    # The library's own refusals: 409 "a previous request is still in progress",
    # 417 "misuse of the idempotency key" (same key, another request).
    status_codes = {409: "in_progress", 417: "key_misuse"}

    def __init__(self, state_dir: str, failpoints: Any, redis_url: str):
        self.implementation = {"name": "express-idempotency", "version": library_version(), "language": "javascript"}
        # The app keeps its Redis keys under this state directory's name (server.js).
        environment = {"REDIS_URL": redis_url, "REDIS_NAMESPACE": state_namespace(state_dir)}
        super().__init__(state_dir, failpoints, ["node", os.path.join(HERE, "server.js")], HERE, environment)

    def request_headers(self, task: Any, client_submission_id: str | None) -> dict[str, str]:
        # The app's request validation and digest live here (the kit's own code), not
        # in JavaScript: the library never sees them, so no decision moves.
        return {"X-Request-Digest": request_digest(task), **super().request_headers(task, client_submission_id)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args(argv)
    try:
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        check_armed(armed, ExpressIdempotency.failpoints)
        runtime = ExpressIdempotency(os.environ["RETRYPROOF_STATE_DIR"], armed, args.redis_url)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        print(f"express-idempotency harness: {exc}", file=sys.stderr)
        return 2
    try:
        serve(handlers_for(runtime))
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
