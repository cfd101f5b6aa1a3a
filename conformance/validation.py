"""Run-time validation of harness results against the shipped JSON Schemas.

Each op's result is checked against ``$defs/<op>_result`` of
``spec/schemas/harness-response.json``; a result that violates its schema is a
scenario failure carrying the validator's message.
"""

from __future__ import annotations

from functools import cache
from typing import Any, Mapping

import spec

RESPONSE_SCHEMA = "harness-response"


@cache
def _validator(op: str):
    document = spec.schema(RESPONSE_SCHEMA)
    if f"{op}_result" not in document.get("$defs", {}):
        return None
    base = spec.validator(RESPONSE_SCHEMA)
    return base.evolve(schema={"$ref": f"{document['$id']}#/$defs/{op}_result"})


def has_schema(op: str) -> bool:
    return _validator(op) is not None


def result_problem(op: str, result: Mapping[str, Any]) -> str | None:
    """Why ``result`` is not a valid ``op`` result, or None when it is."""
    validator = _validator(op)
    if validator is None:
        return None
    error = next(iter(sorted(validator.iter_errors(result), key=lambda e: list(e.absolute_path))), None)
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(result)"
    return f"{op} result violates its schema at {where}: {error.message[:300]}"
