"""The write-task-v1 request digest and the submission-id rule.

One module, imported by the kit, the reference runtime and the CLI alike, so that
"the same request" means exactly one thing everywhere. The rules are stated as data in
``spec/retryproof.yaml`` (``digest``) and pinned by ``spec/vectors/write-task-v1.json``.
"""

from __future__ import annotations

import re
import unicodedata

from retryproof.spec.jcs import canonical_bytes

TYPE_CHECKING = False  # not typing's: importing typing would be paid at every harness start
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "ARRAY_FIELDS",
    "DIGEST_SCHEMA_VERSION",
    "INVOCATION_FIELDS",
    "SCALAR_FIELDS",
    "SUBMISSION_ID_PATTERN",
    "TASK_FIELDS",
    "ContractError",
    "canonical_json",
    "canonical_task",
    "check_submission_id",
    "request_digest",
]

DIGEST_SCHEMA_VERSION = "write-task-v1"
SCALAR_FIELDS = ("sender", "recipient", "subject", "body", "priority", "thread_key", "parent", "risk_level")
ARRAY_FIELDS = ("references", "depends_on")
#: Every field of the task object, in this order wherever the kit lists them.
TASK_FIELDS = SCALAR_FIELDS + ARRAY_FIELDS
# Names a caller is likely to put inside the task by mistake; they belong to the call.
INVOCATION_FIELDS = ("trace_id", "retry_count", "call_time", "attempt", "connection_id", "client_submission_id")
SUBMISSION_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class ContractError(Exception):
    """A request the contract rejects before anything is written.

    ``code`` is the protocol error code, ``field`` a JSON-path-like name of the
    offending part (``task.references[2]``), ``detail`` what is wrong with it.
    A plain exception rather than a frozen dataclass: Python sets ``__traceback__``
    on whatever is raised, and a frozen instance refuses that inside context managers.
    """

    def __init__(self, code: str, field: str, detail: str):
        super().__init__(code, field, detail)
        self.code = code
        self.field = field
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}"


def _invalid(field: str, detail: str) -> ContractError:
    return ContractError("invalid_request", field, detail)


def _normalize(text: str, field: str) -> str:
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        raise _invalid(field, "string is not valid Unicode (lone surrogate)")
    # Line endings first, so that NFC sees the same text whatever the caller's platform.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return unicodedata.normalize("NFC", text)


def canonical_task(task: Any) -> dict[str, Any]:
    """Return the canonical task object: ten keys, nulls and empty arrays filled in,
    every string normalized. Raises ``ContractError`` for anything else."""
    if not isinstance(task, dict):
        raise _invalid("task", f"must be an object, got {_json_type(task)}")
    for key in task:
        if key not in SCALAR_FIELDS and key not in ARRAY_FIELDS:
            hint = " (invocation data travels outside the task object)" if key in INVOCATION_FIELDS else ""
            raise _invalid(f"task.{key}", f"is not a write-task-v1 field{hint}")
    canonical: dict[str, Any] = {}
    for key in SCALAR_FIELDS:
        value = task.get(key)
        if value is not None and not isinstance(value, str):
            raise _invalid(f"task.{key}", f"must be a string or null, got {_json_type(value)}")
        canonical[key] = None if value is None else _normalize(value, f"task.{key}")
    for key in ARRAY_FIELDS:
        value = task.get(key)
        if value is None:
            canonical[key] = []
            continue
        if not isinstance(value, list):
            raise _invalid(f"task.{key}", f"must be an array of strings or null, got {_json_type(value)}")
        items = []
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise _invalid(f"task.{key}[{index}]", f"must be a string, got {_json_type(item)}")
            items.append(_normalize(item, f"task.{key}[{index}]"))
        canonical[key] = items
    return canonical


def canonical_json(task: Any) -> bytes:
    """The RFC 8785 bytes of the canonical task: what the digest hashes."""
    return canonical_bytes(canonical_task(task))


def request_digest(task: Any) -> str:
    """``sha256:<lowercase hex>`` of the canonical task."""
    import hashlib  # here, not at module level: loading OpenSSL is paid only by a harness that digests

    return "sha256:" + hashlib.sha256(canonical_json(task)).hexdigest()


def check_submission_id(value: Any) -> str:
    """Return ``value`` if it is a valid ``client_submission_id``, else raise.

    The pattern keeps ids usable as file names: no separators, no leading dot, ASCII only.
    """
    if not isinstance(value, str):
        raise ContractError(
            "invalid_submission_id", "client_submission_id", f"must be a string, got {_json_type(value)}"
        )
    if not SUBMISSION_ID_PATTERN.fullmatch(value):
        raise ContractError(
            "invalid_submission_id",
            "client_submission_id",
            f"{value[:40]!r} does not match {SUBMISSION_ID_PATTERN.pattern}",
        )
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
