"""retryproof-harness/1 for Powertools for AWS Lambda (Python) idempotency on Redis.

A task creation is a function decorated with Powertools' ``idempotent_function``, with
the ``RedisCachePersistenceLayer``: the idempotency key is the request's
``client_submission_id`` (``event_key_jmespath``), payload validation hashes the task
(``payload_validation_jmespath``, variant ``validation``). Whether a call runs the
function, returns a stored response or raises is decided by Powertools alone; this
file only translates. See README.md beside it for every mapping decision.

Usage (the interpreter of this folder's virtual environment, see ``./setup``)::

    .venv/bin/python harness.py --redis-url redis://127.0.0.1:PORT/0 --variant validation
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
import warnings
from collections.abc import Mapping
from typing import Any

import redis
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.cache import CachePersistenceLayer

from retryproof.adapters.implementations.namespace import state_namespace
from retryproof.adapters.implementations.task_store import StoreListing, TaskStore, creation_result
from retryproof.adapters.implementations.versions import stack_version
from retryproof.adapters.python_host import HostedRuntime, check_armed, handlers_for
from retryproof.spec.digest import check_submission_id, request_digest
from retryproof.spec.protocol import ProtocolError, parse_failpoints, serve

#: Powertools has no step between the function's return and saving COMPLETED that a
#: harness could stop at, so write_task.after_task_created is not offered.
FAILPOINTS = ("write_task.after_reserve", "write_task.after_task_write", "write_task.after_commit")
#: name suffix -> (payload validation on, local cache on)
VARIANTS = {"validation": (True, False), "no-validation": (False, False), "local-cache": (True, True)}
#: The remaining time a Lambda invocation reports to Powertools: AWS Lambda's default
#: function timeout. It sets the in-progress expiry of every record.
INVOCATION_TIMEOUT_MS = 3000


class LambdaContext:
    """What Powertools reads from a Lambda invocation's context: its remaining time."""

    def get_remaining_time_in_millis(self) -> int:
        return INVOCATION_TIMEOUT_MS


class PowertoolsRuntime(StoreListing, HostedRuntime):
    capabilities = ("write_task", "legacy", "tamper", "multiprocess")
    failpoints = FAILPOINTS

    def __init__(self, state_dir: str, failpoints: Mapping[str, str], redis_url: str, variant: str):
        super().__init__(state_dir, failpoints)
        validation, local_cache = VARIANTS[variant]
        self.store = TaskStore(state_dir)
        self.prefix = state_namespace(state_dir)
        self.redis = redis.Redis.from_url(redis_url, decode_responses=True)
        # The server comes from the system's packages, not a pin: its version is the one that ran.
        server = self.redis.info("server")["redis_version"]
        self.implementation = {
            "name": f"powertools-idempotency-redis+{variant}",
            "version": f"{stack_version('aws-lambda-powertools', 'redis')}, redis-server {server}",
            "language": "python",
        }
        self.config = IdempotencyConfig(
            event_key_jmespath="client_submission_id",
            payload_validation_jmespath="task" if validation else None,
            raise_on_no_idempotency_key=False,  # a request without a key runs unguarded: the legacy path
            use_local_cache=local_cache,
        )
        self.config.register_lambda_context(LambdaContext())
        self.create = idempotent_function(
            data_keyword_argument="request",
            persistence_store=CachePersistenceLayer(client=self.redis),
            config=self.config,
            key_prefix=self.prefix,
        )(self._create)

    def _create(self, request: dict[str, Any], caller: str) -> dict[str, Any]:
        """The guarded function: Powertools has saved INPROGRESS before it runs."""
        self.failpoint("write_task.after_reserve")
        task_id = TaskStore.new_id()
        digest = request_digest(request["task"])
        record = {
            "task_id": task_id,
            "task": request["task"],
            "client_submission_id": request.get("client_submission_id"),
            "request_digest": digest,
        }
        self.store.write(task_id, record)
        self.failpoint("write_task.after_task_write")
        # caller: which call ran the function, to tell "this call wrote it" from
        # "Powertools returned a stored response" without a check of our own.
        return {"task_id": task_id, "task_path": self.store.path(task_id), "request_digest": digest, "caller": caller}

    def write_task(
        self, task: Any, client_submission_id: str | None = None, invocation: Any = None
    ) -> Mapping[str, Any]:
        request_digest(task)  # the application validates its request before anything else
        request: dict[str, Any] = {"task": task}
        if client_submission_id is not None:
            request["client_submission_id"] = check_submission_id(client_submission_id)
        caller = uuid.uuid4().hex
        try:
            output = self.create(request=request, caller=caller)
        except IdempotencyAlreadyInProgressError as exc:
            raise ProtocolError("in_progress", f"IdempotencyAlreadyInProgressError: {exc}") from None
        except IdempotencyValidationError as exc:
            raise ProtocolError("idempotency_validation_error", f"IdempotencyValidationError: {exc}") from None
        self.failpoint("write_task.after_commit")
        return creation_result(output, caller, client_submission_id)

    def tamper(self, action: str, **args: Any) -> Mapping[str, Any]:
        if action == "remove_task":
            self.store.remove(args["task_id"])
        elif action == "set_receipt_schema":
            self._rewrite_stored_response(args["client_submission_id"], args["digest_schema_version"])
        else:
            # occupy_task_path needs a preallocated task id; Powertools has none.
            raise ProtocolError("invalid_request", f"tamper action {action!r} has no counterpart in Powertools")
        return {}

    def _rewrite_stored_response(self, submission_id: str, schema_version: str) -> None:
        """As if an older application version had stored the response: the COMPLETED
        record's data names another digest schema (Powertools stores JSON in Redis)."""
        layer = CachePersistenceLayer(client=self.redis)
        layer.configure(self.config, function_name=self._create.__name__, key_prefix=self.prefix)
        key = layer._get_hashed_idempotency_key({"client_submission_id": submission_id})
        item = json.loads(self.redis.get(key) or "null")
        if not isinstance(item, dict) or item.get("status") != "COMPLETED":
            raise ProtocolError("not_found", "no COMPLETED record for this submission")
        data = json.loads(item["data"])
        data["digest_schema_version"] = schema_version
        item["data"] = json.dumps(data)
        self.redis.set(key, json.dumps(item), keepttl=True)


def main(argv: list[str] | None = None) -> int:
    # Two warnings Powertools prints on every call of this mapping, neither a check:
    # the legacy path skipping persistence (by design here) and the deprecated name of
    # the class CachePersistenceLayer still is. Silenced so that the harness's stderr in
    # a report shows what happened, not one line per call.
    warnings.filterwarnings("ignore", message="No idempotency key value found")
    warnings.filterwarnings("ignore", category=DeprecationWarning, message="RedisCachePersistenceLayer")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="validation")
    args = parser.parse_args(argv)
    try:
        armed = parse_failpoints(os.environ.get("RETRYPROOF_FAILPOINTS"))
        check_armed(armed, FAILPOINTS)
        runtime = PowertoolsRuntime(os.environ["RETRYPROOF_STATE_DIR"], armed, args.redis_url, args.variant)
        runtime.redis.ping()
    except (ValueError, KeyError, redis.RedisError) as exc:
        print(f"powertools harness: {exc}", file=sys.stderr)
        return 2
    serve(handlers_for(runtime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
