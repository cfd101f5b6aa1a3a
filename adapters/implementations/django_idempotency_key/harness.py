"""retryproof-harness/1 for django-idempotency-key, over HTTP: starts ``service.py``
(the Django app) and translates every op into requests to it (``http_service``).

Run with this folder's environment (``./setup install``)::

    .venv/bin/python harness.py
"""

from __future__ import annotations

import os
import sys

from retryproof.adapters.implementations.http_service import HttpServiceRuntime
from retryproof.adapters.implementations.versions import stack_version
from retryproof.adapters.python_host import check_armed, handlers_for
from retryproof.spec.protocol import parse_failpoints, serve

HERE = os.path.dirname(os.path.abspath(__file__))


class DjangoIdempotencyKey(HttpServiceRuntime):
    implementation = {
        "name": "django-idempotency-key",
        "version": stack_version("django-idempotency-key", "Django", "waitress"),
        "language": "python",
    }
    # No reservation exists before the view runs, so after_reserve and
    # after_task_created have no place; after_commit is after the stored response.
    failpoints = ("write_task.after_task_write", "write_task.after_commit")
    # The library's own refusal: its lock timed out (resource_locked).
    status_codes = {423: "in_progress"}


def main() -> int:
    try:
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        check_armed(armed, DjangoIdempotencyKey.failpoints)
        runtime = DjangoIdempotencyKey(
            os.environ["RETRYPROOF_STATE_DIR"], armed, [sys.executable, os.path.join(HERE, "service.py")], HERE
        )
    except (ValueError, KeyError, RuntimeError) as exc:
        print(f"django-idempotency-key harness: {exc}", file=sys.stderr)
        return 2
    try:
        serve(handlers_for(runtime))
    finally:
        runtime.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
