"""The Django app around django-idempotency-key: one route, ``POST /tasks``.

Configured as the library's README shows: ``IdempotencyKeyMiddleware`` after Django's
own middleware, storage ``CacheKeyStorage`` on Django's database cache (SQLite in the
state directory: the most durable backend that runs offline), the default
``ThreadLock``, the default 409 status for a replay. The cache never expires entries
(``TIMEOUT: None``; Django's default would drop them after 300 s). Served by waitress
on 127.0.0.1:$PORT (the harness's) or $RETRYPROOF_PORT (a binding's, ``binding.yaml``).

The view is the application: it validates the task (400), writes it with the shared
task store and answers 201 with its identity. It is marked ``idempotency_key_optional``
so that a request without the header still works (the legacy path).
"""

from __future__ import annotations

import json
import os

import django
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from retryproof.adapters.implementations.task_store import TaskStore
from retryproof.adapters.python_host import HostedRuntime
from retryproof.spec.digest import ContractError, request_digest
from retryproof.spec.protocol import parse_failpoints

STATE_DIR = os.environ["RETRYPROOF_STATE_DIR"]

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["127.0.0.1"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="retryproof-loopback-only",
    INSTALLED_APPS=["idempotency_key"],
    MIDDLEWARE=["idempotency_key.middleware.IdempotencyKeyMiddleware"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.path.join(STATE_DIR, "django.sqlite")}},
    CACHES={
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "idempotency_key_cache",
            "TIMEOUT": None,
        }
    },
    IDEMPOTENCY_KEY={"STORAGE": {"CLASS": "idempotency_key.storage.CacheKeyStorage"}},
)
django.setup()

from idempotency_key.decorators import idempotency_key  # noqa: E402  (needs configured settings)

STORE = TaskStore(STATE_DIR)
# The failpoints inside the app; after_commit is the harness's (after the response).
FAILPOINTS = HostedRuntime(STATE_DIR, parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS")))


@csrf_exempt
@require_POST
@idempotency_key(optional=True)
def create_task(request: HttpRequest) -> JsonResponse:
    try:
        task = json.loads(request.body)
        digest = request_digest(task)
    except (ValueError, ContractError) as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    task_id = TaskStore.new_id()
    submission_id = request.headers.get("Idempotency-Key")
    STORE.write(
        task_id, {"task_id": task_id, "task": task, "client_submission_id": submission_id, "request_digest": digest}
    )
    FAILPOINTS.failpoint("write_task.after_task_write")  # fail: OSError, a 500 from Django
    return JsonResponse(
        {
            "task_id": task_id,
            "task_path": STORE.path(task_id),
            "request_digest": digest,
            "caller": request.headers.get("X-Retryproof-Call"),
        },
        status=201,
    )


urlpatterns = [path("tasks", create_task)]


def main() -> None:
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application
    from waitress import serve

    call_command("createcachetable", verbosity=0)
    serve(
        get_wsgi_application(),
        host="127.0.0.1",
        port=int(os.environ.get("PORT") or os.environ["RETRYPROOF_PORT"]),
        threads=8,
        _quiet=True,
    )


if __name__ == "__main__":
    main()
