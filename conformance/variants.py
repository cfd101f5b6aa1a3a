"""The same request in different bytes: tasks that write-task-v1 makes equal to a given one.

Built from the spec's field lists (``digest.TASK_FIELDS``), so a field added to the
contract is varied too, and only within a runtime's task model: a bound tool's
absent fields are never sent, not even as null. NORMALIZED-EQUAL sends every kind;
FUZZ-MODEL's ``submit`` step picks one. A runtime must answer each as the same request
(DIG-2): reuse, never a conflict. ``changed`` is the opposite: one real change, a
different request.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

from retryproof.spec.digest import ARRAY_FIELDS, SCALAR_FIELDS, TASK_FIELDS

VariantKind = Literal["same", "key_order", "explicit_nulls", "crlf", "lone_cr", "nfd"]
VARIANT_KINDS: tuple[VariantKind, ...] = get_args(VariantKind)
#: What each kind changes, as the evidence names it.
DESCRIPTIONS: dict[VariantKind, str] = {
    "same": "the same task",
    "key_order": "reversed key order",
    "explicit_nulls": "absent fields and empty arrays as null",
    "crlf": "CRLF line endings",
    "lone_cr": "lone CR line endings",
    "nfd": "NFD text",
}


def variant(task: Mapping[str, Any], kind: VariantKind, model: Sequence[str] = TASK_FIELDS) -> dict[str, Any]:
    """``task`` (a valid task object whose strings hold no CR) changed only in what
    write-task-v1 normalizes away (DIGEST-R3, DIGEST-R5): the request and its digest
    stay the same. ``model``: the fields the runtime has (explicit nulls only there)."""
    if kind == "same":
        return dict(task)
    if kind == "key_order":
        return dict(reversed(list(task.items())))
    if kind == "explicit_nulls":
        filled = {name: None for name in model}
        return filled | {name: value for name, value in task.items() if value != []}
    if kind == "crlf":
        return _every_string(task, lambda text: text.replace("\n", "\r\n"))
    if kind == "lone_cr":
        return _every_string(task, lambda text: text.replace("\n", "\r"))
    if kind == "nfd":
        return _every_string(task, lambda text: unicodedata.normalize("NFD", text))
    raise ValueError(f"unknown variant {kind!r}")


def changed(task: Mapping[str, Any]) -> dict[str, Any]:
    """``task`` with one real change, so a different request: its first text field
    gets more words (its first array one more item, when it has no text field)."""
    preferred = ("subject", "body", *SCALAR_FIELDS)
    text = next((name for name in preferred if isinstance(task.get(name), str)), None)
    if text is not None:
        return {**task, text: f"{task[text]} (another intent)"}
    array = next((name for name in ARRAY_FIELDS if name in task), None)
    if array is None:
        raise ValueError("a task with no field to change")
    return {**task, array: [*(task[array] or []), "another intent"]}


def _every_string(task: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any]:
    """``change`` applied to every string of the task, array items included."""
    changed: dict[str, Any] = {}
    for name, value in task.items():
        if isinstance(value, str):
            changed[name] = change(value)
        elif name in ARRAY_FIELDS and isinstance(value, list):
            changed[name] = [change(item) for item in value]
        else:
            changed[name] = value
    return changed
