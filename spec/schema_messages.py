"""Schema violations in plain sentences: the rule first, then the value that broke it,
as short JSON, never a Python repr (``[true]``, not ``[True]``). The kit and the
binding reader (whose files a user wrote) both explain a jsonschema error this way."""

from __future__ import annotations

import json
from collections.abc import Mapping

TYPE_CHECKING = False  # not typing's: importing typing would be paid by every harness start
if TYPE_CHECKING:
    from typing import Any


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
    if keyword in ("oneOf", "anyOf"):
        return f"{short_json(value)} is none of the forms {owner} allows here"
    if keyword == "pattern":
        return f"{short_json(value)} does not match {short_json(rule)}"
    return f"{keyword} {short_json(rule)} is not met by {short_json(value)}"
