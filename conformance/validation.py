"""Run-time validation of harness results against the shipped JSON Schemas.

Each op's result is checked against ``$defs/<op>_result`` of
``spec/schemas/harness-response.json``; a result that violates its schema is a
scenario failure carrying the validator's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from retryproof import spec
from retryproof.spec.schema_messages import schema_message

RESPONSE_SCHEMA = "harness-response"


def result_schema_ops() -> set[str]:
    """The ops whose results have a shipped schema."""
    return {name[: -len("_result")] for name in spec.schema(RESPONSE_SCHEMA)["$defs"] if name.endswith("_result")}


@cache
def _validator(op: str):
    if op not in result_schema_ops():
        return None
    return spec.validator(f"{RESPONSE_SCHEMA}#/$defs/{op}_result")


def result_problem(op: str, result: Mapping[str, Any]) -> str | None:
    """Why ``result`` is not a valid ``op`` result, or None when it is: the path and
    the rule that failed first, then what was found, in JSON. An op the protocol does
    not define has no schema; the kit never sends one expecting success."""
    validator = _validator(op)
    if validator is None:
        return None
    error = min(validator.iter_errors(result), key=lambda e: list(map(str, e.absolute_path)), default=None)
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(result)"
    return f"{op} result violates its schema at {where} (rule {error.validator}): {schema_message(error)}"
