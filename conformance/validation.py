"""Run-time validation of harness results against the shipped JSON Schemas.

Each op's result is checked against ``$defs/<op>_result`` of
``spec/schemas/harness-response.json``; a result that violates its schema is a
scenario failure carrying the validator's message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from retryproof import spec

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


def short_json(value: Any, limit: int = 120) -> str:
    """``value`` as JSON, cut to ``limit`` characters: messages show values this way,
    never as Python reprs."""
    shown = json.dumps(value, ensure_ascii=False, default=str)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def schema_message(error: Any, owner: str = "the schema") -> str:
    """What a jsonschema error means, the rule before the value that broke it, values
    as short JSON; ``owner`` names the schema in the sentence."""
    value, rule, keyword = error.instance, error.validator_value, error.validator
    if keyword == "type":
        return f"{short_json(value)} is not of type {' or '.join(rule) if isinstance(rule, list) else rule}"
    if keyword == "const":
        return f"{short_json(value)} where {owner} requires {short_json(rule)}"
    if keyword == "required" and isinstance(value, Mapping):
        missing = [short_json(name) for name in rule if name not in value]
        return ", ".join(missing) + (" is missing" if len(missing) == 1 else " are missing")
    if keyword == "enum":
        return f"{short_json(value)} is not one of {', '.join(map(short_json, rule))}"
    if keyword in ("minItems", "maxItems") and isinstance(value, list):
        bound = "at least" if keyword == "minItems" else "at most"
        return f"{len(value)} item(s) where {owner} requires {bound} {rule}: {short_json(value)}"
    if keyword == "additionalProperties" and isinstance(value, Mapping):
        allowed = error.schema.get("properties", {})
        return ", ".join(short_json(name) for name in value if name not in allowed) + f" is not allowed by {owner}"
    if keyword == "not" and isinstance(rule, Mapping) and set(rule) == {"required"}:
        return ", ".join(map(short_json, rule["required"])) + " must be absent here"
    if keyword == "not" and isinstance(rule, Mapping) and set(rule) == {"const"}:
        return f"{short_json(value)} is the one value {owner} forbids here"
    if keyword == "pattern":
        return f"{short_json(value)} does not match {short_json(rule)}"
    return f"{keyword} {short_json(rule)} is not met by {short_json(value)}"
