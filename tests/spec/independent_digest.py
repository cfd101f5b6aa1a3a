"""A second, independent write-task-v1 implementation, written from the brief's rules.

It shares no code with ``retryproof.spec.digest`` or ``retryproof.spec.jcs``: serialization is the ``rfc8785``
package, line endings a regular expression, validity an explicit table, duplicate keys
its own parse hook. The golden vectors and the CLI are checked against it, so a bug in
``spec`` cannot certify itself by producing the vectors it is then compared with.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

import rfc8785

SCALARS = ["sender", "recipient", "subject", "body", "priority", "thread_key", "parent", "risk_level"]
ARRAYS = ["references", "depends_on"]
_LINE_BREAK = re.compile(r"\r\n?")


class Rejected(Exception):
    """The task is invalid_request; ``field`` names the offending part."""

    def __init__(self, field: str):
        super().__init__(field)
        self.field = field


def normalized(text: str) -> str:
    """LF line endings, then NFC."""
    return unicodedata.normalize("NFC", _LINE_BREAK.sub("\n", text))


def _text(value: str, field: str) -> str:
    try:
        value.encode("utf-8")  # a lone surrogate has no UTF-8 form
    except UnicodeEncodeError:
        raise Rejected(field) from None
    return normalized(value)


def is_unicode(value: Any) -> bool:
    """Whether every string in ``value`` has a UTF-8 form (holds no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def canonical(task: Any) -> dict[str, Any]:
    if type(task) is not dict:
        raise Rejected("task")
    for key in task:
        if key not in SCALARS and key not in ARRAYS:
            raise Rejected(f"task.{key}")
    out: dict[str, Any] = {}
    for key in SCALARS:
        value = task.get(key)
        if value is not None and type(value) is not str:
            raise Rejected(f"task.{key}")
        out[key] = value if value is None else _text(value, f"task.{key}")
    for key in ARRAYS:
        value = task.get(key)
        if value is not None and type(value) is not list:
            raise Rejected(f"task.{key}")
        items = []
        for index, item in enumerate(value or []):
            if type(item) is not str:
                raise Rejected(f"task.{key}[{index}]")
            items.append(_text(item, f"task.{key}[{index}]"))
        out[key] = items
    return out


def canonical_text(task: Any) -> bytes:
    return rfc8785.dumps(canonical(task))


def digest(task: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_text(task)).hexdigest()


def parse_task_text(text: str) -> Any:
    """Parse a task's JSON text; a key repeated in the task object is rejected.

    The golden vectors and the generated lines only repeat top-level keys, so the
    hook only needs to know the outermost object (the last one it sees)."""
    repeated: list[str] = []

    def pairs_hook(pairs):
        keys = [key for key, _ in pairs]
        repeated[:] = [key for index, key in enumerate(keys) if key in keys[:index]][:1]
        return dict(pairs)

    task = json.loads(text, object_pairs_hook=pairs_hook)
    if repeated and isinstance(task, dict):
        raise Rejected(f"task.{repeated[0]}")
    return task


def answer_line(text: str, number: int) -> str:
    """What ``retryproof digest --jsonl`` must print for line ``number``, up to the error detail."""
    try:
        return digest(parse_task_text(text))
    except Rejected as exc:
        return f"error invalid_request line {number} {exc.field}:"
