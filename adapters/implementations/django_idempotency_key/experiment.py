"""The django-idempotency-key behaviours behind the matrix's failures, without the kit.

Run with this folder's environment: ``.venv/bin/python experiment.py``. The library is
configured as in ``service.py`` (middleware, CacheKeyStorage on the database cache,
ThreadLock), on an in-memory SQLite database, and driven with Django's test client;
the script prints what it observed and exits 1 if the library did not behave as the
README says.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    ALLOWED_HOSTS=["testserver"],
    ROOT_URLCONF=__name__,
    SECRET_KEY="experiment",
    INSTALLED_APPS=["idempotency_key"],
    MIDDLEWARE=["idempotency_key.middleware.IdempotencyKeyMiddleware"],
    CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "TIMEOUT": None}},
    IDEMPOTENCY_KEY={"STORAGE": {"CLASS": "idempotency_key.storage.CacheKeyStorage"}},
)
django.setup()

from django.http import JsonResponse  # noqa: E402
from django.test import Client  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402
from idempotency_key.decorators import idempotency_key  # noqa: E402

EFFECTS: list[str] = []
SLOW = threading.Event()
FAIL_ONCE = threading.Event()


@csrf_exempt
@idempotency_key
def create(request):
    EFFECTS.append(request.body.decode())
    if SLOW.is_set():
        time.sleep(0.5)
    if FAIL_ONCE.is_set():
        FAIL_ONCE.clear()
        return JsonResponse({"error": "I/O error after the effect"}, status=500)
    return JsonResponse({"task": len(EFFECTS)}, status=201)


urlpatterns = [path("tasks", create)]


def post(key: str, body: object) -> int:
    text = body if isinstance(body, str) else json.dumps(body)
    return Client().post("/tasks", text, content_type="application/json", headers={"Idempotency-Key": key}).status_code


def main() -> int:
    ok = True
    statuses = [post("k1", {"subject": "a"}), post("k1", {"subject": "b"})]
    print(f"1. same key, another body: statuses {statuses}, effects {len(EFFECTS)}")
    ok &= statuses == [201, 201] and len(EFFECTS) == 2
    EFFECTS.clear()
    statuses = [post("k2", '{"subject": "a", "body": "x"}'), post("k2", '{"body": "x", "subject": "a"}')]
    print(f"2. same key, same object with its keys reordered: statuses {statuses}, effects {len(EFFECTS)}")
    ok &= statuses == [201, 201] and len(EFFECTS) == 2
    EFFECTS.clear()
    statuses = [post("k3", {"subject": "a"}), post("k3", {"subject": "a"})]
    print(f"3. same key, same body: statuses {statuses} (409 is the replay), effects {len(EFFECTS)}")
    ok &= statuses == [201, 409] and len(EFFECTS) == 1
    EFFECTS.clear()
    SLOW.set()
    results: list[int] = []
    callers = [threading.Thread(target=lambda: results.append(post("k4", {"subject": "a"}))) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    SLOW.clear()
    print(f"4. four concurrent duplicates: statuses {sorted(results)}, effects {len(EFFECTS)}")
    ok &= len(EFFECTS) > 1
    EFFECTS.clear()
    FAIL_ONCE.set()
    statuses = [post("k5", {"subject": "a"}), post("k5", {"subject": "a"})]
    print(f"5. an error response after the effect, then the retry: statuses {statuses}, effects {len(EFFECTS)}")
    ok &= statuses == [500, 201] and len(EFFECTS) == 2
    print("as described" if ok else "NOT as described: the library behaves differently from the README")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
