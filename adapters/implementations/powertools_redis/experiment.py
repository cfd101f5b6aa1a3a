"""The Powertools idempotency behaviours behind the matrix's failures, without the kit.

Needs the Redis server of ``./setup start``. Run with this folder's environment::

    .venv/bin/python experiment.py [--redis-url redis://127.0.0.1:6390/0]

Each part uses the library alone on a fresh key prefix, prints what it observed, and
the script exits 1 if Powertools did not behave as the README says.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import redis
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer


class Context:
    def __init__(self, remaining_ms: int):
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def guarded(client: redis.Redis, prefix: str, body, validation: bool = False, remaining_ms: int = 3000):
    config = IdempotencyConfig(event_key_jmespath="id", payload_validation_jmespath="task" if validation else None)
    config.register_lambda_context(Context(remaining_ms))
    return idempotent_function(
        data_keyword_argument="request",
        persistence_store=CachePersistenceLayer(client=client),
        config=config,
        key_prefix=prefix,
    )(body)


def outcome(function, request) -> str:
    try:
        return f"returned {function(request=request)!r}"
    except Exception as exc:
        return f"raised {type(exc).__name__}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6390/0")
    parser.add_argument("--crash-child", nargs=2, metavar=("PREFIX", "EFFECTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    client = redis.Redis.from_url(args.redis_url, decode_responses=True)

    if args.crash_child:  # part 4's first attempt: the effect, then SIGKILL before COMPLETED
        prefix, effects = args.crash_child

        def effect_then_die(request):
            client.rpush(effects, "effect")
            os.kill(os.getpid(), signal.SIGKILL)

        guarded(client, prefix, effect_then_die, remaining_ms=1000)(request={"id": "order-4"})
        return 0

    run = "experiment-" + uuid.uuid4().hex[:8]
    ok = True

    # 1. Payload validation on: the COMPLETED record has no validation hash.
    create = guarded(client, run + "-1", lambda request: {"task_id": "T-1"}, validation=True)
    first = outcome(create, {"id": "order-1", "task": {"subject": "x"}})
    second = outcome(create, {"id": "order-1", "task": {"subject": "x"}})
    stored = json.loads(client.get(f"{run}-1#{_hash('order-1')}") or "{}")
    print(f"1. validation on, identical retry: first {first}, retry {second}; stored fields {sorted(stored)}")
    ok &= second == f"raised {IdempotencyValidationError.__name__}" and "validation" not in stored

    # 2. A concurrent duplicate is refused at once instead of waiting for the holder.
    started = threading.Event()

    def slow(request):
        started.set()
        time.sleep(1.0)
        return {"task_id": "T-2"}

    create = guarded(client, run + "-2", slow)
    holder = threading.Thread(target=outcome, args=(create, {"id": "order-2"}))
    holder.start()
    started.wait(5)
    begun = time.monotonic()
    duplicate = outcome(create, {"id": "order-2"})
    waited = time.monotonic() - begun
    holder.join()
    print(f"2. duplicate while the first runs: {duplicate} after {waited:.3f}s")
    ok &= duplicate == f"raised {IdempotencyAlreadyInProgressError.__name__}" and waited < 0.5

    # 3. A handler failure after its effect deletes the record; the retry acts again.
    effects = []

    def effect_then_fail(request):
        effects.append("effect")
        if len(effects) == 1:
            raise OSError(5, "I/O error after the effect")
        return {"task_id": "T-3"}

    create = guarded(client, run + "-3", effect_then_fail)
    failed, retried = outcome(create, {"id": "order-3"}), outcome(create, {"id": "order-3"})
    print(f"3. failure after the effect: first {failed}, retry {retried}; effects {len(effects)}")
    ok &= failed == "raised OSError" and len(effects) == 2

    # 4. A crash after the effect: INPROGRESS until its expiry, then a second effect.
    key = run + "-4-effects"
    subprocess.run(
        [sys.executable, __file__, "--redis-url", args.redis_url, "--crash-child", run + "-4", key], timeout=60
    )
    create = guarded(client, run + "-4", lambda request: client.rpush(key, "effect") and {"task_id": "T-4"})
    early = outcome(create, {"id": "order-4"})
    time.sleep(1.2)
    late = outcome(create, {"id": "order-4"})
    print(
        f"4. crash after the effect: retry at once {early}; after the in-progress expiry {late}; effects {client.llen(key)}"
    )
    ok &= early == f"raised {IdempotencyAlreadyInProgressError.__name__}" and client.llen(key) == 2

    print("as described" if ok else "NOT as described: Powertools behaves differently from the README")
    return 0 if ok else 1


def _hash(value: str) -> str:
    """Powertools' key hash of a string key (md5 of its JSON form, the default hash function)."""
    import hashlib

    return hashlib.md5(json.dumps(value).encode()).hexdigest()


if __name__ == "__main__":
    sys.exit(main())
