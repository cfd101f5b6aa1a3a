"""Run-time validation of harness results against the shipped JSON Schemas.

Each op's result is checked against ``$defs/<op>_result`` of
``spec/schemas/harness-response.json``; a result that violates its schema is a
scenario failure carrying the validator's message.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Mapping
from functools import cache
from typing import Any

from retryproof import spec
from retryproof.spec.schema_messages import schema_message

RESPONSE_SCHEMA = "harness-response"

#: Results that list records, by the field holding the list. A run lists the same
#: records again and again (FUZZ-MODEL after every step, each listing longer than the
#: last), and the schema judges each record alone (``items``, nothing across them), so
#: a record already found valid is not validated again: only the envelope and the
#: records not seen before are. Validating every record of every listing made
#: validation most of FUZZ-MODEL's own CPU time.
LISTED_RECORDS = {"list_tasks": "tasks"}
#: The JSON texts (keys sorted) of records found valid, and of other results found
#: valid (after their op and a newline, which no record's text begins with): a run gets
#: the same answer again and again (a retried id's ``reused``, FUZZ-MODEL's replays:
#: 319 distinct texts in the reference's 693 write_task results, seed 1), and the same
#: JSON judged by the same schema is judged the same (results reach the kit parsed from
#: JSON, a harness's line or a binding's answer, so no tuple passes for the list whose
#: text it shares). Cleared when it grows past ``_MAX_VALID_RECORDS``, which only costs
#: validating them again; a text longer than ``_MAX_REMEMBERED_CHARS`` (a task of
#: megabytes) is validated each time rather than kept.
_valid_records: set[str] = set()
_MAX_VALID_RECORDS = 100_000
_MAX_REMEMBERED_CHARS = 64 * 1024


def result_schema_ops() -> set[str]:
    """The ops whose results have a shipped schema."""
    return {name[: -len("_result")] for name in spec.schema(RESPONSE_SCHEMA)["$defs"] if name.endswith("_result")}


@cache
def _validator(op: str):
    if op not in result_schema_ops():
        return None
    return spec.validator(f"{RESPONSE_SCHEMA}#/$defs/{op}_result")


def prepare(op: str) -> None:
    """Build ``op``'s validator now. The first one built imports jsonschema (about 35 ms
    of CPU), which ``runner.handshake`` pays on another thread while its harness starts
    instead of after its hello, on every run's way to its first scenario. A failure is
    left to ``result_problem``, which builds it again on the caller's thread (a failed
    build is not cached), where the CLI reports it: no thread's traceback."""
    with contextlib.suppress(Exception):
        _validator(op)


def result_problem(op: str, result: Mapping[str, Any]) -> str | None:
    """Why ``result`` is not a valid ``op`` result, or None when it is: the path and
    the rule that failed first, then what was found, in JSON. An op the protocol does
    not define has no schema; the kit never sends one expecting success."""
    validator = _validator(op)
    if validator is None:
        return None
    unseen = _unseen_records(op, result)
    seen = None if unseen is not None or op in LISTED_RECORDS else _json_text(result)
    if seen is not None:
        seen = f"{op}\n{seen}"
        if seen in _valid_records:
            return None
    if unseen is not None:
        field, texts = unseen
        if next(validator.iter_errors({**result, field: list(texts.values())}), None) is None:
            _remember(texts)
            return None
        # Invalid: validated whole below, so the message names the record's own index.
    error = min(validator.iter_errors(result), key=lambda e: list(map(str, e.absolute_path)), default=None)
    if error is None:
        if seen is not None:
            _remember((seen,))
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(result)"
    return f"{op} result violates its schema at {where} (rule {error.validator}): {schema_message(error)}"


def _unseen_records(op: str, result: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """For a result that lists records: its field and the records not yet found
    valid, by JSON text; None for any other result (or one that is not JSON)."""
    field = LISTED_RECORDS.get(op)
    if field is None or not isinstance(result, Mapping) or not isinstance(result.get(field), list):
        return None
    texts: dict[str, Any] = {}
    for record in result[field]:
        text = _json_text(record)
        if text is None:  # a record that is not JSON
            return None
        texts[text] = record
    return field, {text: record for text, record in texts.items() if text not in _valid_records}


def _json_text(value: Any) -> str | None:
    """``value``'s JSON text, keys sorted; None when it is not JSON."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError):
        return None


def _remember(texts: Collection[str]) -> None:
    if len(_valid_records) + len(texts) > _MAX_VALID_RECORDS:
        _valid_records.clear()
    _valid_records.update(text for text in texts if len(text) <= _MAX_REMEMBERED_CHARS)
